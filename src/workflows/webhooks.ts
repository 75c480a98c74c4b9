// Proposal notifications, the domain side: a vault's webhooks (human admins add, list and remove them),
// the signing secret (sealed with the data key, shown once at creation, never again) and the events a
// proposal raises. Events carry names, hosts and key names, never a credential value; delivery (guard,
// signing, retries) lives in webhooks/webhook-delivery.ts. Never logs a secret or a receiver's URL.

import { NotFound, PermissionDenied, Conflict } from "../errors.ts";
import type { ProposalRow, RequestApprovalRow, WebhookFormat, WebhookRow } from "../store/index.ts";
import { Secret } from "../secret.ts";
import { encodeAad, open, randomBytes, seal } from "../crypto/index.ts";
import type { Domain } from "../identity/index.ts";
import { nameRequester, type RequesterKind } from "../identity/index.ts";
import { iso } from "../identity/index.ts";
import { requireInVault, requireUnmanaged, type OpenVault } from "../identity/index.ts";
import type { AuditCheckpointEvent, BrokerEvent, ProposalEventType, RequestApprovalEvent, RequestApprovalEventType } from "../identity/index.ts";
import type { CheckpointHead } from "../crypto/index.ts";
import { maskWebhookReceiver } from "./webhook-url.ts";

export type {
  AuditCheckpointEvent,
  BrokerEvent,
  ProposalEvent,
  ProposalEventType,
  RequestApprovalEvent,
  RequestApprovalEventType,
  WebhookNotifier,
} from "../identity/index.ts";

export const WEBHOOK_SECRET_PREFIX = "whsec_";
export const MAX_WEBHOOKS_PER_VAULT = 10;

/** A webhook's last delivery status in words, for people (console and CLI say the same). */
export const DELIVERY_STATUS_WORDS: Readonly<Record<string, string>> = {
  never: "nothing sent yet",
  pending: "sending",
  delivered: "delivered",
  retrying: "retrying (the receiver failed)",
  failed: "failed (gave up after 5 tries)",
  blocked: "blocked by the network guard",
};

export interface WebhookView {
  id: number;
  url: string;
  format: WebhookFormat;
  created_at: string;
  delivery: { status: string; event: string | null; attempts: number; error: string | null; at: string | null };
}

export function viewWebhook(row: WebhookRow): WebhookView {
  return {
    id: row.id,
    url: row.url,
    format: row.format,
    created_at: iso(row.createdAt),
    delivery: {
      status: row.lastStatus ?? "never",
      event: row.lastEvent,
      attempts: row.lastAttempts,
      error: row.lastError,
      at: row.lastAttemptAt === null ? null : iso(row.lastAttemptAt),
    },
  };
}

/** Webhooks steer approval links to a receiver: human admins only, never an agent or a scoped session. */
function requireWebhookAdmin(open: OpenVault): void {
  requireInVault(open, "manage");
  if (open.principal.kind !== "user") throw new PermissionDenied("only a human admin of the vault manages its webhooks; ask one");
}

/** A receiver as the contract reads it: an http(s) URL without credentials or #fragment, normalised; its format. */
export interface WebhookRequest {
  url: string;
  format: WebhookFormat;
}

function secretAad(vaultId: number, url: string): Uint8Array {
  return encodeAad("broker", "webhook-secret", 1, vaultId, url);
}

/** The signing secret of a webhook (for delivery only). */
export async function openWebhookSecret(dataKey: CryptoKey, row: WebhookRow): Promise<Secret> {
  const plain = await open(dataKey, { nonce: row.secretNonce, ciphertext: row.secretCiphertext }, secretAad(row.vaultId, row.url));
  return new Secret(new TextDecoder().decode(plain));
}

/** Adds a webhook; the secret is in the answer once and never again. */
export async function addWebhook(d: Domain, open: OpenVault, input: WebhookRequest): Promise<{ webhook: WebhookView; secret: Secret }> {
  requireWebhookAdmin(open);
  await requireUnmanaged(d, open);
  const secret = new Secret(WEBHOOK_SECRET_PREFIX + Buffer.from(randomBytes(32)).toString("base64url"));
  const sealed = await seal(d.dataKey, new TextEncoder().encode(secret.reveal()), secretAad(open.vault.id, input.url)); // reveal: straight into AES-GCM
  const row = await d.store.transaction(async (tx) => {
    if ((await tx.webhooks.count(open.vault.id)) >= MAX_WEBHOOKS_PER_VAULT)
      throw new Conflict(`vault ${open.vault.name} already has ${MAX_WEBHOOKS_PER_VAULT} webhooks; remove one first`);
    if ((await tx.webhooks.list(open.vault.id)).some((w) => w.url === input.url)) throw new Conflict("this vault already has a webhook with that url");
    const createdBy = open.principal.kind === "user" ? open.principal.userId : null;
    return tx.webhooks.create({
      vaultId: open.vault.id,
      url: input.url,
      format: input.format,
      secretNonce: sealed.nonce,
      secretCiphertext: sealed.ciphertext,
      createdBy,
      createdAt: d.now(),
    });
  });
  return { webhook: viewWebhook(row), secret };
}

/** The vault's webhooks, receiver URLs masked: the full URL (a secret for Slack) is only in addWebhook's answer. */
export async function listWebhooks(d: Domain, open: OpenVault): Promise<WebhookView[]> {
  requireWebhookAdmin(open);
  return (await d.store.webhooks.list(open.vault.id)).map((row) => ({ ...viewWebhook(row), url: maskWebhookReceiver(row.url) }));
}

export async function removeWebhook(d: Domain, open: OpenVault, rawId: string): Promise<void> {
  requireWebhookAdmin(open);
  await requireUnmanaged(d, open);
  if (!/^\d{1,15}$/.test(rawId) || !(await d.store.webhooks.remove(open.vault.id, Number(rawId)))) throw new NotFound("no such webhook in this vault");
}

/** Builds the event for a proposal (names looked up now) and hands it to the notifier; never throws, never waits for delivery. */
export async function announceProposal(d: Domain, type: ProposalEventType, row: ProposalRow, approvalUrl: string | null = null): Promise<void> {
  if (!d.webhooks) return;
  try {
    const vault = await d.store.vaults.byId(row.vaultId);
    if (!vault || (await d.store.webhooks.count(row.vaultId)) === 0) return;
    const who = await nameRequester(d, row.createdBy, row.viaSession);
    const decider = row.decidedBy === null ? null : ((await d.store.users.byId(row.decidedBy))?.email ?? "a removed user");
    d.webhooks.notify(row.vaultId, {
      event: type,
      vault: vault.name,
      proposal: {
        id: row.id,
        status: row.status,
        requested_by: who.name,
        requested_by_kind: who.kind,
        message: row.message,
        user_message: row.userMessage,
        hosts: row.services.map((s) => s.host),
        keys: row.credentials.map((s) => s.key),
        created_at: iso(row.createdAt),
        expires_at: iso(row.expiresAt),
        decided_at: row.decidedAt === null ? null : iso(row.decidedAt),
        decided_by: decider,
      },
      approval_url: approvalUrl,
      console_url: `${d.publicUrl}/vaults/${encodeURIComponent(vault.name)}/proposals`,
    });
  } catch {
    // A notification must never fail the proposal action; the delivery status shows what was sent.
  }
}

/** Builds the event for a held request (names looked up now); never throws, never waits for delivery. */
export async function announceRequestApproval(d: Domain, type: RequestApprovalEventType, row: RequestApprovalRow, vault: string): Promise<void> {
  if (!d.webhooks) return;
  try {
    if ((await d.store.webhooks.count(row.vaultId)) === 0) return;
    const who = await nameRequester(d, row.principal, row.viaSession);
    const decider = row.decidedBy === null ? null : ((await d.store.users.byId(row.decidedBy))?.email ?? "a removed user");
    const q = row.target.indexOf("?");
    d.webhooks.notify(row.vaultId, {
      event: type,
      vault,
      request_approval: {
        id: row.publicId,
        state: type === "request_approval.created" ? "pending" : type === "request_approval.approved" ? "approved" : "denied",
        requested_by: who.name,
        requested_by_kind: who.kind,
        method: row.method,
        url: `https://${row.host}${q < 0 ? row.target : row.target.slice(0, q)}`,
        service: row.service,
        body_bytes: row.bodyBytes,
        created_at: iso(row.createdAt),
        expires_at: iso(row.expiresAt),
        decided_by: decider,
      },
      approval_url: `${d.publicUrl}/approve/requests/${row.publicId}`,
      console_url: `${d.publicUrl}/vaults/${encodeURIComponent(vault)}/requests`,
    });
  } catch {
    // A notification must never fail the request; the delivery status shows what was sent.
  }
}

/** A signed checkpoint (docs/audit-chain.md) as it is sent to `vault`'s webhooks: that vault's head, and every head signed. */
export function auditCheckpointEvent(
  publicUrl: string,
  vault: { readonly id: number; readonly name: string },
  c: { readonly id: number; readonly at: number; readonly keyId: string; readonly heads: readonly CheckpointHead[]; readonly signature: string },
): AuditCheckpointEvent {
  const view = (h: CheckpointHead) => ({ vault_id: h.vaultId, seq: h.seq, hash: h.hash });
  return {
    event: "audit.checkpoint",
    vault: vault.name,
    checkpoint: {
      id: c.id,
      at: c.at,
      key_id: c.keyId,
      heads: c.heads.filter((h) => h.vaultId === vault.id).map(view),
      signed_heads: [...c.heads].sort((a, b) => a.vaultId - b.vaultId).map(view),
      signature: c.signature,
    },
    public_key_url: `${publicUrl}/v1/audit/public-key`,
    console_url: `${publicUrl}/vaults/${encodeURIComponent(vault.name)}/logs`,
  };
}

/** The requester in a notification line: "agent ci-bot", "a `vault run` session of ann@…", "ann@…". */
function requesterShort(kind: RequesterKind, name: string): string {
  return `${kind === "agent" ? "agent " : kind === "session" ? "a `vault run` session of " : ""}${name}`;
}

/** The Slack incoming-webhook text: "agent ci-bot asks for api.stripe.com: <link>". */
export function describeEventText(e: BrokerEvent): string {
  if ("request_approval" in e) return describeRequestApprovalText(e);
  if ("budget" in e) {
    const b = e.budget;
    const held = b.soft_action === "approve" ? "; its requests now wait for a person's approval" : "";
    return `budget ${b.name} of vault ${e.vault} is past ${b.soft_percent}% of its limit this ${b.period === "none" ? "budget" : b.period}${held}: ${e.console_url}`;
  }
  if ("checkpoint" in e) {
    const head = e.checkpoint.heads[0];
    return `audit checkpoint ${e.checkpoint.id} of vault ${e.vault}: record ${head?.seq ?? "?"}, hash ${head?.hash ?? "?"}, signed by key ${e.checkpoint.key_id}`;
  }
  const p = e.proposal;
  const who = requesterShort(p.requested_by_kind, p.requested_by);
  const what = [...p.hosts, ...p.keys.map((k) => `credential ${k}`)].join(", ") || "changes";
  switch (e.event) {
    case "proposal.created":
      return `${who} asks for ${what} in vault ${e.vault}: ${e.approval_url ?? e.console_url}`;
    case "proposal.approved":
      return `proposal ${p.id} (${who}: ${what}) in vault ${e.vault} was approved by ${p.decided_by ?? "a person"}`;
    case "proposal.rejected":
      return `proposal ${p.id} (${who}: ${what}) in vault ${e.vault} was rejected by ${p.decided_by ?? "a person"}`;
    case "proposal.expired":
      return `proposal ${p.id} (${who}: ${what}) in vault ${e.vault} expired undecided`;
  }
}

function describeRequestApprovalText(e: RequestApprovalEvent): string {
  const r = e.request_approval;
  const who = requesterShort(r.requested_by_kind, r.requested_by);
  switch (e.event) {
    case "request_approval.created":
      return `${who} asks to send ${r.method} ${r.url} in vault ${e.vault}; approve or deny it: ${e.approval_url}`;
    case "request_approval.approved":
      return `${r.method} ${r.url} (${who}) in vault ${e.vault} was approved by ${r.decided_by ?? "a person"}`;
    case "request_approval.denied":
      return `${r.method} ${r.url} (${who}) in vault ${e.vault} was denied by ${r.decided_by ?? "a person"}`;
  }
}
