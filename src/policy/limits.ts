// Token lifetimes and counts from the contract, in one place.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

export const LIMITS = {
  userSessionAbsoluteMs: 365 * DAY,
  userSessionIdleMs: 30 * DAY,
  /** How stale the stored last-seen time may get before a request writes it (idle refresh without a write per request). */
  lastSeenWriteIntervalMs: 10 * MINUTE,
  scopedSessionMinMs: 5 * MINUTE,
  scopedSessionMaxMs: 7 * DAY,
  scopedSessionDefaultMs: 24 * HOUR,
  agentInviteTtlMs: 15 * MINUTE,
  vaultInviteTtlMs: 48 * HOUR,
  approvalTokenTtlMs: 24 * HOUR,
  pendingAgentInvitesPerVault: 10,
  pendingVaultInvitesPerVault: 50,
  activeSessionsPerAgent: 10,
  /** Sessions live at once for one workload binding's agent (issue 39: every job of a pipeline exchanges its own token). */
  activeSessionsPerWorkload: 1000,
  pendingProposalsPerVault: 20,
  servicesPerProposal: 10,
  credentialsPerProposal: 10,
  credentialValueMaxBytes: 65_536,
  credentialKeyMaxLength: 128,
  /** How long a held request's approval stays valid, decided or not. */
  requestApprovalTtlMs: 15 * MINUTE,
  /** Held requests awaiting a human at once per vault: agents cannot bury the people who approve. */
  pendingRequestApprovalsPerVault: 200,
  /** …and per agent (or person), so one agent cannot take every place in its vault from the others. */
  pendingRequestApprovalsPerPrincipal: 50,
  /** A held request's body is read whole (to hash and show it): larger ones are refused. */
  heldRequestBodyMaxBytes: 1_048_576,
  /** What of a held request's body the approval page shows. */
  heldRequestPreviewBytes: 65_536,
  /** The longest `Prefer: wait` honoured per request (the same approval is found again by a retry). */
  requestApprovalWaitMaxMs: 120_000,
  /**
   * Held requests one agent (or person) may keep waiting with `Prefer: wait` at once, per instance:
   * each holds a connection and a place under the broker's in-flight ceiling, which people deciding
   * need too. Beyond it the 428 comes at once (the agent polls instead).
   */
  requestApprovalWaitsPerPrincipal: 4,
  /** A page of a list that can grow (services, agents, sessions, proposals, held requests) when the query names no limit… */
  listPageDefault: 100,
  /** …and the most a query may ask for: each page is one bounded, indexed read. */
  listPageMax: 500,
} as const;

export const NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
