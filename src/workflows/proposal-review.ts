// What a person reviewing a vault's proposals needs beyond the API's view: who asked and who
// decided, by name (never `agent:1`), the new-host warnings of pending ones, and a fresh approval
// link for a pending proposal. Never returns a credential value; the link's token is shown once.

import { Conflict, NotFound } from "../errors.ts";
import type { ProposalRow, VaultRole } from "../store/index.ts";
import type { Domain } from "../identity/index.ts";
import { LIMITS } from "../policy/index.ts";
import { nameRequester, type RequesterKind } from "../identity/index.ts";
import { approvalWarnings, viewProposal, type ProposalView } from "./proposals.ts";
import { mintToken } from "../crypto/index.ts";
import { checkPageLimit, cutPage, iso } from "../identity/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";

export interface ProposalReview extends ProposalView {
  /** The agent (or person) who filed it, by name; "a removed agent" once it is gone. */
  requested_by: string;
  /** "session": a `broker vault run` session of requested_by. */
  requested_by_kind: RequesterKind;
  /** The person who approved or rejected it, by email; null while pending or when it expired. */
  decided_by: string | null;
  /** Plain warnings for the approver (pending proposals only). */
  warnings: string[];
}

/** Who filed a proposal, for the approval page: by name, and with the role they hold in its vault today. */
export async function requesterOf(d: Domain, row: ProposalRow): Promise<{ name: string; kind: ProposalReview["requested_by_kind"]; role: VaultRole | null }> {
  const who = await nameRequester(d, row.createdBy, row.viaSession);
  const id = Number(/:(\d{1,15})$/.exec(row.createdBy)?.[1] ?? NaN);
  const role = row.createdBy.startsWith("agent:")
    ? await d.store.access.grantRole(row.vaultId, id)
    : row.createdBy.startsWith("user:")
      ? await d.store.access.memberRole(row.vaultId, id)
      : undefined;
  return { ...who, role: role ?? null };
}

/**
 * The console's Proposals page: those awaiting a decision, newest first (a vault holds at most
 * LIMITS.pendingProposalsPerVault of them, read on the first page only), and a page of the decided
 * ones newest first, older than the id `before`; each with names, the pending ones with warnings. Any
 * role may read them, as GET /v1/proposals.
 */
export async function reviewProposals(d: Domain, open: OpenVault, q: { limit: number; before?: number }) {
  requireInVault(open, "read");
  checkPageLimit(q.limit);
  const pending = q.before === undefined ? await d.store.proposals.list(open.vault.id, "pending", LIMITS.listPageMax) : [];
  const decided = cutPage(await d.store.proposals.list(open.vault.id, "decided", q.limit + 1, q.before), q.limit, (r) => String(r.id));
  const review = createReviewer(d, open);
  const views = { pending: [] as ProposalReview[], decided: [] as ProposalReview[] };
  for (const row of pending) views.pending.push(await review(row));
  for (const row of decided.rows) views.decided.push(await review(row));
  return { ...views, next_cursor: decided.next_cursor };
}

/** Reviews rows of one vault, naming each requester and decider once per call. */
function createReviewer(d: Domain, open: OpenVault): (row: ProposalRow) => Promise<ProposalReview> {
  const names = new Map<string, Awaited<ReturnType<typeof nameRequester>>>();
  const emails = new Map<number, string>();
  return async (row) => {
    const key = `${row.createdBy}/${row.viaSession}`;
    if (!names.has(key)) names.set(key, await nameRequester(d, row.createdBy, row.viaSession));
    if (row.decidedBy !== null && !emails.has(row.decidedBy)) emails.set(row.decidedBy, (await d.store.users.byId(row.decidedBy))?.email ?? "a removed user");
    const who = names.get(key)!;
    return {
      ...viewProposal(row, open.vault.name),
      requested_by: who.name,
      requested_by_kind: who.kind,
      decided_by: row.decidedBy === null ? null : emails.get(row.decidedBy)!,
      warnings: row.status === "pending" ? await approvalWarnings(d, row) : [],
    };
  };
}

/** A proposal of this vault (so a console path can never reach another vault's proposal). */
export async function proposalInVault(d: Domain, open: OpenVault, id: number): Promise<ProposalRow> {
  const row = await d.store.proposals.byId(id);
  if (!row || row.vaultId !== open.vault.id) throw new NotFound("no such proposal");
  return row;
}

/**
 * A new 24-hour approval link for a pending proposal, for a person who may decide it (to hand to
 * another approver, or when the agent's link expired). The previous link stops working.
 */
export async function reissueApprovalLink(d: Domain, open: OpenVault, row: ProposalRow) {
  requireInVault(open, "approve"); // humans who may decide; agents never mint approval links
  if (row.vaultId !== open.vault.id) throw new NotFound("no such proposal");
  const minted = mintToken("approval");
  const expiresAt = d.now() + LIMITS.approvalTokenTtlMs;
  if (!(await d.store.proposals.renewApprovalToken(row.id, minted.hash, expiresAt)))
    throw new Conflict("this proposal was already decided; only a pending proposal has an approval link");
  // reveal: the read-only approval token goes into the link shown once to the person who asked for it
  return { id: row.id, approval_url: `${d.publicUrl}/approve/${row.id}?token=${minted.token.reveal()}`, expires_at: iso(expiresAt) };
}
