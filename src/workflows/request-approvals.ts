// Human approval of single requests (service rules with "approve": "each"). The egress core holds a
// matching request and asks the gate here: an approval of this exact request (same principal, same
// fingerprint) that a human granted lets it through once; otherwise the request is filed for a human
// (or the pending one found again) and the agent gets 428 with where to approve and where to poll.
// Only human user sessions of a vault admin or member decide, as for proposals.

import { ApprovalRefused, ApprovalRequired, Conflict, NotFound, PermissionDenied, type HeldRequestLinks } from "../errors.ts";
import type { HeldCursor, RequestApprovalRow, RequestApprovalState } from "../store/index.ts";
import type { Domain } from "../identity/index.ts";
import { openDescription, sealDescription } from "./held-description.ts";
import { LIMITS } from "../policy/index.ts";
import { nameRequester, type RequesterKind } from "../identity/index.ts";
import { mayInVault } from "../identity/index.ts";
import { mintPublicId } from "../crypto/index.ts";
import { checkPageLimit, cutPage, iso, requireUser } from "../identity/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";
import { announceRequestApproval } from "./webhooks.ts";

/** A held request as the egress core describes it: credentials left out, echoes of one redacted. */
export interface HeldRequest {
  readonly vault: { readonly id: number; readonly name: string };
  readonly principal: string;
  /** Sent by a `vault run` session of `principal`, not by the person (or agent) directly. */
  readonly viaSession: boolean;
  /** Binds an approval to this exact request (egress/held-request.ts says what it covers). */
  readonly fingerprint: string;
  readonly method: string;
  /** host, or host:port when the port is not 443. */
  readonly host: string;
  /** Path and query as forwarded. */
  readonly target: string;
  readonly service: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly bodyPreview: string | null;
  readonly bodyBytes: number;
  readonly bodySha256: string;
}

export interface WaitOptions {
  /** How long to wait for a human's decision before answering 428 (0: answer at once). */
  readonly waitMs: number;
  /** The agent went away: stop waiting. */
  readonly signal?: AbortSignal;
}

export interface RequestApprovalGate {
  /**
   * Resolves with the approver's principal id (`user:<id>`) once this exact request may be forwarded,
   * the approval spent on it; throws ApprovalRequired (428) or ApprovalRefused (403) otherwise.
   */
  pass(held: HeldRequest, wait: WaitOptions): Promise<string>;
}

const POLL_MS = 500;

/** The effective state: a pending or approved row past its expiry is expired, whatever the row says yet. */
export function stateOf(row: RequestApprovalRow, now: number): RequestApprovalState {
  return (row.state === "pending" || row.state === "approved") && row.expiresAt <= now ? "expired" : row.state;
}

export function createRequestApprovalGate(d: Domain): RequestApprovalGate {
  /** Requests waiting (Prefer: wait) now, per principal. */
  const waiting = new Map<string, number>();
  const links = (row: RequestApprovalRow, vault: string): HeldRequestLinks => linksOf(d, row, vault);

  /** Spends an approved row; the approver, or undefined when another request spent it first. */
  async function spend(row: RequestApprovalRow): Promise<string | undefined> {
    if (!(await d.store.requestApprovals.use(row.id, d.now()))) return undefined;
    return `user:${row.decidedBy}`;
  }

  /**
   * A new pending approval, or the one a concurrent identical request filed a moment before (one
   * pending approval per request, so parallel retries do not bury the human in duplicates).
   */
  async function file(held: HeldRequest): Promise<RequestApprovalRow> {
    try {
      return await insert(held);
    } catch (err) {
      const existing = await d.store.requestApprovals.latest(held.vault.id, held.principal, held.fingerprint);
      if (existing && stateOf(existing, d.now()) === "pending") return existing;
      throw err;
    }
  }

  async function insert(held: HeldRequest): Promise<RequestApprovalRow> {
    const publicId = mintPublicId("apr_");
    const sealed = await sealDescription(d, held.vault.id, publicId, { target: held.target, headers: held.headers, bodyPreview: held.bodyPreview });
    const row = await d.store.transaction(async (tx) => {
      const now = d.now();
      const pending = await tx.requestApprovals.countPending(held.vault.id, now, held.principal);
      if (pending.principal >= LIMITS.pendingRequestApprovalsPerPrincipal) {
        throw new Conflict(
          `${LIMITS.pendingRequestApprovalsPerPrincipal} of your requests already await a human in vault ${held.vault.name}; wait for some to be decided (or to expire) before sending more`,
        );
      }
      if (pending.vault >= LIMITS.pendingRequestApprovalsPerVault) {
        throw new Conflict(
          `vault ${held.vault.name} already has ${LIMITS.pendingRequestApprovalsPerVault} requests awaiting a human; wait for some to be decided`,
        );
      }
      return tx.requestApprovals.create({
        publicId,
        vaultId: held.vault.id,
        principal: held.principal,
        viaSession: held.viaSession,
        fingerprint: held.fingerprint,
        method: held.method,
        host: held.host,
        service: held.service,
        ...sealed,
        bodyBytes: held.bodyBytes,
        bodySha256: held.bodySha256,
        createdAt: now,
        expiresAt: now + LIMITS.requestApprovalTtlMs,
      });
    });
    void announceRequestApproval(d, "request_approval.created", row, held.vault.name);
    return row;
  }

  /** The answer for a row that does not let the request through, or undefined when a new one must be filed. */
  async function refusal(row: RequestApprovalRow, vault: string): Promise<Error | undefined> {
    const now = d.now();
    const state = stateOf(row, now);
    if (state === "pending") return new ApprovalRequired(links(row, vault));
    if (state === "denied" && row.expiresAt > now) return new ApprovalRefused("approval_denied", links(row, vault));
    // Told once: the retry after that asks a human again.
    if (state === "expired" && row.state !== "expired" && (await d.store.requestApprovals.expire(row.id, now)))
      return new ApprovalRefused("approval_expired", links(row, vault));
    return undefined;
  }

  return {
    async pass(held, wait) {
      let row = await d.store.requestApprovals.latest(held.vault.id, held.principal, held.fingerprint);
      if (row && stateOf(row, d.now()) === "approved") {
        const approver = await spend(row);
        if (approver) return approver;
        row = undefined; // a concurrent retry spent it: this one is a new request to approve
      }
      const refused = row && (await refusal(row, held.vault.name));
      if (refused && !(refused instanceof ApprovalRequired)) throw refused;
      const pending = refused ? row! : await file(held);
      // Prefer: wait — poll until a human decides, the wait ends, the approval expires or the agent leaves
      // (past the principal's share of waits, answered at once).
      const waits = waiting.get(held.principal) ?? 0;
      if (wait.waitMs <= 0 || waits >= LIMITS.requestApprovalWaitsPerPrincipal) throw new ApprovalRequired(links(pending, held.vault.name));
      waiting.set(held.principal, waits + 1);
      try {
        return await waitForDecision(held, pending, wait);
      } finally {
        const left = (waiting.get(held.principal) ?? 1) - 1;
        if (left > 0) waiting.set(held.principal, left);
        else waiting.delete(held.principal);
      }
    },
  };

  /** Polls until a human decides, the wait ends, the approval expires or the agent leaves: the approver, else the 428 or 403. */
  async function waitForDecision(held: HeldRequest, pending: RequestApprovalRow, wait: WaitOptions): Promise<string> {
    const until = Math.min(d.now() + wait.waitMs, pending.expiresAt);
    while (d.now() < until && !wait.signal?.aborted) {
      await sleep(Math.min(POLL_MS, until - d.now()), wait.signal);
      const now = await d.store.requestApprovals.byPublicId(pending.publicId);
      if (!now) break;
      if (stateOf(now, d.now()) === "approved") {
        const approver = await spend(now);
        if (approver) return approver;
        break;
      }
      if (now.state !== "pending") {
        const e = await refusal(now, held.vault.name);
        if (e) throw e;
        break;
      }
    }
    throw new ApprovalRequired(links(pending, held.vault.name));
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

function linksOf(d: Domain, row: RequestApprovalRow, vault: string): HeldRequestLinks {
  const v = encodeURIComponent(vault);
  return {
    approval_id: row.publicId,
    approval_url: `${d.publicUrl}/approve/requests/${row.publicId}`,
    poll_url: `${d.publicUrl}/v1/vaults/${v}/request-approvals/${row.publicId}`,
    expires_at: iso(row.expiresAt),
  };
}

export interface RequestApprovalView extends HeldRequestLinks {
  id: string;
  vault: string;
  state: RequestApprovalState;
  method: string;
  /** https://host[:port]/path?query, as it will be sent (the credential added by the broker, not shown). */
  url: string;
  service: string;
  headers: [string, string][];
  /** The body's start as text (credential echoes redacted), or null (no body, or not text). */
  body: string | null;
  body_bytes: number;
  body_truncated: boolean;
  body_sha256: string;
  requested_by: string;
  requested_by_name: string;
  /** "session": a `broker vault run` session of requested_by_name sent it. */
  requested_by_kind: RequesterKind;
  created_at: string;
  decided_at: string | null;
  decided_by: string | null;
  used_at: string | null;
}

export async function viewRequestApproval(d: Domain, row: RequestApprovalRow, vault: string): Promise<RequestApprovalView> {
  const who = await nameRequester(d, row.principal, row.viaSession);
  const decider = row.decidedBy === null ? null : ((await d.store.users.byId(row.decidedBy))?.email ?? "a removed user");
  const described = await openDescription(d, row);
  return {
    id: row.publicId,
    vault,
    state: stateOf(row, d.now()),
    method: row.method,
    url: `https://${row.host}${described.target}`,
    service: row.service,
    headers: described.headers.map(([n, v]) => [n, v]),
    body: described.bodyPreview,
    body_bytes: row.bodyBytes,
    // The preview is cut at its limit (less the end of a split character); redaction alone only shortens it.
    body_truncated: described.bodyPreview !== null && Buffer.byteLength(described.bodyPreview) >= LIMITS.heldRequestPreviewBytes - 3,
    body_sha256: row.bodySha256,
    requested_by: row.principal,
    requested_by_name: who.name,
    requested_by_kind: who.kind,
    created_at: iso(row.createdAt),
    decided_at: row.decidedAt === null ? null : iso(row.decidedAt),
    decided_by: decider,
    used_at: row.usedAt === null ? null : iso(row.usedAt),
    ...linksOf(d, row, vault),
  };
}

const PUBLIC_ID = /^apr_[A-Za-z0-9_-]{16}$/;

/**
 * Whether `open`'s principal may read held requests other than its own: people who are members or
 * admins. An agent (or a `vault run` session) with the member role reads the audit log, which holds no
 * query, header value or body, but not other principals' held requests, which do.
 */
function readsOthers(open: OpenVault): boolean {
  return open.principal.kind === "user" && mayInVault(open.principal, open.role, "read_logs");
}

/**
 * A page of the vault's held requests (role member or above; an agent sees only its own): awaiting a
 * decision first, oldest first, then the rest newest first, after the cursor `after`. The next cursor
 * says which part the page ended in: `a<id>` or `r<id>` (contract/pages.ts reads it back).
 */
export async function listRequestApprovals(
  d: Domain,
  open: OpenVault,
  q: { limit: number; after?: HeldCursor },
): Promise<{ request_approvals: RequestApprovalView[]; next_cursor: string | null }> {
  requireInVault(open, "read_logs");
  checkPageLimit(q.limit);
  const now = d.now();
  const mine = readsOthers(open) ? undefined : open.principal.id;
  const rows = await d.store.requestApprovals.list(open.vault.id, now, q.limit + 1, q.after, mine);
  const page = cutPage(rows, q.limit, (r) => `${r.state === "pending" && r.expiresAt > now ? "a" : "r"}${r.id}`);
  return { request_approvals: await Promise.all(page.rows.map((r) => viewRequestApproval(d, r, open.vault.name))), next_cursor: page.next_cursor };
}

/** One held request: for people who are members or admins, and for the principal whose request it is (its poll_url). */
export async function readRequestApproval(d: Domain, open: OpenVault, publicId: string): Promise<RequestApprovalRow> {
  const row = PUBLIC_ID.test(publicId) ? await d.store.requestApprovals.byPublicId(publicId) : undefined;
  if (!row || row.vaultId !== open.vault.id) throw new NotFound("no such request approval in this vault");
  if (row.principal !== open.principal.id) {
    requireInVault(open, "read_logs");
    if (!readsOthers(open)) throw new PermissionDenied("only people who are members or admins of the vault read other principals' held requests");
  }
  return row;
}

/** A human's Approve or Deny (user sessions of admins and members only); 409 once decided or expired. */
export async function decideRequestApproval(d: Domain, open: OpenVault, publicId: string, decision: "approve" | "deny"): Promise<RequestApprovalView> {
  requireInVault(open, "approve");
  const user = requireUser(open.principal);
  const row = await readRequestApproval(d, open, publicId);
  const state = stateOf(row, d.now());
  if (state !== "pending") throw new Conflict(`this request is no longer awaiting a decision (it is ${state})`);
  if (!(await d.store.requestApprovals.decide(row.id, decision === "approve" ? "approved" : "denied", user.userId, d.now()))) {
    throw new Conflict("this request was decided by someone else, or expired, a moment ago");
  }
  const decided = (await d.store.requestApprovals.byPublicId(publicId))!;
  void announceRequestApproval(d, decision === "approve" ? "request_approval.approved" : "request_approval.denied", decided, open.vault.name);
  return viewRequestApproval(d, decided, open.vault.name);
}

/** Removes held requests that ended more than a day ago (their descriptions are not kept for ever). */
export async function pruneRequestApprovals(d: Domain): Promise<number> {
  return d.store.requestApprovals.prune(d.now() - 86_400_000);
}
