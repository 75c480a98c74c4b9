// A service from a template: the chosen operations' rules joined in catalogue order, the template's
// auth with the credential keys a person picked in place of the suggested ones, and the host (the
// template's first unless the person names another it serves). Pure: the contract calls it while
// reading a body, the domain to compare a service with today's catalogue.

import { hostMatches, parseHostPattern } from "../policy/index.ts";
import type { ProposedAuth, ProposedRule } from "../store/index.ts";
import { OPERATION_NAMES, type OperationName, type Template } from "./template.ts";

/** What a template-made service records beside its host, auth and rules. */
export interface TemplateChoice {
  readonly template: string;
  readonly operations: readonly OperationName[];
}

/** The auth fields of `t` that name a credential key, with the key each suggests. */
export function templateKeyFields(t: Template): [string, string][] {
  const keyFields = ["token", "client_id", "client_secret", "refresh_token", "access_key_id", "secret_access_key", "session_token", "private_key"] as const;
  return keyFields.flatMap((f) => (typeof t.auth[f] === "string" ? [[f, t.auth[f] as string] as [string, string]] : []));
}

/** The operations `t` offers, in catalogue order. */
export function operationsOf(t: Template): OperationName[] {
  return OPERATION_NAMES.filter((name) => t.operations[name] !== undefined);
}

/** The rules of the chosen operations, in catalogue order, each rule once. */
export function rulesFor(t: Template, chosen: readonly OperationName[]): ProposedRule[] {
  const seen = new Set<string>();
  const rules: ProposedRule[] = [];
  for (const name of operationsOf(t)) {
    if (!chosen.includes(name)) continue;
    for (const rule of t.operations[name]!.rules) {
      const id = JSON.stringify(rule);
      if (!seen.has(id)) rules.push(rule);
      seen.add(id);
    }
  }
  return rules;
}

/** The template's auth with `keys` (auth field → credential key) and the person's own `settings` in place of the examples. */
export function authFor(t: Template, keys: Readonly<Record<string, string>>, settings: Readonly<Record<string, string>> = {}): ProposedAuth {
  return { ...t.auth, ...keys, ...settings };
}

/**
 * Whether `host` (a parsed pattern's text) is one the template serves: one of its patterns, a name one
 * of them matches, or, for a template whose host is the person's own (`fill.host`), a name shaped like
 * one of its example hosts with only the person's part changed: the placeholder label
 * (`your-store.myshopify.com` → `acme.myshopify.com`) or the AWS region (`s3.us-east-1.amazonaws.com` →
 * `s3.eu-west-1.amazonaws.com`). Never another service under the same domain (`iam.amazonaws.com`).
 */
export function servesHost(t: Template, host: string): boolean {
  if (t.hosts.some((pattern) => pattern === host || (!host.includes("*") && hostMatches(parseHostPattern(pattern, { allowIp: false }), host, 443))))
    return true;
  if (!t.fill?.host || host.includes("*") || host.includes(":")) return false;
  return t.hosts.some((example) => sameShape(example, host));
}

const PLACEHOLDER = /^your-/;
const AWS_REGION = /^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$/;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/** `host` is `example` with its one variable label (a placeholder, or an AWS region) replaced by a label of the same kind. */
function sameShape(example: string, host: string): boolean {
  const want = example.split(".");
  const got = host.split(".");
  if (want.length !== got.length) return false;
  return want.every((label, i) => {
    if (label === got[i]) return true;
    if (PLACEHOLDER.test(label)) return DNS_LABEL.test(got[i]!);
    return AWS_REGION.test(label) && AWS_REGION.test(got[i]!);
  });
}

/** The template's settings the person gives (fill, but the host), with what belongs in each. */
export function templateSettings(t: Template): [string, string][] {
  return Object.entries(t.fill ?? {}).filter(([field]) => field !== "host") as [string, string][];
}

/** The first template (catalogue order) serving `host`, a concrete name: an exact host before a wildcard's. */
export function templateServing(templates: readonly Template[], host: string): Template | undefined {
  return templates.find((t) => t.hosts.includes(host)) ?? templates.find((t) => servesHost(t, host));
}
