/** @jsxImportSource hono/jsx */
// The issuer form of the Workload identity page (workload-identity.tsx routes it): trust an issuer, or change one
// (its name fixed) — where its keys come from (OIDC discovery, a JWKS URL, or a key set pasted as a JWKS document),
// the audiences a token must name, the clock skew and whether a token id is required. Read by the API's
// WorkloadIssuerInput (workload-draft.ts); a refused form comes back as typed with the refusal beside its field.

import type { Child } from "hono/jsx";
import { Button, FormField, PostForm } from "../ui/index.ts";
import type { Draft, Refusal } from "./workload-draft.ts";

/** The form's fields as typed, and a refusal to show beside the field it names. */
export interface FormState {
  readonly draft: Draft;
  readonly refusal?: Refusal;
}

/** The refusal's words for `field`, when the refusal is about it. */
export const errorFor = (s: FormState, field: string) => (s.refusal?.field === field ? s.refusal.text : undefined);

/** A refusal none of the form's `shown` fields is marked with (a taken name is shown at the name), at the top of the form. */
export function FormError(props: { state: FormState; id: string; shown: readonly string[] }) {
  const r = props.state.refusal;
  if (!r || (r.field !== undefined && props.shown.includes(r.field))) return null;
  return (
    <p class="form-error" role="alert" id={props.id}>
      {r.text}
    </p>
  );
}

/** A labelled textarea in the monospace of the rules boxes (JWKS documents, claim conditions), with its hint and refusal. */
export function TextBox(props: { id: string; name: string; label: string; value: string; rows: number; hint: Child; error?: string; placeholder?: string }) {
  const described = [`${props.id}-hint`, props.error ? `${props.id}-error` : ""].filter(Boolean).join(" ");
  return (
    <div class={`field field-wide rules-field${props.error ? " field-invalid" : ""}`}>
      <label for={props.id}>{props.label}</label>
      <textarea
        id={props.id}
        name={props.name}
        rows={props.rows}
        class="rules-box"
        spellcheck={false}
        autocomplete="off"
        placeholder={props.placeholder}
        aria-describedby={described}
        aria-invalid={props.error ? "true" : undefined}
        autofocus={props.error ? true : undefined}
      >
        {props.value}
      </textarea>
      <p class="hint" id={`${props.id}-hint`}>
        {props.hint}
      </p>
      {props.error ? (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** A whole number of seconds between `min` and `max`. */
export function SecondsField(props: { id: string; name: string; label: string; value: string; min: number; max: number; hint: string; error?: string }) {
  return (
    <div class={`field${props.error ? " field-invalid" : ""}`}>
      <label for={props.id}>{props.label}</label>
      <input
        type="number"
        id={props.id}
        name={props.name}
        value={props.value}
        min={String(props.min)}
        max={String(props.max)}
        step="1"
        inputmode="numeric"
        autocomplete="off"
        aria-describedby={`${props.id}-hint${props.error ? ` ${props.id}-error` : ""}`}
        aria-invalid={props.error ? "true" : undefined}
        autofocus={props.error ? true : undefined}
      />
      <p class="hint" id={`${props.id}-hint`}>
        {props.hint}
      </p>
      {props.error ? (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/**
 * Adds an issuer (`name` absent: typed here) or changes the issuer `name` (the change form: its settings shown as
 * they are, its key set as the document given). `prefix` keeps the inputs' ids apart from other forms on the page.
 */
export function IssuerForm(props: { action: string; id: string; prefix: string; state: FormState; name?: string; submit: string }) {
  const { draft } = props.state;
  const id = (f: string) => `${props.prefix}-${f}`;
  const err = (f: string) => errorFor(props.state, f);
  return (
    <PostForm action={props.action} id={props.id} label={props.name ? `Change issuer ${props.name}` : "Trust an issuer"}>
      <FormError
        state={props.state}
        id={id("error")}
        shown={[...(props.name === undefined ? ["name"] : []), "issuer", "jwks_url", "jwks", "audiences", "clock_skew_seconds"]}
      />
      <div class="form-grid">
        {props.name === undefined ? (
          <FormField
            label="Name"
            name="name"
            id={id("name")}
            value={draft.name}
            required
            pattern="[a-z0-9][a-z0-9\-]{0,23}"
            maxlength={24}
            autocomplete="off"
            placeholder="e.g. github"
            hint={
              <>
                1-24 lower-case letters, digits or '-'. Its bindings' agents are named after it: <code>wl-&lt;name&gt;-&lt;binding&gt;</code>.
              </>
            }
            error={err("name")}
            autofocus={err("name") !== undefined}
          />
        ) : null}
        <FormField
          label="Issuer URL"
          name="issuer"
          type="url"
          id={id("issuer")}
          value={draft.issuer}
          required
          autocomplete="off"
          placeholder="https://token.actions.githubusercontent.com"
          hint="The iss its tokens carry, exactly."
          error={err("issuer")}
          autofocus={err("issuer") !== undefined}
        />
        <FormField
          label="JWKS URL (optional)"
          name="jwks_url"
          type="url"
          id={id("jwks_url")}
          value={draft.jwks_url}
          autocomplete="off"
          placeholder="https://issuer.example.com/keys"
          hint="Where its keys are, if it has no OIDC discovery document. Leave this and the key set empty to find the keys by discovery."
          error={err("jwks_url")}
          autofocus={err("jwks_url") !== undefined}
        />
      </div>
      <TextBox
        id={id("jwks")}
        name="jwks"
        label="Key set (optional)"
        value={draft.jwks ?? ""}
        rows={props.name && draft.jwks ? 8 : 4}
        placeholder={'{"keys": [{"kty": "EC", "kid": "…", "crv": "P-256", "x": "…", "y": "…"}]}'}
        hint={
          <>
            Its public keys as a JWKS document (<code>{'{"keys": [...]}'}</code>), for an issuer the broker cannot reach: instead of a JWKS URL. When it rotates
            its keys, paste the new document here.
          </>
        }
        error={err("jwks")}
      />
      <TextBox
        id={id("audiences")}
        name="audiences"
        label="Audiences"
        value={draft.audiences ?? ""}
        rows={2}
        placeholder="https://broker.example.com"
        hint="A token's aud must name one of them; separate them with commas or new lines. For a shared issuer such as GitHub's, pick one only your jobs ask for."
        error={err("audiences")}
      />
      <div class="form-grid">
        <SecondsField
          id={id("clock_skew_seconds")}
          name="clock_skew_seconds"
          label="Clock skew (seconds)"
          value={draft.clock_skew_seconds ?? ""}
          min={0}
          max={300}
          hint="How far the platform's clock may be off, for exp, nbf and iat: 0 to 300."
          error={err("clock_skew_seconds")}
        />
      </div>
      <div class="field">
        <label class="choice" for={id("require_jti")}>
          <input type="checkbox" id={id("require_jti")} name="require_jti" checked={draft.require_jti === "on"} aria-describedby={id("require_jti-hint")} />
          <span>Require a token id (jti)</span>
        </label>
        <p class="hint" id={id("require_jti-hint")}>
          Refuse a token without a jti, so that each token is exchanged only once.
        </p>
      </div>
      <div class="actions">
        <Button variant="primary" id={id("submit")}>
          {props.submit}
        </Button>
      </div>
    </PostForm>
  );
}
