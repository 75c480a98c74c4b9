// A service asked for by a catalogue template instead of by its auth: `template`, the `operations`
// chosen (read only when none are named) and, optionally, `keys` in place of the template's suggested
// credential key names and a `host` the template serves. Read into the same host, auth and rules a
// custom service states, plus the choice, so the domain stores one shape (architecture.md D23).

import { z } from "zod";
import { parseHostPattern } from "../policy/index.ts";
import { says } from "../schema-input.ts";
import type { ProposedAuth, ProposedRule } from "../store/index.ts";
import {
  authFor,
  OPERATION_NAMES,
  operationsOf,
  rulesFor,
  servesHost,
  templateById,
  templateKeyFields,
  templateSettings,
  type OperationName,
  type TemplateChoice,
} from "../templates/index.ts";
import { KeyName } from "./fields.ts";
import { AUTH_TYPES, ServiceAuthInput } from "./service-auth.ts";

const SETTING = "{field} must be your own value as plain text: not empty, no control or invisible characters";
/** A person's own setting: shown to whoever approves, so nothing that could reorder or hide what they read. */
const SettingValue = z
  .union([z.string(), z.number()], says(SETTING))
  .transform(String)
  .refine((v) => v.trim() !== "" && !/[\p{Cc}\p{Cf}]/u.test(v), says(SETTING));

/** The fields a body carries to name a template; beside a custom service's, in one strict object. */
export const TemplateFields = {
  template: z
    .string(says("{field} must be a template id"))
    .optional()
    .describe("a catalogue template's id (GET /v1/templates): it gives the auth and the rules"),
  operations: z
    .array(z.enum(OPERATION_NAMES, says(`{field} must be one of ${OPERATION_NAMES.join(", ")}`)), says("{field} must be a list of operation names"))
    .min(1, says("{field} must name at least one operation"))
    .optional()
    .describe("with template: the operations allowed (read, write, destructive); default read"),
  keys: z
    .record(z.string(), KeyName, says("{field} must map the template's key fields to credential key names"))
    .optional()
    .describe('with template: credential keys in place of the suggested ones, by auth field ({"token": "MY_GITHUB_TOKEN"})'),
  settings: z
    .record(z.string(), SettingValue, says("{field} must map auth fields to values"))
    .optional()
    .describe('with template: the settings that are your own, e.g. {"username": "you@example.com"} (GET /v1/templates/{id} lists them under fill)'),
};

interface Stated {
  host?: string;
  auth?: ProposedAuth;
  rules?: readonly ProposedRule[] | null;
  template?: string;
  operations?: OperationName[];
  keys?: Record<string, string>;
  settings?: Record<string, string>;
}

/** A body's service once read: what a custom one states, or a template's expansion with the choice. */
export interface ReadService {
  host: string;
  auth: ProposedAuth;
  rules?: ProposedRule[] | readonly ProposedRule[];
  from?: TemplateChoice;
}

/**
 * Reads the service a body states: by template (its fields refuse `auth` and `rules` beside it, which
 * would contradict it) or custom (host and auth required). Issues are added to `ctx` at the field they
 * name; the answer is undefined when there were any.
 */
export function readStatedService(s: Stated, ctx: z.RefinementCtx, allowIp: boolean): ReadService | undefined {
  let refused = false;
  const issue = (path: PropertyKey[], message: string) => {
    refused = true;
    ctx.addIssue({ code: "custom", path, message, input: s });
  };
  if (s.template === undefined) {
    for (const f of ["operations", "keys", "settings"] as const)
      if (s[f] !== undefined) issue([f], "{field} goes with template; name the template, or leave it out");
    if (s.host === undefined) issue(["host"], "{field}: must be a host name");
    if (s.auth === undefined) issue(["auth", "type"], `{field} must be one of ${AUTH_TYPES.join(", ")}`);
    if (s.host === undefined || s.auth === undefined) return undefined;
    return { host: s.host, auth: s.auth, ...(s.rules ? { rules: s.rules } : {}) };
  }
  const expanded = expandChoice(s as Stated & { template: string }, issue);
  if (!expanded) return undefined;
  const { t, auth, rules, from } = expanded;
  const host = s.host ?? parseHostPattern(t.hosts[0], { allowIp }).text;
  if (t.fill?.host && s.host === undefined) issue(["host"], `{field}: name ${t.fill.host}`);
  else if (host.includes("*") && s.host === undefined) issue(["host"], `{field}: ${t.name} serves ${t.hosts.join(", ")}; name the host to use`);
  else if (!servesHost(t, host)) issue(["host"], `{field}: ${t.name} serves ${t.hosts.join(", ")}, not ${host}`);
  if (refused) return undefined;
  return { host, auth, rules, from };
}

/**
 * A change naming a template: its auth and rules, expanded (the host is the service's own; the domain
 * checks the template serves it). Without a template, the change as stated.
 */
export function readTemplatePatch<P extends Stated>(p: P, ctx: z.RefinementCtx) {
  const { template, operations, keys, settings, ...rest } = p;
  if (template === undefined) {
    const stray = operations !== undefined ? "operations" : keys !== undefined ? "keys" : settings !== undefined ? "settings" : undefined;
    if (stray) {
      ctx.addIssue({ code: "custom", path: [stray], message: "{field} goes with template; name the template, or leave it out", input: p });
      return z.NEVER;
    }
    return rest;
  }
  let refused = false;
  const expanded = expandChoice({ ...p, template }, (path, message) => {
    refused = true;
    ctx.addIssue({ code: "custom", path, message, input: p });
  });
  return refused || !expanded ? z.NEVER : { ...rest, auth: expanded.auth, rules: expanded.rules, from: expanded.from };
}

/** The template named, its operations and keys checked, and its auth and rules for them. */
function expandChoice(s: Stated & { template: string }, issue: (path: PropertyKey[], message: string) => void) {
  const t = templateById(s.template);
  if (!t) return void issue(["template"], `{field}: no template is named ${JSON.stringify(s.template.slice(0, 64))} (GET /v1/templates lists them)`);
  if (s.auth !== undefined) issue(["auth"], `{field} comes from the template ${t.id}; leave it out (or name other credential keys in keys)`);
  if (s.rules !== undefined) issue(["rules"], `{field} come from the template's operations (${operationsOf(t).join(", ")}); leave them out`);
  const operations = s.operations ?? ["read"];
  let fits = s.auth === undefined && s.rules === undefined;
  operations.forEach((op, i) => {
    if (operationsOf(t).includes(op)) return;
    fits = false;
    issue(["operations", i], `{field}: ${t.name} has no ${op} operation (it has ${operationsOf(t).join(", ")})`);
  });
  const keyFields = templateKeyFields(t).map(([field]) => field);
  for (const field of Object.keys(s.keys ?? {})) {
    if (keyFields.includes(field)) continue;
    fits = false;
    issue(["keys", field], `{field}: ${t.name}'s auth has no key field ${field} (it has ${keyFields.join(", ")})`);
  }
  const own = templateSettings(t);
  for (const [field, what] of own) {
    if (s.settings?.[field] === undefined) {
      fits = false;
      issue(["settings", field], `{field} is needed for ${t.name}: ${what}`);
    }
  }
  for (const field of Object.keys(s.settings ?? {})) {
    if (own.some(([f]) => f === field)) continue;
    fits = false;
    issue(["settings", field], `{field}: ${t.name} takes no ${field}${own.length ? ` (it takes ${own.map(([f]) => f).join(", ")})` : ""}`);
  }
  if (!fits) return undefined;
  // The person's own values go through the auth schema, as a custom service's would.
  const auth = ServiceAuthInput.safeParse(authFor(t, s.keys ?? {}, s.settings ?? {}));
  if (!auth.success) {
    const bad = auth.error.issues[0]!;
    const field = String(bad.path[0] ?? "");
    issue([own.some(([f]) => f === field) ? "settings" : "keys", field], bad.message); // its `{field}` names settings.<field>
    return undefined;
  }
  const chosen = OPERATION_NAMES.filter((name) => operations.includes(name));
  return { t, auth: auth.data, rules: rulesFor(t, chosen), from: { template: t.id, operations: chosen } satisfies TemplateChoice };
}
