/** @jsxImportSource hono/jsx */
// Adding a secret store connection, in steps that are links (a GET each, so it works without
// JavaScript): which store, then its sign-in method, then one form with the kind's settings, the
// method's fields and the refresh timing. A refused form comes back as typed, its secret fields empty.

import { Button, FormField, LinkButton, PostForm, Section } from "../ui/index.ts";
import { AuthFields, SettingsFields, TimingFields } from "./secret-store-fields.tsx";
import type { TypedForm } from "./secret-store-form.ts";
import { KINDS, methodsFor, type KindSpec, type MethodSpec } from "./secret-store-kinds.ts";
import type { StoreScope } from "./secret-store-pages.tsx";

const addPath = (scope: StoreScope, query: Record<string, string>) => `${scope.base}?${new URLSearchParams(query).toString()}#add`;

/** The first step of adding: which store. */
function KindPicker(props: { scope: StoreScope }) {
  const owners = props.scope.vault === undefined;
  return (
    <ul class="pick-list" id="kind-picker">
      {KINDS.map((k) => (
        <li>
          <a class="pick" href={addPath(props.scope, { kind: k.kind })} id={`kind-${k.kind}`}>
            <span class="pick-name">{k.label}</span>
            <span class="pick-hosts pick-help">{k.help}</span>
            <span class="pick-auth">
              Sign in by{" "}
              {methodsFor(k, owners)
                .map((m) => m.label.toLowerCase())
                .join(", ")}
            </span>
          </a>
        </li>
      ))}
    </ul>
  );
}

/** The sign-in methods of a kind as links (a GET: the page shows that method's fields); the chosen one marked. */
export function MethodPicker(props: { methods: readonly MethodSpec[]; chosen: MethodSpec; href: (method: string) => string; id: string }) {
  if (props.methods.length === 1) return null;
  return (
    <nav class="method-picker" aria-label="Sign-in method" id={props.id}>
      <span class="muted small">Sign in with:</span>
      <ul>
        {props.methods.map((m) => (
          <li>
            <a href={props.href(m.method)} id={`${props.id}-${m.method}`} aria-current={m.method === props.chosen.method ? "true" : undefined}>
              {m.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}

export interface AddChoice {
  readonly kind: KindSpec;
  readonly method: MethodSpec;
  readonly typed?: TypedForm;
}

export function AddSection(props: { scope: StoreScope; choice?: AddChoice }) {
  const { scope, choice } = props;
  const description =
    scope.vault === undefined
      ? "A named connection to a store your team already uses. Share it with the vaults whose credentials may read from it."
      : `A connection that only ${scope.vault} uses; its human admins manage it.`;
  if (!choice)
    return (
      <Section title="Add a connection" id="add" description={description}>
        <KindPicker scope={scope} />
      </Section>
    );
  const { kind, method, typed } = choice;
  return (
    <Section title={`Add a ${kind.label} connection`} id="add" description={description}>
      <p class="type-line">
        <span class="muted">Store:</span> <strong id="kind-label">{kind.label}</strong>{" "}
        <a href={`${scope.base}#add`} id="change-kind">
          Change
        </a>
      </p>
      <MethodPicker
        methods={methodsFor(kind, scope.vault === undefined)}
        chosen={method}
        href={(m) => addPath(scope, { kind: kind.kind, method: m })}
        id="add-method"
      />
      <PostForm action={`${scope.base}?${new URLSearchParams({ kind: kind.kind, method: method.method }).toString()}`} id="add-store" label="Add a connection">
        <FormField
          label="Name"
          name="name"
          value={typed?.values.name}
          required
          pattern="[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?"
          maxlength={63}
          autocomplete="off"
          placeholder="e.g. prod-vault"
          hint="Lower-case letters, digits and hyphens. References start with it: name:path#field."
          error={typed?.invalid === "name" ? typed.error : undefined}
        />
        <SettingsFields kind={kind} typed={typed} />
        <fieldset>
          <legend>Sign-in: {method.label}</legend>
          <AuthFields method={method} typed={typed} tokenFiles={scope.tokenFiles} />
        </fieldset>
        <TimingFields typed={typed} />
        <div class="actions">
          <Button variant="primary" id="add-store-submit">
            Add connection
          </Button>
          <LinkButton href={scope.base}>Cancel</LinkButton>
        </div>
      </PostForm>
    </Section>
  );
}
