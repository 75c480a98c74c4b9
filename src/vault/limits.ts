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
  pendingProposalsPerVault: 20,
  servicesPerProposal: 10,
  credentialsPerProposal: 10,
  credentialValueMaxBytes: 65_536,
  credentialKeyMaxLength: 128,
} as const;

export const NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
