/** @jsxImportSource hono/jsx */
// The binding form of the Workload identity page: which of an issuer's tokens (claim conditions, one `claim = pattern`
// a line) get which vault, in which role, for how long at most. Read by the API's WorkloadBindingInput
// (workload-draft.ts); a refused form comes back as typed with the refusal beside its field.

import type { VaultRole } from "../../identity/index.ts";
import { Button, FormField, PostForm } from "../ui/index.ts";
import { RoleSelect } from "./one-time-link.tsx";
import { errorFor, FormError, SecondsField, TextBox, type FormState } from "./workload-issuer-form.tsx";

/** Short: the select shares a row with two other fields. */
const ROLE_HELP: Record<VaultRole, string> = {
  proxy: "proxy: uses its services",
  member: "member: also sets credentials",
  admin: "admin: manages the vault",
};

function VaultSelect(props: { id: string; vaults: readonly string[]; chosen: string; error?: string }) {
  return (
    <div class={`field${props.error ? " field-invalid" : ""}`}>
      <label for={props.id}>Vault</label>
      <select
        id={props.id}
        name="vault"
        required
        aria-describedby={`${props.id}-hint${props.error ? ` ${props.id}-error` : ""}`}
        aria-invalid={props.error ? "true" : undefined}
      >
        <option value="" selected={props.chosen === ""}>
          Choose a vault
        </option>
        {props.vaults.map((v) => (
          <option value={v} selected={v === props.chosen}>
            {v}
          </option>
        ))}
      </select>
      <p class="hint" id={`${props.id}-hint`}>
        The vault its sessions use.
      </p>
      {props.error ? (
        <p class="field-error" id={`${props.id}-error`}>
          {props.error}
        </p>
      ) : null}
    </div>
  );
}

/** Adds a binding to `issuer`; `vaults` are the ones it may bind to (all of them: the owner's page). */
export function BindingForm(props: { action: string; issuer: string; vaults: readonly string[]; state: FormState }) {
  const { draft } = props.state;
  const id = (f: string) => `b-${props.issuer}-${f}`;
  const err = (f: string) => errorFor(props.state, f);
  if (props.vaults.length === 0)
    return (
      <p class="muted" id={id("no-vaults")}>
        A binding gives a vault: <a href="/">create a vault</a> first.
      </p>
    );
  return (
    <PostForm action={props.action} id={`add-binding-${props.issuer}`} label={`Add a binding to ${props.issuer}`}>
      <FormError state={props.state} id={id("error")} shown={["name", "conditions", "vault", "max_session_seconds"]} />
      <FormField
        label="Name"
        name="name"
        id={id("name")}
        value={draft.name}
        required
        pattern="[a-z0-9][a-z0-9\-]{0,31}"
        maxlength={32}
        autocomplete="off"
        placeholder="e.g. deploy"
        hint={
          <>
            1-32 lower-case letters, digits or '-'. Its workloads act as the agent <code>wl-{props.issuer}-&lt;name&gt;</code>.
          </>
        }
        error={err("name")}
        autofocus={err("name") !== undefined}
      />
      <TextBox
        id={id("conditions")}
        name="conditions"
        label="Conditions"
        value={draft.conditions ?? ""}
        rows={4}
        placeholder={"repository = my-org/app\nref = refs/heads/main, refs/tags/v*"}
        hint={
          <>
            One <code>claim = pattern</code> a line; a token must match them all. A pattern is exact or a glob with <code>*</code> and <code>?</code>; several
            for one claim are separated by commas (or the claim is written again on another line), and any of them matches. A nested claim is named by its path:{" "}
            <code>kubernetes.io/namespace</code>.
          </>
        }
        error={err("conditions")}
      />
      <div class="form-grid">
        <VaultSelect id={id("vault")} vaults={props.vaults} chosen={draft.vault ?? ""} error={err("vault")} />
        <RoleSelect name="role" id={id("role")} ceiling="admin" selected={(draft.role || "proxy") as VaultRole} label="Role in the vault" help={ROLE_HELP} />
        <SecondsField
          id={id("max_session_seconds")}
          name="max_session_seconds"
          label="Longest session (seconds)"
          value={draft.max_session_seconds ?? ""}
          min={60}
          max={86_400}
          hint="60 to 86400; a session never outlives the token it was exchanged for."
          error={err("max_session_seconds")}
        />
      </div>
      <div class="actions">
        <Button variant="primary" id={id("submit")}>
          Add binding
        </Button>
      </div>
    </PostForm>
  );
}
