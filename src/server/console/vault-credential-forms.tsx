/** @jsxImportSource hono/jsx */
// The credentials pages' forms: a key and its value (write-only, never prefilled), and a credential by
// reference (a connection the vault may use, the secret's path, field and version, or the whole
// reference as one text), read back into the body CredentialInput takes; and how a reference's first
// read went, in words for the flash after saving it. A value never appears in a form, a URL or a flash.

import { InvalidRequest } from "../../errors.ts";
import type { ReferenceView, SecretStoreView } from "../../workflows/index.ts";
import { Button, FormField, LinkButton, PostForm } from "../ui/index.ts";
import { kindSpec } from "./secret-store-kinds.ts";
import { vaultStoresBase } from "./secret-store-pages.tsx";
import { credentialPath } from "./vault-credential-paths.ts";

export const KEY_PATTERN = "[A-Z][A-Z0-9_]*";
const KEY_HINT = "Capital letters, digits and underscores, starting with a letter, e.g. STRIPE_API_KEY.";

/** The value field: write-only. `new-password` keeps the browser from filling in the person's own sign-in password. */
export function ValueField(props: { label: string; autofocus?: boolean }) {
  return (
    <FormField
      label={props.label}
      name="value"
      type="password"
      required
      autocomplete="new-password"
      maxlength={8192}
      autofocus={props.autofocus}
      hint="Stored encrypted. Agents never see it: the broker injects it into their requests. A member or admin can reveal it only after typing their password again."
    />
  );
}

// `keyName`, not `key`: JSX strips a prop named key. It arrives from the services form (?key=), a new key to store.
export function SetCredentialForm(props: { vault: string; keyName?: string }) {
  return (
    <PostForm action={credentialPath(props.vault)} id="set-credential" label="Set a credential">
      <FormField
        label="Key name"
        name="key"
        value={props.keyName}
        required
        pattern={KEY_PATTERN}
        maxlength={128}
        autocomplete="off"
        placeholder="e.g. STRIPE_API_KEY"
        hint={`${KEY_HINT} Using an existing name replaces its value.`}
      />
      <ValueField label="Value" autofocus={props.keyName !== undefined} />
      <div class="actions">
        <Button variant="primary">Save credential</Button>
      </div>
    </PostForm>
  );
}

/**
 * A credential by reference: a connection the vault may use, the path and field of the secret in its
 * store and an optional version, or the whole reference typed as one text. `current` prefills the
 * fields with a reference credential's own (names only: never a value).
 */
export function ReferenceForm(props: {
  action: string;
  id: string;
  label: string;
  submit: string;
  connections: readonly SecretStoreView[];
  /** The vault the form sets a credential in: an owner's connection may be shared with it for some paths only. */
  vault: string;
  keyName?: string;
  askKey?: boolean;
  current?: ReferenceView;
  cancel?: string;
}) {
  const cur = props.current;
  return (
    <PostForm action={props.action} id={props.id} label={props.label}>
      <input type="hidden" name="source" value="reference" />
      {props.askKey ? (
        <FormField
          label="Key name"
          name="key"
          id="f-ref-key"
          value={props.keyName}
          required
          pattern={KEY_PATTERN}
          maxlength={128}
          autocomplete="off"
          placeholder="e.g. DATABASE_PASSWORD"
          hint={`${KEY_HINT} Using an existing name replaces it.`}
        />
      ) : null}
      <div class="form-grid ref-grid">
        <div class="field">
          <label for="f-ref_connection">Connection</label>
          <select id="f-ref_connection" name="ref_connection">
            {props.connections.map((s) => (
              <option value={s.name} selected={cur?.connection === s.name}>
                {connectionChoice(s, props.vault)}
              </option>
            ))}
          </select>
        </div>
        <FormField
          label="Path"
          name="ref_path"
          value={cur?.path}
          maxlength={1024}
          autocomplete="off"
          placeholder="e.g. app/db"
          hint="Where the secret lives in the store: a KV path, a secret's name or ARN."
        />
        <FormField
          label="Field (optional)"
          name="ref_field"
          value={cur?.field ?? undefined}
          maxlength={256}
          autocomplete="off"
          placeholder="e.g. password"
          hint="One field of a structured secret (a KV key, a JSON key); empty for the whole value."
        />
        <FormField
          label="Version (optional)"
          name="version"
          value={cur?.version ?? undefined}
          maxlength={128}
          autocomplete="off"
          hint="Pins one version where the store keeps them; empty reads the latest."
        />
      </div>
      <FormField
        label="Or the whole reference"
        name="ref_text"
        maxlength={1024}
        autocomplete="off"
        placeholder="connection:path#field"
        hint="Instead of the connection, path and field above: <connection>:<path>#<field>."
      />
      <div class="actions">
        <Button variant="primary">{props.submit}</Button>
        {props.cancel ? <LinkButton href={props.cancel}>Cancel</LinkButton> : null}
      </div>
    </PostForm>
  );
}

/** A connection as the picker offers it: its name, its store, and the paths the vault may read when the share names some. */
function connectionChoice(s: SecretStoreView, vault: string): string {
  const paths = s.vault === null ? s.share_paths?.[vault] : null;
  return `${s.name} (${kindSpec(s.kind)?.short ?? s.kind}${paths ? `; paths ${paths.join(", ")}` : ""})`;
}

/** What a vault without any connection says where the reference form would be. */
export function NoConnections(props: { vault: string; manage: boolean }) {
  return (
    <p class="muted" id="no-connections">
      This vault may use no secret store connection yet. The instance owner shares theirs with vaults
      {props.manage ? (
        <>
          , and you can add one for this vault under <a href={`${vaultStoresBase(props.vault)}#add`}>Settings › Secret stores</a>.
        </>
      ) : (
        "; an admin of this vault can add one for it."
      )}
    </p>
  );
}

/** The reference as the form gives it: its parts (connection, path, field) or one text, and a version; read by CredentialInput. */
export function referenceOf(form: Record<string, string>): { ref: string; version?: string } {
  const text = (form.ref_text ?? "").trim();
  const path = (form.ref_path ?? "").trim();
  const field = (form.ref_field ?? "").trim();
  const version = (form.version ?? "").trim();
  if (text && (path || field)) throw new InvalidRequest("give the reference either as its connection, path and field, or as one text, not both", "ref");
  const ref = text || (path || field ? `${(form.ref_connection ?? "").trim()}:${path}${field ? `#${field}` : ""}` : "");
  if (!ref) throw new InvalidRequest("give the secret's path in the store, or the whole reference as <connection>:<path>#<field>", "ref");
  return { ref, ...(version ? { version } : {}) };
}

/** How a reference's first read went, for the flash after saving it. */
export function savedWords(key: string, ref: ReferenceView | undefined, replacing: boolean): { kind: "success" | "error"; text: string } {
  const done = replacing ? `${key} now reads` : `Credential ${key} saved: it reads`;
  if (!ref) return { kind: "success", text: `${done} from its store.` };
  if (ref.last_error) return { kind: "error", text: `${done} ${ref.text}, but the first read failed: ${ref.last_error}` };
  if (!ref.last_refresh) return { kind: "success", text: `${done} ${ref.text}; the store has not answered yet.` };
  return { kind: "success", text: `${done} ${ref.text}${ref.version_seen ? ` (version ${ref.version_seen})` : ""}.` };
}
