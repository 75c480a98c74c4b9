// What a proposal, held-request or audit checkpoint event is (the JSON a webhook receiver gets) and who
// delivers it: names, hosts, key names and hashes only, never a credential value. Types only, so the domain
// context can name the notifier.

import type { ProposalRow } from "../store/index.ts";

export type ProposalEventType = "proposal.created" | "proposal.approved" | "proposal.rejected" | "proposal.expired";

/** What a receiver gets (format "json"): names, hosts and key names only. */
export interface ProposalEvent {
  readonly event: ProposalEventType;
  readonly vault: string;
  readonly proposal: {
    readonly id: number;
    readonly status: ProposalRow["status"];
    readonly requested_by: string;
    /** "session": a `broker vault run` session of requested_by. */
    readonly requested_by_kind: "agent" | "user" | "session" | "unknown";
    /** The agent's note to the human approving. */
    readonly message: string;
    readonly user_message: string;
    readonly hosts: readonly string[];
    readonly keys: readonly string[];
    readonly created_at: string;
    readonly expires_at: string;
    readonly decided_at: string | null;
    readonly decided_by: string | null;
  };
  /** The read-only approval link (created events only: the broker keeps no copy of the token). */
  readonly approval_url: string | null;
  /** The vault's proposals page in the console. */
  readonly console_url: string;
}

export type RequestApprovalEventType = "request_approval.created" | "request_approval.approved" | "request_approval.denied";

/** A request held for a human's approval (rules with "approve": "each"): what will be sent, never a credential or the body. */
export interface RequestApprovalEvent {
  readonly event: RequestApprovalEventType;
  readonly vault: string;
  readonly request_approval: {
    readonly id: string;
    readonly state: string;
    readonly requested_by: string;
    /** "session": a `broker vault run` session of requested_by. */
    readonly requested_by_kind: "agent" | "user" | "session" | "unknown";
    readonly method: string;
    /** Scheme, host and path; the query is left out (it may carry data the receiver should not get). */
    readonly url: string;
    readonly service: string;
    readonly body_bytes: number;
    readonly created_at: string;
    readonly expires_at: string;
    readonly decided_by: string | null;
  };
  /** Where a person signed in to the console sees the whole request and decides. */
  readonly approval_url: string;
  readonly console_url: string;
}

/** One vault's head as a checkpoint signs it (docs/audit-chain.md). */
export interface CheckpointHeadView {
  readonly vault_id: number;
  readonly seq: number;
  readonly hash: string;
}

/**
 * A signed checkpoint of the audit chains (docs/audit-chain.md), sent to the JSON webhooks of each vault it
 * covers: that vault's head, and every head the signature covers so a receiver can check it with the public
 * key. Hashes and numbers only.
 */
export interface AuditCheckpointEvent {
  readonly event: "audit.checkpoint";
  readonly vault: string;
  readonly checkpoint: {
    readonly id: number;
    /** Milliseconds since the epoch, as signed. */
    readonly at: number;
    readonly key_id: string;
    /** This vault's head only. */
    readonly heads: readonly CheckpointHeadView[];
    /** Every head the signature covers, sorted by vault id. */
    readonly signed_heads: readonly CheckpointHeadView[];
    /** base64url Ed25519 signature of the checkpoint message. */
    readonly signature: string;
  };
  /** GET /v1/audit/public-key: the key that verifies the signature. */
  readonly public_key_url: string;
  /** The vault's logs page in the console. */
  readonly console_url: string;
}

/**
 * A budget crossed its soft threshold this period (issue 38), sent once per budget and period: what it limits, what
 * it used, and whether requests are now held for a person. Counts and money only.
 */
export interface BudgetEvent {
  readonly event: "budget.soft_threshold";
  readonly vault: string;
  readonly budget: {
    readonly name: string;
    readonly scope: string;
    readonly period: string;
    readonly currency: string;
    readonly soft_percent: number | null;
    /** "approve": the vault's next requests that count against it wait for a person (428). */
    readonly soft_action: string;
    readonly limits: Readonly<Record<string, number | null>>;
    readonly used: Readonly<Record<string, number | null>>;
    readonly resets_at: string | null;
  };
  /** The vault's settings page in the console, where its budgets are. */
  readonly console_url: string;
}

export type BrokerEvent = ProposalEvent | RequestApprovalEvent | AuditCheckpointEvent | BudgetEvent;

/** Delivers events to a vault's webhooks off the request path (webhooks/webhook-delivery.ts). */
export interface WebhookNotifier {
  notify(vaultId: number, event: BrokerEvent): void;
}
