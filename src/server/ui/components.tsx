/** @jsxImportSource hono/jsx */
// Small building blocks of console pages: forms that carry the CSRF token by themselves, fields
// with labels, buttons, badges, tables, empty states, typed confirmations and times. Everything
// renders escaped text (hono/jsx); no inline style or script (the CSP forbids both).

import { createContext, useContext } from "hono/jsx";
import type { Child } from "hono/jsx";

/** What every component may need from the page being rendered; provided by the Layout. */
export interface PageContextValue {
  readonly csrf: string;
}

export const PageContext = createContext<PageContextValue>({ csrf: "" });

/** A POST form to one of our own routes; adds the hidden CSRF field the server checks. */
export function PostForm(props: { action: string; children?: Child; class?: string; id?: string; label?: string }) {
  const { csrf } = useContext(PageContext);
  return (
    <form method="post" action={props.action} class={props.class} id={props.id} aria-label={props.label}>
      <input type="hidden" name="csrf" value={csrf} />
      {props.children}
    </form>
  );
}

export type ButtonVariant = "primary" | "secondary" | "danger" | "link";

export function Button(props: {
  variant?: ButtonVariant;
  type?: "submit" | "button";
  name?: string;
  value?: string;
  children?: Child;
  id?: string;
  formnovalidate?: boolean;
  small?: boolean;
}) {
  const cls = `btn btn-${props.variant ?? "secondary"}${props.small ? " btn-small" : ""}`;
  return (
    <button type={props.type ?? "submit"} class={cls} name={props.name} value={props.value} id={props.id} formnovalidate={props.formnovalidate}>
      {props.children}
    </button>
  );
}

/** A link styled as a button (navigation, never a state change: those are POST forms). */
export function LinkButton(props: { href: string; variant?: ButtonVariant; children?: Child }) {
  return (
    <a href={props.href} class={`btn btn-${props.variant ?? "secondary"}`}>
      {props.children}
    </a>
  );
}

export type FieldType = "text" | "email" | "password" | "url" | "number" | "search";

export interface FormFieldProps {
  readonly label: string;
  readonly name: string;
  readonly type?: FieldType;
  readonly value?: string;
  readonly hint?: Child;
  /** Shown under the field and linked with aria-describedby; marks the field invalid. */
  readonly error?: string;
  readonly required?: boolean;
  readonly autocomplete?: string;
  readonly placeholder?: string;
  readonly pattern?: string;
  readonly minlength?: number;
  readonly maxlength?: number;
  readonly autofocus?: boolean;
  readonly id?: string;
  /** Render a multi-line textarea instead of an input. */
  readonly multiline?: boolean;
}

/** A labelled input. Password fields never get a value back from the server. */
export function FormField(props: FormFieldProps) {
  const id = props.id ?? `f-${props.name}`;
  const described = [props.hint ? `${id}-hint` : "", props.error ? `${id}-error` : ""].filter(Boolean).join(" ") || undefined;
  const common = {
    id,
    name: props.name,
    required: props.required,
    autocomplete: props.autocomplete,
    placeholder: props.placeholder,
    minlength: props.minlength,
    maxlength: props.maxlength,
    autofocus: props.autofocus,
    "aria-describedby": described,
    "aria-invalid": props.error ? "true" : undefined,
  };
  return (
    <div class={`field${props.error ? " field-invalid" : ""}`}>
      <label for={id}>{props.label}</label>
      {props.multiline ? (
        <textarea {...common} rows={4}>
          {props.value ?? ""}
        </textarea>
      ) : (
        <input
          {...common}
          type={props.type ?? "text"}
          pattern={props.pattern}
          value={props.type === "password" ? undefined : props.value}
          spellcheck={props.type === "email" || props.type === "password" ? false : undefined}
        />
      )}
      {props.hint ? (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      ) : null}
      {props.error ? (
        <p class="field-error" id={`${id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

export type BadgeTone = "neutral" | "success" | "warning" | "danger" | "info";

export function Badge(props: { tone?: BadgeTone; children?: Child; id?: string }) {
  return (
    <span class={`badge badge-${props.tone ?? "neutral"}`} id={props.id}>
      {props.children}
    </span>
  );
}

/** Badge tones for the states the console shows, so a status looks the same on every page. */
export function toneOf(status: string): BadgeTone {
  if (["applied", "active", "enabled", "approved", "ok", "admin"].includes(status)) return "success";
  if (["pending", "member", "expiring"].includes(status)) return "warning";
  if (["rejected", "denied", "disabled", "revoked", "expired", "error", "blocked"].includes(status)) return "danger";
  if (["owner", "proxy", "current"].includes(status)) return "info";
  return "neutral";
}

export interface Column<T> {
  readonly label: string;
  readonly cell: (row: T) => Child;
  /** e.g. "num" (right-aligned) or "actions". */
  readonly class?: string;
}

/** A data table; on a phone each row becomes a card whose cells carry their column label. */
export function Table<T>(props: { caption?: string; columns: readonly Column<T>[]; rows: readonly T[]; empty?: Child; id?: string }) {
  if (props.rows.length === 0 && props.empty) return <>{props.empty}</>;
  return (
    <div class="table-wrap">
      <table class="table" id={props.id}>
        {props.caption ? <caption>{props.caption}</caption> : null}
        <thead>
          <tr>
            {props.columns.map((col) => (
              <th scope="col" class={col.class}>
                {col.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <tr>
              {props.columns.map((col) => (
                <td class={col.class} data-label={col.label}>
                  <span class="cell">{col.cell(row)}</span>
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** What to show instead of an empty list: what the list is for, and what to do next. */
export function EmptyState(props: { title: string; children?: Child; action?: Child }) {
  return (
    <div class="empty">
      <p class="empty-title">{props.title}</p>
      {props.children ? <div class="empty-body">{props.children}</div> : null}
      {props.action ? <div class="empty-action">{props.action}</div> : null}
    </div>
  );
}

/** A titled block of a page. */
export function Section(props: { title: string; children?: Child; description?: Child; id?: string; tone?: "danger" }) {
  const headingId = `${props.id ?? props.title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}-title`;
  return (
    <section class={`card${props.tone === "danger" ? " card-danger" : ""}`} id={props.id} aria-labelledby={headingId}>
      <h2 id={headingId}>{props.title}</h2>
      {props.description ? <p class="card-description">{props.description}</p> : null}
      {props.children}
    </section>
  );
}

/** The form field name a ConfirmForm uses; check it on the server with `requireConfirmation`. */
export const CONFIRM_FIELD = "confirm";

/**
 * A destructive action behind a typed confirmation: the person types `phrase` (e.g. the vault's
 * name). The browser checks the pattern; the server checks again (requireConfirmation).
 */
export function ConfirmForm(props: { action: string; phrase: string; button: string; children?: Child; hidden?: Record<string, string> }) {
  return (
    <PostForm action={props.action} class="confirm-form">
      {props.children}
      {Object.entries(props.hidden ?? {}).map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      <FormField
        label={`Type ${props.phrase} to confirm`}
        name={CONFIRM_FIELD}
        required
        autocomplete="off"
        pattern={escapePattern(props.phrase)}
        hint="This cannot be undone."
      />
      <div class="actions">
        <Button variant="danger">{props.button}</Button>
      </div>
    </PostForm>
  );
}

/** Escapes the syntax characters only: `pattern` compiles with the `v` flag, where `\-` would be an error. */
function escapePattern(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/** A timestamp as readable UTC text, machine-readable in `datetime`. */
export function Time(props: { iso: string | null | undefined; empty?: string }) {
  if (!props.iso) return <span class="muted">{props.empty ?? "never"}</span>;
  return <time datetime={props.iso}>{formatTime(props.iso)}</time>;
}

export function formatTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

/** An inline code-ish name (vault, key, host): escaped, monospace, breaks anywhere on a phone. */
export function Name(props: { children?: Child }) {
  return <code class="name">{props.children}</code>;
}
