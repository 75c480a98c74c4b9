/** @jsxImportSource hono/jsx */
// The credential key fields of the service forms: a choice of the vault's stored keys, or a new key
// named in the field under it (prefilled with a template's suggested name), read back into one key
// name. Names only: a value is never asked for here (the Credentials page takes it, after saving).

import type { Child } from "hono/jsx";

/** The choice "a new key": not a key name (names never hold "*"), so it never collides with a stored key. */
export const NEW_KEY = "*new";

export interface KeyChoiceProps {
  /** The form field: the select's name; the new key's name field is `<name>_new`. */
  readonly name: string;
  readonly label: string;
  /** The key the service names now (stored or not); "" for none yet. */
  readonly value: string;
  /** The vault's stored keys. */
  readonly keys: readonly string[];
  /** The name a new key gets unless the person types another (a template's suggestion). */
  readonly suggested?: string;
  readonly placeholder?: string;
  readonly hint?: Child;
  /** The key may be left out (a session token): the empty choice reads "None". */
  readonly optional?: boolean;
}

/** What the select starts on, and the name the new-key field holds. */
function startingChoice(p: KeyChoiceProps): { selected: string; newName: string } {
  if (p.value !== "" && p.keys.includes(p.value)) return { selected: p.value, newName: p.suggested ?? "" };
  if (p.value !== "") return { selected: NEW_KEY, newName: p.value };
  if (p.suggested && p.keys.includes(p.suggested)) return { selected: p.suggested, newName: p.suggested };
  if (p.suggested && !p.optional) return { selected: NEW_KEY, newName: p.suggested };
  return { selected: "", newName: p.suggested ?? "" };
}

/** A key name as typed text: the new-key field, or the only field when the vault stores no key yet. */
function KeyNameField(props: { id: string; name: string; value: string; placeholder?: string; describedBy: string; required?: boolean }) {
  return (
    <input
      type="text"
      id={props.id}
      name={props.name}
      value={props.value}
      maxlength={128}
      autocomplete="off"
      spellcheck={false}
      autocapitalize="characters"
      placeholder={props.placeholder}
      aria-describedby={props.describedBy}
      required={props.required}
    />
  );
}

/**
 * One credential key: a select of the stored keys plus "A new key", with the new key's name field
 * under it (hidden by the stylesheet while a stored key is chosen, where the browser can say so;
 * ignored by the server then). With no stored key, just the name field.
 */
export function KeyChoice(p: KeyChoiceProps) {
  const id = `f-${p.name}`;
  const hintId = `${id}-hint`;
  const hint = p.hint ? (
    <p class="hint" id={hintId}>
      {p.hint}
    </p>
  ) : null;
  if (p.keys.length === 0) {
    return (
      <div class="field">
        <label for={id}>{p.label}</label>
        <KeyNameField id={id} name={p.name} value={p.value || (p.suggested ?? "")} placeholder={p.placeholder} describedBy={hintId} required={!p.optional} />
        {hint}
      </div>
    );
  }
  const { selected, newName } = startingChoice(p);
  return (
    <div class="field key-choice">
      <label for={id}>{p.label}</label>
      <select id={id} name={p.name} aria-describedby={hintId} required={!p.optional}>
        <option value="" selected={selected === ""}>
          {p.optional ? "None" : "Choose a key…"}
        </option>
        <optgroup label="Stored in this vault">
          {p.keys.map((k) => (
            <option value={k} selected={selected === k}>
              {k}
            </option>
          ))}
        </optgroup>
        <option value={NEW_KEY} selected={selected === NEW_KEY}>
          A new key, named below
        </option>
      </select>
      {hint}
      <div class="new-key">
        <label for={`${id}_new`} class="small">
          New key name
        </label>
        <KeyNameField id={`${id}_new`} name={`${p.name}_new`} value={newName} placeholder={p.placeholder} describedBy={`${id}_new-hint`} />
        <p class="hint" id={`${id}_new-hint`}>
          Used when “A new key” is chosen. You store its value on the Credentials page right after saving.
        </p>
      </div>
    </div>
  );
}

/** The key a KeyChoice posted: the stored key chosen, or the new key's name; trimmed, "" for none. */
export function readKeyChoice(form: Record<string, string>, name: string): string {
  const chosen = (form[name] ?? "").trim();
  return chosen === NEW_KEY ? (form[`${name}_new`] ?? "").trim() : chosen;
}
