// Reading a vault's audit log (GET /v1/vaults/:vault/logs, `broker logs`, the console's Logs page):
// filters, an id cursor, and who made each request by name (an agent's name, a person's email),
// never only `agent:1`. Records hold names and numbers only; there is nothing secret to return.

import { InvalidRequest } from "../errors.ts";
import type { AuditRow } from "../store/index.ts";
import type { Domain } from "../identity/index.ts";
import { iso } from "../identity/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";

export const AUDIT_PAGE_MAX = 1000;

export interface AuditQuery {
  /** Records older than this id (newest first). */
  readonly before?: number;
  /** Records newer than this id (oldest first, for following). */
  readonly after?: number;
  readonly host?: string;
  readonly status?: number;
  /** `agent:3`, `user:1`, an agent's name or a person's email. */
  readonly principal?: string;
  /** Only records report mode let through (architecture.md D33). */
  readonly wouldRefuse?: boolean;
  readonly limit: number;
}

export type PrincipalKind = "agent" | "user" | "unknown";

export interface AuditRecord {
  id: number;
  time: string;
  /** The stable id (`agent:3`, `user:1`), as before; `principal_name` is what to show a person. */
  principal: string;
  principal_name: string;
  principal_kind: PrincipalKind;
  ingress: string;
  method: string;
  host: string;
  path: string;
  service: string | null;
  credential_keys: string[];
  /** The credentials by reference among them, as people write them (`conn:path#field`); never values. */
  credential_refs: string[];
  status: number;
  bytes_in: number;
  bytes_out: number;
  duration_ms: number;
  error: string | null;
  /** Made on a session minted by `vault run --contain`. */
  contained: boolean;
  /** Who approved this exact request (`user:1`) when a rule held it for a human, and their email. */
  approved_by: string | null;
  approved_by_name: string | null;
  /** What the request's LLM call used (issue 38), when the broker metered it; null for any other request. */
  llm: LlmUse | null;
  /** The workload that asked (issue 39): its platform token's issuer and subject; null for anyone else. */
  workload: { issuer: string | null; subject: string } | null;
}

export interface LlmUse {
  model: string | null;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  /** In `currency`; null when the price table does not price the model. */
  cost: number | null;
  currency: string;
}

export interface AuditPage {
  logs: AuditRecord[];
  /** `before` for the next (older) page when this one was full; null at the end. */
  next_cursor: string | null;
}

import { BUDGET_CURRENCY } from "./budgets.ts";

const PRINCIPAL_ID = /^(user|agent):(\d{1,15})$/;

/** The vault's audit records (role member or above, as `read_logs` says), each naming who asked. */
export async function listAuditLog(d: Domain, open: OpenVault, q: AuditQuery): Promise<AuditPage> {
  requireInVault(open, "read_logs");
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > AUDIT_PAGE_MAX) throw new InvalidRequest(`limit must be 1 to ${AUDIT_PAGE_MAX}`, "limit");
  for (const [field, v] of [
    ["host", q.host],
    ["principal", q.principal],
  ] as const) {
    // No stored host or principal has a control character (PostgreSQL refuses a NUL in text: a 500 before).
    if (v && (v.length > 1000 || /[\u0000-\u001f\u007f]/.test(v))) throw new InvalidRequest(`${field} must be a host or principal as the log shows it`, field);
  }
  const principal = q.principal ? await resolvePrincipalFilter(d, q.principal.trim()) : undefined;
  if (principal === null) return { logs: [], next_cursor: null }; // a name nobody has made no request
  const rows = await d.store.audit.list({
    vaultId: open.vault.id,
    before: q.before,
    after: q.after,
    host: q.host || undefined,
    status: q.status,
    principal,
    ...(q.wouldRefuse && { wouldRefuse: true }),
    limit: q.limit,
  });
  const names = createPrincipalNamer(d);
  const logs: AuditRecord[] = [];
  for (const r of rows) logs.push(await viewAuditRow(r, names, d.prices?.current().currency ?? BUDGET_CURRENCY));
  const last = rows.at(-1);
  return { logs, next_cursor: rows.length === q.limit && last ? String(last.id) : null };
}

/** A filter value as the stored principal id: ids pass through, an email names a user, anything else an agent. */
async function resolvePrincipalFilter(d: Domain, who: string): Promise<string | null> {
  if (PRINCIPAL_ID.test(who)) return who;
  if (who.includes("@")) {
    const user = await d.store.users.byEmail(who.toLowerCase());
    return user ? `user:${user.id}` : null;
  }
  const agent = await d.store.agents.byName(who);
  return agent ? `agent:${agent.id}` : null;
}

export type Namer = (id: string) => Promise<{ name: string; kind: PrincipalKind }>;

/** Names principal ids, each looked up once per call (a page of 100 rows is usually one or two principals). */
export function createPrincipalNamer(d: Domain): Namer {
  const seen = new Map<string, Promise<{ name: string; kind: PrincipalKind }>>();
  const lookUp = async (id: string): Promise<{ name: string; kind: PrincipalKind }> => {
    const m = PRINCIPAL_ID.exec(id);
    if (m?.[1] === "agent") return { name: (await d.store.agents.byId(Number(m[2])))?.name ?? `removed agent (${id})`, kind: "agent" };
    if (m?.[1] === "user") return { name: (await d.store.users.byId(Number(m[2])))?.email ?? `removed user (${id})`, kind: "user" };
    return { name: id, kind: "unknown" };
  };
  return (id) => {
    let hit = seen.get(id);
    if (!hit) seen.set(id, (hit = lookUp(id)));
    return hit;
  };
}

async function viewAuditRow(r: AuditRow, names: Namer, currency: string): Promise<AuditRecord> {
  const who = await names(r.principal);
  return {
    id: r.id,
    time: iso(r.at),
    principal: r.principal,
    principal_name: who.name,
    principal_kind: who.kind,
    ingress: r.ingress,
    method: r.method,
    host: r.host,
    path: r.path,
    service: r.service,
    credential_keys: r.credentialKeys ? r.credentialKeys.split(",") : [],
    credential_refs: parseRefs(r.credentialRefs),
    status: r.status,
    bytes_in: r.bytesIn,
    bytes_out: r.bytesOut,
    duration_ms: r.durationMs,
    error: r.error,
    contained: r.contained,
    approved_by: r.approvedBy,
    approved_by_name: r.approvedBy === null ? null : (await names(r.approvedBy)).name,
    llm: llmUseOf(r, currency),
    workload: r.workloadSubject ? { issuer: r.workloadIssuer ?? null, subject: r.workloadSubject } : null,
  };
}

/** Records report mode let through since `since` (ms), up to `cap` (the console's "in the last 24 h"). */
export async function countWouldRefuse(d: Domain, open: OpenVault, since: number, cap: number): Promise<number> {
  requireInVault(open, "read_logs");
  return d.store.policyModes.wouldRefuseSince(open.vault.id, since, cap);
}

function llmUseOf(r: AuditRow, currency: string): LlmUse | null {
  if (r.inputTokens === null || r.inputTokens === undefined) return null;
  return {
    model: r.llmModel ?? null,
    input_tokens: r.inputTokens,
    output_tokens: r.outputTokens ?? 0,
    total_tokens: r.totalTokens ?? 0,
    cost: r.costMicros === null || r.costMicros === undefined ? null : r.costMicros / 1e6,
    currency,
  };
}

/** `credential_refs` as audit.ts stored it (a JSON array of strings, or null: none); anything else reads as none. */
function parseRefs(text: string | null | undefined): string[] {
  if (!text) return [];
  try {
    const refs: unknown = JSON.parse(text);
    return Array.isArray(refs) ? refs.filter((r): r is string => typeof r === "string") : [];
  } catch {
    return [];
  }
}
