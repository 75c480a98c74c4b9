// A proposal's changes in words, for the person deciding it: each proposed host against what the
// vault has today (new or changed, how the credential would be sent, the rules asked for beside
// today's, and what they would add), and the warnings above it all. The approval page and the
// console's proposals read the same words from here, so one proposal reads alike in both.

import { widening, type Rules } from "../policy/index.ts";
import { type AuthShape, describeAuth } from "./auth.ts";
import { describeRules, describeRulesInWords, EVERYTHING } from "./rules.ts";

/** How a proposed service's rules compare with today's: "new" when the vault has no service for the host. */
export type RulesChangeKind = "new" | "wider" | "narrower" | "same";

export interface ProposalChange {
  /** The host's badge: "new host" or "changes a current service". */
  readonly status: string;
  /** How the credential would be sent (describeAuth). */
  readonly auth: string;
  readonly rules: {
    readonly kind: RulesChangeKind;
    /** What the vault allows on the host today, when it has a service for it. */
    readonly now?: string;
    /** The label of `asked`: "After approval" for a pending change of a current service, else "Asked for". */
    readonly askedLabel: string;
    /** The rules asked for, in words. */
    readonly asked: string;
    /** Said after `asked`, set apart: "(unchanged)", "(narrower than now)", "on this host". */
    readonly note?: string;
    /** For a pending proposal that would allow more than today: "wider than now". */
    readonly wider?: string;
    /** And what it adds: "Adds DELETE on /repos/**." or that the rules would be removed. */
    readonly added?: string;
  };
}

/**
 * One proposed service in words, against the vault's service for the same host today (`current`,
 * undefined when there is none). `pending`: the proposal is still to be decided, so the change
 * against today is said; a decided one shows what was asked.
 */
export function describeProposalChange(
  proposed: { readonly auth: AuthShape; readonly rules?: Rules },
  current: { readonly rules?: Rules } | undefined,
  pending: boolean,
): ProposalChange {
  const asked = proposed.rules;
  const added = current ? widening(current.rules, asked) : undefined;
  const kind: RulesChangeKind = !current ? "new" : added ? "wider" : widening(asked, current.rules) ? "narrower" : "same";
  const note =
    !current && !asked ? "on this host" : !pending ? undefined : kind === "same" ? "(unchanged)" : kind === "narrower" ? "(narrower than now)" : undefined;
  return {
    status: current ? "changes a current service" : "new host",
    auth: describeAuth(proposed.auth),
    rules: {
      kind,
      ...(current && { now: describeRulesInWords(current.rules) }),
      askedLabel: pending && current ? "After approval" : "Asked for",
      asked: describeRulesInWords(asked),
      ...(note && { note }),
      ...(pending &&
        added && {
          wider: "wider than now",
          added: added === "everything" ? `The rules would be removed: ${EVERYTHING} allowed.` : `Adds ${describeRules(added)}.`,
        }),
    },
  };
}

/** The approver's warning when a proposal sends a stored credential where it does not go today. */
export function newHostWarning(key: string, host: string): string {
  return `This proposal sends your existing credential ${key} to a new host, ${host}.`;
}

/** The approver's warning when a proposal puts other keys on a host the vault serves today. */
export function replacedServiceWarning(host: string): string {
  return `This proposal replaces the existing service for ${host}.`;
}

/** The approver's warning when a proposal drops a service's rules (`now`, today's). */
export function rulesRemovedWarning(host: string, now: Rules): string {
  return `This proposal removes the rules of ${host}: ${EVERYTHING} would be allowed (today: ${describeRules(now)}).`;
}
