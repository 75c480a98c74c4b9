// How a posted secret store form becomes the body the API takes (POST and PATCH /v1/secret-stores):
// the console reads it with the same schemas (SecretStoreCreateInput, SecretStorePatchInput, then
// readKindFields) and hands the domain the same result. A refused form is shown again from what is
// kept here: its non-secret fields as typed and the API's message with the field named by its label.
// Secret fields are never kept: they are typed again.

import { authInput, type KindSpec, type MethodSpec } from "./secret-store-kinds.ts";

const COMMON_LABELS: Record<string, string> = {
  name: "Name",
  refresh_seconds: "Refresh every (seconds)",
  grace_seconds: "Grace (seconds)",
  kind: "Kind",
  auth: "Sign-in",
};

/** The label of a body field the API named (`address`, `auth.token`), for a person reading the error. */
export function fieldLabel(kind: KindSpec | undefined, field: string | undefined): string | undefined {
  if (!field) return undefined;
  if (COMMON_LABELS[field]) return COMMON_LABELS[field];
  const [, authName] = /^auth\.(\w+)$/.exec(field) ?? [];
  if (authName)
    return kind?.methods
      .flatMap((m) => m.fields)
      .find((f) => f.name === authName)
      ?.label.replace(/ \(optional\)$/, "");
  return kind?.settings.find((f) => f.name === field)?.label.replace(/ \(optional\)$/, "");
}

/** The form input an API field name belongs to (`auth.token` → `auth_token`), to mark it invalid. */
export function inputOf(field: string | undefined): string | undefined {
  if (!field) return undefined;
  const [, authName] = /^auth\.(\w+)$/.exec(field) ?? [];
  return authName ? authInput(authName) : field === "auth" ? undefined : field;
}

/** The API's message with the field named by its label ("auth.token must be …" → "Token must be …"). */
export function labelled(kind: KindSpec | undefined, text: string, field: string | undefined): string {
  const label = fieldLabel(kind, field);
  if (!label || !field) return text;
  for (const prefix of [`${field} `, `${field}: `]) {
    if (text.toLowerCase().startsWith(prefix.toLowerCase())) return `${label}${prefix.endsWith(": ") ? ": " : " "}${text.slice(prefix.length)}`;
  }
  return text;
}

/** What a refused form shows again: the non-secret fields as typed, and which input the refusal names. */
export interface TypedForm {
  readonly values: Readonly<Record<string, string>>;
  readonly invalid?: string;
  readonly error?: string;
}

/** The form's non-secret fields as typed (secret ones are never kept: they are typed again). */
export function keepTyped(form: Record<string, string>, kind: KindSpec | undefined, method: MethodSpec | undefined): Record<string, string> {
  const secret = new Set((method?.fields ?? []).filter((f) => f.secret).map((f) => authInput(f.name)));
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(form)) if (name !== "csrf" && !secret.has(name) && !(kind && isSecretInput(kind, name))) kept[name] = value;
  return kept;
}

function isSecretInput(kind: KindSpec, name: string): boolean {
  return kind.methods.some((m) => m.fields.some((f) => f.secret && authInput(f.name) === name));
}

/** A number typed in a form, or undefined when left empty; what is not a number is refused by the schema, naming the field. */
function numberOf(raw: string | undefined): number | undefined {
  const t = (raw ?? "").trim();
  return t === "" ? undefined : Number(t);
}

/** A secret as typed (never trimmed: it is the store's); other fields trimmed. Empty: undefined. */
function authBody(method: MethodSpec, form: Record<string, string>): Record<string, unknown> {
  const auth: Record<string, unknown> = { method: method.method };
  for (const f of method.fields) {
    const raw = form[authInput(f.name)] ?? "";
    const v = f.secret ? raw : raw.trim();
    if (v !== "" || f.required) auth[f.name] = v;
  }
  return auth;
}

/** The body of POST /v1/secret-stores as the add form gives it (`vault`: a vault's own connection). */
export function createBody(kind: KindSpec, method: MethodSpec, form: Record<string, string>, vault?: string): Record<string, unknown> {
  const body: Record<string, unknown> = { name: (form.name ?? "").trim(), kind: kind.kind };
  if (vault !== undefined) body.vault = vault;
  const refresh = numberOf(form.refresh_seconds);
  const grace = numberOf(form.grace_seconds);
  if (refresh !== undefined) body.refresh_seconds = refresh;
  if (grace !== undefined) body.grace_seconds = grace;
  for (const f of kind.settings) {
    const v = (form[f.name] ?? "").trim();
    if (v !== "" || f.required) body[f.name] = v;
  }
  body.auth = authBody(method, form);
  return body;
}

/**
 * The body of PATCH /v1/secret-stores/{name} from the change form: the settings (an emptied option is
 * removed, as null) and, when a sign-in is typed, the new auth replacing the old one whole. A sign-in is
 * typed when its method is another than the current one, when any of its secrets is filled in, or when it
 * has no secret at all (its fields are all shown, so sending them again changes nothing else).
 */
export function changeBody(kind: KindSpec, method: MethodSpec, currentMethod: string | undefined, form: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const refresh = numberOf(form.refresh_seconds);
  const grace = numberOf(form.grace_seconds);
  if (refresh !== undefined) body.refresh_seconds = refresh;
  if (grace !== undefined) body.grace_seconds = grace;
  for (const f of kind.settings) {
    const v = (form[f.name] ?? "").trim();
    body[f.name] = v === "" && !f.required ? null : v;
  }
  const secrets = method.fields.filter((f) => f.secret);
  const typed = method.method !== currentMethod || secrets.length === 0 || secrets.some((f) => (form[authInput(f.name)] ?? "") !== "");
  if (typed) body.auth = authBody(method, form);
  return body;
}
