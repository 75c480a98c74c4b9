// What a proposal or held-request event is (the JSON a webhook receiver gets) and who delivers it: names, hosts and
// key names only, never a credential value. Types only, so the domain context can name the notifier.

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

export type BrokerEvent = ProposalEvent | RequestApprovalEvent;

/** Delivers events to a vault's webhooks off the request path (webhooks/webhook-delivery.ts). */
export interface WebhookNotifier {
  notify(vaultId: number, event: BrokerEvent): void;
}
