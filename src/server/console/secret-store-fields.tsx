/** @jsxImportSource hono/jsx */
// The fields of a secret store connection's forms, by kind and sign-in method (secret-store-kinds.ts
// says which), prefilled from the connection or from a refused form as typed (secret-store-form.ts
// reads what is posted). Secret fields (tokens, secret ids, keys, client secrets) are password inputs:
// never prefilled, never shown again, never put in a flash or a URL.

import { FormField } from "../ui/index.ts";
import type { TypedForm } from "./secret-store-form.ts";
import { authInput, stringOf, type FieldSpec, type KindSpec, type MethodSpec } from "./secret-store-kinds.ts";

function Field(props: { spec: FieldSpec; input: string; value?: string; typed?: TypedForm; tokenFiles?: readonly string[]; keepSecret?: boolean }) {
  const { spec } = props;
  const error = props.typed?.invalid === props.input ? props.typed.error : undefined;
  if (spec.name === "token_file" && props.tokenFiles?.length) {
    const chosen = props.typed ? props.typed.values[props.input] : props.value;
    return (
      <div class={`field${error ? " field-invalid" : ""}`}>
        <label for={`f-${props.input}`}>{spec.label}</label>
        <select id={`f-${props.input}`} name={props.input} aria-describedby={`f-${props.input}-hint`}>
          {props.tokenFiles.map((f) => (
            <option value={f} selected={f === chosen}>
              {f}
            </option>
          ))}
        </select>
        <p class="hint" id={`f-${props.input}-hint`}>
          The token files the operator listed in BROKER_SECRET_STORE_TOKEN_FILES; read again at every login.
        </p>
        {error ? <p class="field-error">{error}</p> : null}
      </div>
    );
  }
  if (spec.secret)
    return (
      <FormField
        label={spec.label}
        name={props.input}
        type="password"
        autocomplete="new-password"
        required={spec.required && !props.keepSecret}
        maxlength={65_536}
        hint={
          props.keepSecret ? "Empty keeps the current one. Sealed by the broker and never shown." : (spec.hint ?? "Sealed by the broker and never shown again.")
        }
        error={error}
      />
    );
  return (
    <FormField
      label={spec.label}
      name={props.input}
      value={props.typed ? (props.typed.values[props.input] ?? "") : props.value}
      required={spec.required}
      multiline={spec.multiline}
      placeholder={spec.placeholder}
      autocomplete="off"
      hint={spec.hint}
      error={error}
    />
  );
}

/** The kind's own settings (address, region, project, vault URL and their options), prefilled from `current`. */
export function SettingsFields(props: { kind: KindSpec; current?: Record<string, unknown>; typed?: TypedForm }) {
  return (
    <div class="form-grid">
      {props.kind.settings.map((spec) => (
        <div class={spec.multiline ? "field-wide" : undefined}>
          <Field spec={spec} input={spec.name} value={stringOf(props.current?.[spec.name])} typed={props.typed} />
        </div>
      ))}
    </div>
  );
}

/** The sign-in method's fields; `current` prefills the non-secret ones (role, token file, mount, tenant, client id). */
export function AuthFields(props: {
  method: MethodSpec;
  current?: Record<string, unknown>;
  typed?: TypedForm;
  tokenFiles?: readonly string[];
  /** The current sign-in's secrets are kept when left empty (a change form of the same method). */
  keepSecrets?: boolean;
}) {
  if (props.method.fields.length === 0)
    return (
      <p class="note" id="auth-nothing">
        Nothing to type: {props.method.help}.
      </p>
    );
  return (
    <div class="form-grid">
      {props.method.fields.map((spec) => (
        <Field
          spec={spec}
          input={authInput(spec.name)}
          value={stringOf(props.current?.[spec.name])}
          typed={props.typed}
          tokenFiles={props.tokenFiles}
          keepSecret={props.keepSecrets}
        />
      ))}
    </div>
  );
}

/** How often values are read again and how long the last one serves while the store cannot be reached. */
export function TimingFields(props: { refresh?: number; grace?: number; typed?: TypedForm }) {
  const value = (name: string, n: number | undefined) => (props.typed ? (props.typed.values[name] ?? "") : n === undefined ? "" : String(n));
  const error = (name: string) => (props.typed?.invalid === name ? props.typed.error : undefined);
  return (
    <div class="form-grid">
      <FormField
        label="Refresh every (seconds)"
        name="refresh_seconds"
        type="number"
        value={value("refresh_seconds", props.refresh)}
        placeholder="300"
        hint="10 to 86400. Each value is read again this often; a rotation reaches requests within one interval."
        error={error("refresh_seconds")}
      />
      <FormField
        label="Grace (seconds)"
        name="grace_seconds"
        type="number"
        value={value("grace_seconds", props.grace)}
        placeholder="300"
        hint="0 to 86400. How long the last value keeps serving while the store cannot be reached; 0 fails at once."
        error={error("grace_seconds")}
      />
    </div>
  );
}
