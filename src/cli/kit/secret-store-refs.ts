// A credential by reference on the command line: `credential set KEY --ref <connection>:<path>#<field>
// [--version V]`, and a proposal's slots answered with `--ref KEY=<connection>:<path>#<field>` (with
// `--ref-version KEY=V`). Checked with the broker's own grammar before any request, and refused without
// repeating the text: a value pasted where a reference belongs must not echo.

import { parseReference } from "../../policy/index.ts";
import { CliFailure } from "./fail.ts";
import { collectFlagValues } from "./service-rules.ts";

/** The API's reference body: `{"ref", "version"?}`. */
export interface RefBody {
  readonly ref: string;
  readonly version?: string;
}

export const REF_EXAMPLE = "e.g. --ref team-vault:apps/billing#api_key (a connection `broker secret-store list` shows, the secret's path, #field)";

/** `--ref` (and `--version`) as the API takes them, or a usage failure saying which part is wrong. */
export function refBody(flag: string, text: string, version: string | undefined): RefBody {
  const parsed = parseReference(text.trim(), version?.trim());
  if ("problem" in parsed) throw new CliFailure(`${flag}: ${parsed.problem}`, REF_EXAMPLE, 2);
  return { ref: text.trim(), ...(version !== undefined && { version: version.trim() }) };
}

/** `KEY=value` pairs of a repeatable flag, by key; a key given twice, or a word without `=`, is refused. */
function keyed(rawArgs: readonly string[], flag: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const word of collectFlagValues(rawArgs, flag)) {
    const eq = word.indexOf("=");
    const key = eq > 0 ? word.slice(0, eq) : "";
    if (!/^[A-Z][A-Z0-9_]{0,127}$/.test(key))
      throw new CliFailure(`--${flag} takes KEY=…, the slot's key first`, `e.g. --${flag} OPENAI_API_KEY=team-vault:apps/openai#key`, 2);
    if (out.has(key)) throw new CliFailure(`--${flag} names ${key} twice`, "give each slot once", 2);
    out.set(key, word.slice(eq + 1));
  }
  return out;
}

/**
 * The slots answered with a reference (`--ref KEY=<ref>`, `--ref-version KEY=V`), checked against the
 * proposal's slots; the others are typed or piped as before.
 */
export function refAnswers(rawArgs: readonly string[], slots: readonly string[], id: string | number): Map<string, RefBody> {
  const refs = keyed(rawArgs, "ref");
  const versions = keyed(rawArgs, "ref-version");
  const out = new Map<string, RefBody>();
  for (const key of [...refs.keys(), ...versions.keys()]) {
    if (!slots.includes(key))
      throw new CliFailure(
        `${key} is not a credential slot of proposal ${id}`,
        slots.length ? `its slots: ${slots.join(", ")}` : "it asks for no credential",
        2,
      );
    if (!refs.has(key)) throw new CliFailure(`--ref-version ${key}=… goes with --ref ${key}=<connection>:<path>#<field>`, undefined, 2);
  }
  for (const [key, text] of refs) out.set(key, refBody(`--ref ${key}`, text, versions.get(key)));
  return out;
}
