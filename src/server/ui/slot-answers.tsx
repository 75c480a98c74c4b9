/** @jsxImportSource hono/jsx */
// A proposal's credential slot answered on a page (the approval page and the console's proposals page
// alike): a value typed into its password field, OR a reference into a secret store the vault may use
// (`<connection>:<path>#<field>`, with an optional version), never both. What was typed is handed to
// the API's ProposalApprovalInput exactly as a JSON body would carry it, so both pages and the API read
// a slot the same way; the domain then checks the vault may use the reference's connection.

import { parseWith, ReferenceInput } from "../../contract/index.ts";
import { InvalidRequest } from "../../errors.ts";

export const VALUE_PREFIX = "value_";
export const REF_PREFIX = "ref_";
export const VERSION_PREFIX = "version_";

/**
 * The slots' answers by key as ProposalApprovalInput reads them: a value's text ("" keeps a stored
 * one), or `{ref, version?}`. A slot given both a value and a reference is refused, naming its key.
 */
export function slotAnswers(form: Readonly<Record<string, string>>): Record<string, string | { ref: string; version?: string }> {
  const keys = new Set<string>();
  for (const name of Object.keys(form)) {
    for (const prefix of [VALUE_PREFIX, REF_PREFIX, VERSION_PREFIX]) if (name.startsWith(prefix)) keys.add(name.slice(prefix.length));
  }
  const out: Record<string, string | { ref: string; version?: string }> = {};
  for (const key of keys) {
    const value = form[`${VALUE_PREFIX}${key}`];
    const ref = (form[`${REF_PREFIX}${key}`] ?? "").trim();
    const version = (form[`${VERSION_PREFIX}${key}`] ?? "").trim();
    if (ref) {
      if (value) throw new InvalidRequest(`give ${key} a value or a reference, not both`, key);
      const answer = { ref, ...(version ? { version } : {}) };
      // Read once on its own first, so a mistyped reference is refused in the grammar's words, naming its slot.
      try {
        parseWith(ReferenceInput, answer);
      } catch (err) {
        if (err instanceof InvalidRequest) throw new InvalidRequest(`${key}: ${err.message}`, key);
        throw err;
      }
      out[key] = answer;
    } else {
      if (version) throw new InvalidRequest(`a version for ${key} goes with a reference only`, key);
      if (value !== undefined) out[key] = value;
    }
  }
  return out;
}

/**
 * The "or a reference" fields under a slot's value field: shown when the vault may use a connection
 * (`connections` names them, so the person knows what to write before the colon).
 */
export function SlotReference(props: { slotKey: string; idPrefix: string; connections: readonly string[] }) {
  const ref = `${props.idPrefix}ref-${props.slotKey}`;
  const version = `${props.idPrefix}version-${props.slotKey}`;
  return (
    <div class="slot-ref form-grid">
      <div class="field">
        <label for={ref}>Or a reference for {props.slotKey}</label>
        <input
          type="text"
          id={ref}
          name={`${REF_PREFIX}${props.slotKey}`}
          autocomplete="off"
          spellcheck={false}
          maxlength={1024}
          placeholder="connection:path#field"
          aria-describedby={`${ref}-hint`}
        />
        <p class="hint" id={`${ref}-hint`}>
          Instead of typing a value, read it from a secret store this vault may use:{" "}
          {props.connections.map((name, i) => (
            <>
              {i > 0 ? ", " : ""}
              <code>{name}</code>
            </>
          ))}
          .
        </p>
      </div>
      <div class="field">
        <label for={version}>Version (optional)</label>
        <input type="text" id={version} name={`${VERSION_PREFIX}${props.slotKey}`} autocomplete="off" spellcheck={false} maxlength={128} />
        <p class="hint">With a reference: pins one version; empty reads the latest.</p>
      </div>
    </div>
  );
}
