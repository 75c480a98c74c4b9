// Validation of an agent's proposal body (contract: POST /v1/proposals). Hosts follow architecture.md
// D14 with no IP literals; `obtain` must be an https URL; every text field has a length limit;
// an agent never sends a credential value, so a slot carrying one is refused.

import { InvalidRequest } from "../errors.ts";
import { parseHostPattern } from "../policy/index.ts";
import { LIMITS } from "../policy/index.ts";
import { parseRules, type Rules } from "../policy/index.ts";
import { authKeyFields, readAuth, readKey, type ServiceAuth } from "./services.ts";
import type { ProposedAuth, ProposedRule, ProposedService, ProposedSlot } from "../store/index.ts";

// The shapes a proposal is stored in are the store's (it checks them when it reads a row).
export type { ProposedService, ProposedSlot } from "../store/index.ts";

/**
 * The store keeps its own copy of a service's auth and rules (it imports no module above it); these
 * fail to compile when ServiceAuth or Rules gain, lose or change a field the store's copy does not.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type SameShape<A, B> = [Same<A, B>, Same<keyof A, keyof B>] extends [true, true] ? true : never;
const _storedShapesMatch: [SameShape<ServiceAuth, ProposedAuth>, SameShape<Rules[number], ProposedRule>] = [true, true];

export interface ProposalInput {
  services: ProposedService[];
  credentials: ProposedSlot[];
  message: string;
  user_message: string;
}

const TEXT_LIMITS = { description: 500, message: 2000, user_message: 2000, obtain_instructions: 2000, obtain: 2048 } as const;

function readText(v: unknown, field: string, max: number): string {
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw new InvalidRequest(`${field} must be text`, field);
  if (v.length > max) throw new InvalidRequest(`${field} must be at most ${max} characters`, field);
  return v;
}

function readAction(v: unknown, field: string): "set" {
  if (v !== undefined && v !== "set") throw new InvalidRequest(`${field} must be "set" (the only supported action)`, field);
  return "set";
}

function readObtain(v: unknown, field: string): string {
  const text = readText(v, field, TEXT_LIMITS.obtain);
  if (text === "") return "";
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidRequest(`${field} must be an https URL`, field);
  }
  if (url.protocol !== "https:" || url.username || url.password) throw new InvalidRequest(`${field} must be an https URL without credentials`, field);
  return url.href;
}

export function readProposal(input: unknown): ProposalInput {
  const body = (input ?? {}) as Record<string, unknown>;
  const rawServices = body.services ?? [];
  const rawSlots = body.credentials ?? [];
  if (!Array.isArray(rawServices)) throw new InvalidRequest("services must be a list", "services");
  if (!Array.isArray(rawSlots)) throw new InvalidRequest("credentials must be a list", "credentials");
  if (rawServices.length > LIMITS.servicesPerProposal) throw new InvalidRequest(`at most ${LIMITS.servicesPerProposal} services per proposal`, "services");
  if (rawSlots.length > LIMITS.credentialsPerProposal)
    throw new InvalidRequest(`at most ${LIMITS.credentialsPerProposal} credential slots per proposal`, "credentials");
  if (rawServices.length === 0 && rawSlots.length === 0) throw new InvalidRequest("a proposal needs at least one service or credential slot", "services");

  const services = rawServices.map((raw, i): ProposedService => {
    const s = (raw ?? {}) as Record<string, unknown>;
    const f = `services[${i}]`;
    const rules = parseRules(s.rules, `${f}.rules`);
    return {
      action: readAction(s.action, `${f}.action`),
      host: parseHostPattern(s.host, { allowIp: false }, `${f}.host`).text,
      description: readText(s.description, `${f}.description`, TEXT_LIMITS.description),
      auth: readAuth(s.auth, `${f}.auth`),
      ...(rules && { rules }),
    };
  });
  const credentials = rawSlots.map((raw, i): ProposedSlot => {
    const c = (raw ?? {}) as Record<string, unknown>;
    const f = `credentials[${i}]`;
    if ("value" in c || "secret" in c) throw new InvalidRequest(`${f}: agents never send credential values; a human types them at approval`, `${f}.value`);
    return {
      action: readAction(c.action, `${f}.action`),
      key: readKey(c.key, `${f}.key`),
      description: readText(c.description, `${f}.description`, TEXT_LIMITS.description),
      obtain: readObtain(c.obtain, `${f}.obtain`),
      obtain_instructions: readText(c.obtain_instructions, `${f}.obtain_instructions`, TEXT_LIMITS.obtain_instructions),
    };
  });
  assertUnique(
    services.map((s) => s.host),
    "services",
    "host",
  );
  assertUnique(
    credentials.map((c) => c.key),
    "credentials",
    "key",
  );
  return {
    services,
    credentials,
    message: readText(body.message, "message", TEXT_LIMITS.message),
    user_message: readText(body.user_message, "user_message", TEXT_LIMITS.user_message),
  };
}

function assertUnique(values: string[], field: string, what: string) {
  const seen = new Set<string>();
  for (const v of values) {
    if (seen.has(v)) throw new InvalidRequest(`${field}: ${what} ${v} appears twice`, field);
    seen.add(v);
  }
}

/** Contract rule 1: each key a service names resolves to a slot here or an existing credential. */
export function assertKeysResolve(p: ProposalInput, existing: readonly string[]): void {
  const available = new Set([...p.credentials.map((c) => c.key), ...existing]);
  p.services.forEach((s, i) => {
    // Static types name one key (auth.token); the minted ones several (client_id, refresh_token, private_key…).
    for (const [field, key] of authKeyFields(s.auth)) {
      if (available.has(key)) continue;
      throw new InvalidRequest(
        `services[${i}].auth.${field} names ${key}, which is neither a credential slot in this proposal nor an existing credential`,
        `services[${i}].auth.${field}`,
      );
    }
  });
}
