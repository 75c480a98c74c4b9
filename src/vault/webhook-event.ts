// What a proposal event is (the JSON a webhook receiver gets) and who delivers it: names, hosts and
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
    readonly requested_by_kind: "agent" | "user" | "unknown";
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

/** Delivers events to a vault's webhooks off the request path (egress/webhook-delivery.ts). */
export interface WebhookNotifier {
  notify(vaultId: number, event: ProposalEvent): void;
}
