/** @jsxImportSource hono/jsx */
// Pieces shared by the proposals, agents and members pages: a link holding a token shown once
// (read-only field, copy button driven by /assets/copy.js, works without it too) and a role select.
// The token travels only in the body of the POST's answer: never a flash cookie, URL or log.

import type { VaultRole } from "../../identity/index.ts";
import { roleRank, VAULT_ROLES } from "../../identity/index.ts";
import { Button } from "../ui/index.ts";

export const COPY_SCRIPT_NAME = "copy";

/** A read-only field with the text and a Copy button (the button needs the copy script; selecting works without). */
export function CopyField(props: { id: string; label: string; value: string; hint?: string }) {
  return (
    <div class="field copy-field">
      <label for={props.id}>{props.label}</label>
      <div class="form-inline">
        <input
          type="text"
          id={props.id}
          value={props.value}
          readonly
          spellcheck={false}
          autocomplete="off"
          aria-describedby={props.hint ? `${props.id}-hint` : undefined}
        />
        <div class="actions copy-actions">
          <button type="button" class="btn btn-secondary" data-copy={props.id} hidden>
            Copy
          </button>
        </div>
      </div>
      {props.hint ? (
        <p class="hint" id={`${props.id}-hint`}>
          {props.hint}
        </p>
      ) : null}
    </div>
  );
}

const ROLE_HELP: Record<VaultRole, string> = {
  proxy: "proxy: uses services through the broker",
  member: "member: also sets credentials, approves proposals, reads logs",
  admin: "admin: manages the vault",
};

/** Roles up to `ceiling` (nobody grants above their own role, as the domain enforces too). */
export function RoleSelect(props: {
  name?: string;
  ceiling: VaultRole;
  selected: VaultRole;
  label?: string;
  id?: string;
  help?: Partial<Record<VaultRole, string>>;
}) {
  const id = props.id ?? `f-${props.name ?? "role"}`;
  return (
    <div class="field">
      <label for={id}>{props.label ?? "Role"}</label>
      <select id={id} name={props.name ?? "role"}>
        {VAULT_ROLES.filter((r) => roleRank(r) <= roleRank(props.ceiling)).map((r) => (
          <option value={r} selected={r === props.selected}>
            {props.help?.[r] ?? ROLE_HELP[r]}
          </option>
        ))}
      </select>
    </div>
  );
}

export function SubmitRow(props: { label: string; id?: string }) {
  return (
    <div class="actions">
      <Button variant="primary" id={props.id}>
        {props.label}
      </Button>
    </div>
  );
}
