// Proposals: an agent asks for host access and credential slots; a human approves (supplying
// the values) or rejects. Applying is one transaction (services and credentials written, status
// applied) guarded by the pending status, so approving twice or concurrently applies once.

import { Conflict, InvalidRequest, NotFound, PermissionDenied } from "../errors.ts";
import type { ProposalRow, ProposalStatus } from "../store/index.ts";
import { Secret } from "../secret.ts";
import type { Domain } from "../identity/index.ts";
import { encryptCredential } from "../crypto/index.ts";
import { LIMITS, type CredentialSource } from "../policy/index.ts";
import type { Principal } from "../identity/index.ts";
import { assertKeysResolve, type ProposalInput, type ProposedService, type ProposedSlot } from "./proposal-input.ts";
import { authKeys, storedRules, toRow, viewService, type ServiceAuth } from "./services.ts";
import { isIpName, parseHostPattern, type Rules } from "../policy/index.ts";
import { newHostWarning, replacedServiceWarning, rulesRemovedWarning } from "../words/index.ts";
import { hashToken, mintToken } from "../crypto/index.ts";
import { checkPageLimit, cutPage, iso } from "../identity/index.ts";
import { openVault, requireInVault, requireUnmanaged, type OpenVault, type UserPrincipal } from "../identity/index.ts";
import { announceProposal } from "./webhooks.ts";
import { storedForm } from "./credential-ops.ts";
import type { TemplateChoice } from "../templates/index.ts";

const PROPOSAL_TTL_MS = 7 * 86_400_000;

export interface ProposalView {
  id: number;
  status: ProposalStatus;
  vault: string;
  message: string;
  user_message: string;
  services: readonly ProposedService[];
  credentials: readonly ProposedSlot[];
  created_at: string;
  expires_at: string;
  decided_at: string | null;
}

export function viewProposal(row: ProposalRow, vault: string): ProposalView {
  return {
    id: row.id,
    status: row.status,
    vault,
    message: row.message,
    user_message: row.userMessage,
    services: row.services,
    credentials: row.credentials,
    created_at: iso(row.createdAt),
    expires_at: iso(row.expiresAt),
    decided_at: row.decidedAt === null ? null : iso(row.decidedAt),
  };
}

/** Files a proposal in the opened vault; every role may ask (reading the vault is all it needs), people too. */
export async function createProposal(d: Domain, open: OpenVault, proposal: ProposalInput) {
  requireInVault(open, "read");
  const p = open.principal;
  assertReachableIps(d, proposal);
  const minted = mintToken("approval");
  const row = await d.store.transaction(async (tx) => {
    assertKeysResolve(proposal, await tx.credentials.keys(open.vault.id));
    if ((await tx.proposals.countPending(open.vault.id)) >= LIMITS.pendingProposalsPerVault) {
      throw new Conflict(`vault ${open.vault.name} already has ${LIMITS.pendingProposalsPerVault} pending proposals; wait for a human to decide some`);
    }
    const now = d.now();
    return tx.proposals.create({
      vaultId: open.vault.id,
      message: proposal.message,
      userMessage: proposal.user_message,
      services: proposal.services,
      credentials: proposal.credentials,
      createdBy: p.id,
      viaSession: p.kind === "scoped",
      createdAt: now,
      expiresAt: now + PROPOSAL_TTL_MS,
      approvalTokenHash: minted.hash,
      approvalExpiresAt: now + LIMITS.approvalTokenTtlMs,
    });
  });
  // reveal: the read-only approval token goes into the link the agent hands to a human
  const approvalUrl = `${d.publicUrl}/approve/${row.id}?token=${minted.token.reveal()}`;
  void announceProposal(d, "proposal.created", row, approvalUrl); // off the request path: never waits for a receiver
  return {
    id: row.id,
    status: row.status,
    vault: open.vault.name,
    approval_url: approvalUrl,
    message: `Proposal ${row.id} is pending. Ask a human to open ${approvalUrl} to approve it, then poll GET ${d.publicUrl}/v1/proposals/${row.id} until its status is no longer pending.`,
  };
}

/** A proposal the principal may see (its vault, with X-Vault for agent tokens). */
export async function readProposalFor(d: Domain, p: Principal, id: number, xVault: string | undefined, action: "read" | "approve") {
  if (p.kind === "agent" && !xVault) throw new InvalidRequest("agent tokens must send the X-Vault header naming the vault", "x-vault");
  const row = await d.store.proposals.byId(id);
  const vault = row && (await d.store.vaults.byId(row.vaultId));
  if (!row || !vault) throw new NotFound("no such proposal");
  const open = await openVault(d, p, vault.name, action, p.kind === "agent" ? xVault : undefined).catch((err) => {
    throw err instanceof PermissionDenied && action === "approve" ? err : new NotFound("no such proposal");
  });
  return { row, open };
}

/** A page of the vault's proposals newest first (one status when given), older than the id `before`. */
export async function listProposals(d: Domain, open: OpenVault, status: string | undefined, q: { limit: number; before?: number }) {
  if (status !== undefined && !["pending", "applied", "rejected", "expired"].includes(status)) {
    throw new InvalidRequest("status must be pending, applied, rejected or expired", "status");
  }
  checkPageLimit(q.limit);
  const rows = await d.store.proposals.list(open.vault.id, (status as ProposalStatus) ?? null, q.limit + 1, q.before);
  const page = cutPage(rows, q.limit, (r) => String(r.id));
  return { proposals: page.rows.map((r) => viewProposal(r, open.vault.name)), next_cursor: page.next_cursor };
}

/** Checks a read-only approval token (24 hours) for proposal `id`. */
export async function proposalByApprovalToken(d: Domain, id: number, rawToken: string) {
  const row = await d.store.proposals.byId(id);
  if (!row || row.approvalTokenHash !== hashToken(rawToken) || row.approvalExpiresAt <= d.now()) return undefined;
  const vault = await d.store.vaults.byId(row.vaultId);
  return vault && { row, vault };
}

/**
 * Existing credentials that `services` would send to a host they do not go to today: the warning
 * the approval page and the console's service forms show before a person confirms.
 */
export async function newHostUses(
  d: Domain,
  vaultId: number,
  services: readonly { host: string; auth: ServiceAuth }[],
): Promise<{ key: string; host: string }[]> {
  const existingKeys = new Set(await d.store.credentials.keys(vaultId));
  // Any service of the vault may send a key today: the whole vault is read, on purpose.
  const current = await d.store.services.allOfVault(vaultId);
  const uses: { key: string; host: string }[] = [];
  const today = current.map((c) => ({ host: c.host, auth: viewService(c).auth }));
  for (const s of services) {
    for (const [key, host] of keyDestinations(s)) {
      if (!existingKeys.has(key)) continue;
      if (!today.some((c) => keyDestinations(c).some(([k, h]) => k === key && h === host))) uses.push({ key, host });
    }
  }
  return uses;
}

/**
 * Where each key's value travels, as [key, host]: the service's host for the static types and for an
 * AWS access key id or session token; an OAuth client's id, secret and refresh token go only to the
 * token endpoint's host, which is what a person must see before a proposal reuses one of their
 * credentials. A SigV4 secret key never leaves the broker (it signs one request at a time).
 */
export function keyDestinations(s: { host: string; auth: ServiceAuth }): [string, string][] {
  const a = s.auth;
  if (a.type === "oauth2_client_credentials" || a.type === "oauth2_refresh") {
    const tokenHost = a.token_url ? new URL(a.token_url).host : s.host;
    return authKeys(a).map((k) => [k, tokenHost]);
  }
  if (a.type === "aws_sigv4") return [a.access_key_id, a.session_token].filter((k): k is string => !!k).map((k) => [k, s.host]);
  // The private key stays here, but the app JWT it signs (good for ten minutes, for any installation) goes to the API host.
  if (a.type === "github_app") return a.private_key ? [[a.private_key, new URL(a.api_url ?? "https://api.github.com").host]] : [];
  return authKeys(a).map((k) => [k, s.host]);
}

/** Plain warnings for the approver: existing credentials sent to hosts they do not go to today. */
export async function approvalWarnings(d: Domain, row: ProposalRow): Promise<string[]> {
  const services = row.services;
  const warnings = (await newHostUses(d, row.vaultId, services)).map(({ key, host }) => newHostWarning(key, host));
  for (const s of services) {
    const replaced = await d.store.services.get(row.vaultId, s.host);
    if (replaced && authKeys(viewService(replaced).auth).join() !== authKeys(s.auth).join()) warnings.push(replacedServiceWarning(s.host));
    if (!replaced) continue;
    // Narrower or wider rules are shown beside each host; dropping them all is worth a warning of its own.
    const now = storedRules(replaced);
    if (now && !s.rules) warnings.push(rulesRemovedWarning(s.host, now));
  }
  return warnings;
}

/**
 * Applies a pending proposal: a value for every slot (optional for keys that already exist),
 * services and credentials written and the status set in one transaction.
 */
export async function approveProposal(
  d: Domain,
  open: OpenVault,
  row: ProposalRow,
  values: Readonly<Record<string, CredentialSource>>,
  decided: ApprovalChoices = {},
): Promise<void> {
  const p = mayDecide(open, row);
  // A proposal changes services and credentials: in a vault kept as code, its file takes them (rejecting stays open).
  await requireUnmanaged(d, open, undefined, " (add what the proposal asks for to the file, then reject the proposal)");
  const slots = row.credentials;
  const services = withChosenRules(row.services, decided.rules);
  // A value for a key the proposal does not ask for would be dropped unseen (a typo keeps the old value).
  for (const key of Object.keys(values)) {
    if (!slots.some((slot) => slot.key === key))
      throw new InvalidRequest(`credentials names ${key}, which this proposal does not ask for`, `credentials.${key}`);
  }
  const existing = new Set(await d.store.credentials.keys(row.vaultId));
  const sealed: Awaited<ReturnType<typeof storedForm>>[] = [];
  for (const slot of slots) {
    // Values were read by the contract's ProposalApprovalInput, whichever page or body they came from;
    // a person may answer a slot with a reference into a store the vault may use instead of a value.
    const source = values[slot.key];
    if (source === undefined && existing.has(slot.key)) continue; // keep the stored value
    if (source === undefined) throw new InvalidRequest(`a value for ${slot.key} is required`, slot.key);
    sealed.push(await storedForm(d, row.vaultId, slot.key, source, slot.key));
  }
  const now = d.now();
  await d.store.transaction(async (tx) => {
    if (!(await tx.proposals.decide(row.id, "applied", p.userId, now))) throw new Conflict("this proposal was already decided");
    for (const c of sealed) await tx.credentials.put(c, now);
    for (const s of services) await tx.services.put(toRow(row.vaultId, s.host, s.description, s.auth, true, s.rules, chosenTemplate(s)), now);
  });
  d.onVaultChange?.(row.vaultId);
  // Slots answered with a reference are read at once, so how that went shows before the first request.
  for (const c of sealed) if ("reference" in c && c.reference) void d.secretStores?.readNow(row.vaultId, c.reference);
  void announceProposal(d, "proposal.approved", { ...row, status: "applied", decidedAt: now, decidedBy: p.userId });
}

/**
 * An IP literal is a host an agent may propose only where the broker's network guard would dial it (a
 * loopback or private address under BROKER_ALLOW_PRIVATE_RANGES or the allowlist): the hint the broker
 * hands out for such a host is then accepted as it is, and a proposal for a blocked address is refused
 * with the guard's reason instead of being approved into a service that can never be reached.
 */
function assertReachableIps(d: Domain, proposal: ProposalInput): void {
  proposal.services.forEach((s, i) => {
    const pattern = parseHostPattern(s.host, { allowIp: true });
    if (!isIpName(pattern.name)) return;
    const refused = d.guardRefuses ? d.guardRefuses(pattern.name, pattern.port) : "this broker checks no IP addresses";
    if (refused)
      throw new InvalidRequest(`services[${i}].host: ${s.host} is an address the broker will not reach (${refused}); use a host name`, `services[${i}].host`);
  });
}

/** A proposed service's template and operations, unless the person replaced its rules with their own. */
function chosenTemplate(s: ProposedService): TemplateChoice | undefined {
  return s.template ? { template: s.template, operations: (s.operations ?? []) as TemplateChoice["operations"] } : undefined;
}

/** What the approving human decides beside the values: rules per host, replacing the ones asked for (to narrow them). */
export interface ApprovalChoices {
  readonly rules?: Readonly<Record<string, Rules | null>>;
}

/**
 * The human's rules win over the agent's for each host they name (null: no rules, everything allowed).
 * Naming a host the proposal does not carry is refused, so a typo cannot pass silently.
 */
function withChosenRules(services: readonly ProposedService[], byHost: ApprovalChoices["rules"]): readonly ProposedService[] {
  if (byHost === undefined) return services;
  for (const host of Object.keys(byHost)) {
    if (!services.some((s) => s.host === host)) throw new InvalidRequest(`rules names ${host}, which this proposal does not ask for`, `rules.${host}`);
  }
  return services.map((s) => {
    if (!Object.hasOwn(byHost, s.host)) return s; // own keys only: a host named `constructor` is no inherited rule
    const rules = byHost[s.host];
    if (JSON.stringify(rules ?? null) === JSON.stringify(s.rules ?? null)) return s; // the box as it was shown: the asked-for rules stand
    const { rules: _asked, template: _t, operations: _o, ...rest } = s; // the person's own rules: no longer the template's
    return rules ? { ...rest, rules } : rest;
  });
}

export async function rejectProposal(d: Domain, open: OpenVault, row: ProposalRow): Promise<void> {
  const p = mayDecide(open, row);
  const now = d.now();
  if (!(await d.store.proposals.decide(row.id, "rejected", p.userId, now))) throw new Conflict("this proposal was already decided");
  void announceProposal(d, "proposal.rejected", { ...row, status: "rejected", decidedAt: now, decidedBy: p.userId });
}

/**
 * Who decides a proposal (architecture.md D9): a person with a user session who is an admin or
 * member of the proposal's vault, checked here whoever calls (API, approval page, console).
 */
function mayDecide(open: OpenVault, row: ProposalRow): UserPrincipal {
  if (open.vault.id !== row.vaultId) throw new NotFound("no such proposal");
  requireInVault(open, "approve"); // people only, admins and members: worded as every refusal is (identity's explainRefusal)
  const p = open.principal;
  if (p.kind !== "user") throw new PermissionDenied("only a human with a user session can approve or reject proposals");
  return p;
}

/** Expires pending proposals past their 7 days (run on a timer, so expiry does not wait for a read). */
export async function expireProposals(d: Domain): Promise<number> {
  // RETURNING: each expired row is announced once, by the instance whose sweep expired it.
  const rows = await d.store.proposals.expireReturning(d.now());
  for (const row of rows) void announceProposal(d, "proposal.expired", row);
  return rows.length;
}

const KEEP_DEAD_ROWS_MS = 30 * 86_400_000;

/**
 * Housekeeping on the same timer: sessions and invites that ended more than 30 days ago are deleted,
 * so those tables do not grow without bound (they hold only hashes; the audit log keeps the history).
 */
export async function pruneEndedRows(d: Domain): Promise<number> {
  const before = d.now() - KEEP_DEAD_ROWS_MS;
  return (await d.store.sessions.prune(before)) + (await d.store.invites.prune(before)) + (await d.store.changeLog.prune());
}

export function readProposalId(raw: string): number {
  if (!/^\d{1,15}$/.test(raw)) throw new NotFound("no such proposal");
  return Number(raw);
}
