// The workload identity forms as typed, and how they become the API's bodies (POST /v1/workload-issuers, PUT
// /v1/workload-issuers/{issuer}, POST …/{issuer}/bindings): read by the same schemas, WorkloadIssuerInput and
// WorkloadBindingInput. A refused form comes back from what is kept here: every field as typed, the input the refusal
// names, and the refusal in the form's words. A key set holds public keys only, so it is kept like the rest.

import { parseWith, WorkloadBindingInput, WorkloadIssuerInput } from "../../contract/index.ts";
import { BrokerError, Conflict, InvalidRequest, NotFound } from "../../errors.ts";
import { describeError } from "./context.tsx";

/** A form's fields as typed: all text, so a refused form comes back exactly as it was sent. */
export type Draft = Readonly<Record<string, string>>;

export const ISSUER_FIELDS = ["name", "issuer", "jwks_url", "jwks", "audiences", "clock_skew_seconds", "require_jti"] as const;
export const BINDING_FIELDS = ["name", "conditions", "vault", "role", "max_session_seconds"] as const;

export const EMPTY_ISSUER: Draft = { name: "", issuer: "", jwks_url: "", jwks: "", audiences: "", clock_skew_seconds: "60", require_jti: "" };
export const EMPTY_BINDING: Draft = { name: "", conditions: "", vault: "", role: "proxy", max_session_seconds: "3600" };

/** What a person reads for a body field the API names. */
const LABELS: Record<string, string> = {
  issuer: "Issuer URL",
  jwks_url: "JWKS URL",
  jwks: "Key set",
  audiences: "Audiences",
  clock_skew_seconds: "Clock skew",
  require_jti: "Require a token id",
  conditions: "Conditions",
  vault: "Vault",
  role: "Role",
  max_session_seconds: "Longest session",
  name: "Name",
};

/** The posted form's `fields` (an unticked checkbox is not sent: it reads as ""). */
export function draftOf(form: Record<string, string>, fields: readonly string[]): Draft {
  return Object.fromEntries(fields.map((f) => [f, form[f] ?? ""]));
}

/** A number typed in a form, or undefined when left empty; what is not a number is refused by the schema, naming the field. */
function numberOf(raw: string | undefined): number | undefined {
  const t = (raw ?? "").trim();
  return t === "" ? undefined : Number(t);
}

/** Audiences separated by commas or new lines. */
function listOf(raw: string): string[] {
  return raw
    .split(/[,\r\n]+/)
    .map((a) => a.trim())
    .filter(Boolean);
}

/** The issuer form as WorkloadIssuerInput reads it; `name` (the change form's) is the issuer's, fixed by the path. */
export function readIssuer(d: Draft, name?: string): WorkloadIssuerInput {
  const body: Record<string, unknown> = {
    name: name ?? (d.name ?? "").trim(),
    issuer: (d.issuer ?? "").trim(),
    audiences: listOf(d.audiences ?? ""),
    require_jti: d.require_jti === "on",
  };
  if ((d.jwks_url ?? "").trim()) body.jwks_url = d.jwks_url!.trim();
  if ((d.jwks ?? "").trim()) body.jwks = d.jwks!.trim();
  const skew = numberOf(d.clock_skew_seconds);
  if (skew !== undefined) body.clock_skew_seconds = skew;
  return parseWith(WorkloadIssuerInput, body);
}

/**
 * `claim = pattern` lines as the API's conditions: `a, b` is a list (any of them matches), and a claim written on
 * several lines gathers their patterns into one list. Blank lines and `#` comments are skipped.
 */
export function readConditions(text: string): Record<string, string | string[]> {
  const out = new Map<string, string[]>(); // a Map: a claim named __proto__ reaches the schema as a key, and is refused there
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) throw new InvalidRequest(`conditions line ${i + 1} must be claim = pattern, e.g. repository = my-org/app`, "conditions");
    const claim = line.slice(0, eq).trim();
    const patterns = line
      .slice(eq + 1)
      .split(",")
      .map((p) => p.trim());
    out.set(claim, [...(out.get(claim) ?? []), ...patterns]);
  }
  return Object.fromEntries([...out].map(([claim, patterns]) => [claim, patterns.length === 1 ? patterns[0]! : patterns]));
}

/** Conditions as the form writes them, one `claim = pattern` line each. */
export function conditionLines(conditions: Readonly<Record<string, string | readonly string[]>>): string[] {
  return Object.entries(conditions).map(([claim, p]) => `${claim} = ${typeof p === "string" ? p : p.join(", ")}`);
}

/** The binding form as WorkloadBindingInput reads it. */
export function readBinding(d: Draft): WorkloadBindingInput {
  const body: Record<string, unknown> = {
    name: (d.name ?? "").trim(),
    conditions: readConditions(d.conditions ?? ""),
    vault: (d.vault ?? "").trim(),
    role: d.role || "proxy",
  };
  const max = numberOf(d.max_session_seconds);
  if (max !== undefined) body.max_session_seconds = max;
  return parseWith(WorkloadBindingInput, body);
}

/** A refused form: the input to mark (one of the form's fields) and what to say. */
export interface Refusal {
  readonly field?: string;
  readonly text: string;
}

/** The body field a refusal is about: the one it names, else the one its words start with, else the domain's usual one. */
function pathOf(err: BrokerError): string | undefined {
  if (err instanceof InvalidRequest && err.field) return err.field;
  const lead = /^[a-z_]+(?=[ :.[])/.exec(err.message)?.[0];
  if (lead && lead in LABELS) return lead;
  if (err instanceof Conflict) return "name"; // the name is taken (an issuer, a binding, or the agent it would make)
  if (err instanceof NotFound && err.message.startsWith("no vault")) return "vault";
  return undefined;
}

/** The API's names for fields inside a sentence, in the form's words. */
const WORDS: readonly [RegExp, string][] = [
  [/^jwks key (\d+)/, "key $1 of the key set"],
  [/\bjwks_url\b/g, "the JWKS URL"],
];

/** The refusal of a form with `fields`, its field named by its label ("jwks_url must be …" → "JWKS URL must be …"). */
export function refusalOf(err: BrokerError, fields: readonly string[]): Refusal {
  const path = pathOf(err);
  const top = path?.split(/[.[]/)[0];
  const field = top !== undefined && fields.includes(top) ? top : undefined;
  let said = err.message;
  for (const [words, plain] of WORDS) said = said.replace(words, plain);
  if (field && path && said.startsWith(path)) {
    const rest = path.slice(field.length).replace(/^\./, "");
    said = `${LABELS[field] ?? field}${rest ? ` (${rest})` : ""}${said.slice(path.length)}`;
  }
  if (!(err instanceof InvalidRequest)) return { field, text: describeError(err) };
  said = said.charAt(0).toUpperCase() + said.slice(1);
  return { field, text: /[.!?]$/.test(said) ? said : `${said}.` };
}
