// Who is asking and what they may do: users, sessions, agents, invites, scoped `vault run` sessions,
// OpenID Connect sign-in, vaults and their roles, instance settings, and the Domain context every
// domain operation takes.

export { createAuthenticator, liveUserSession, type Authenticator, type SessionClient } from "./sessions.ts";
export type { Domain, ReferenceStatus, SecretStoreRuntime } from "./context.ts";
export type { Principal, VaultRole, InstanceRole } from "./principal.ts";
export { createVaultAccessCache, type VaultAccessCache } from "./vault-access.ts";
export * from "./agents.ts";
export { checkPageLimit, cutPage, type Page } from "./page.ts";
export * from "./invites.ts";
export * from "./principal.ts";
export * from "./scoped.ts";
export * from "./settings.ts";
export * from "./users.ts";
export * from "./vaults.ts";
export { requesterPrefix, type RequesterKind } from "./principal-name.ts";
export * from "./oidc.ts";
export { createOidcClient, createTrustingFetch, OidcDiscoveryError, type OidcClaims, type OidcClient, type OidcClientOptions } from "./oidc-client.ts";
export { nameRequester } from "./principal-name.ts";
export { type AuditCheckpointEvent, type BrokerEvent, type BudgetEvent, type CheckpointHeadView } from "./webhook-event.ts";
export { type ProposalEventType } from "./webhook-event.ts";
export { type RequestApprovalEvent } from "./webhook-event.ts";
export { type RequestApprovalEventType } from "./webhook-event.ts";
export { type ProposalEvent } from "./webhook-event.ts";
export { type WebhookNotifier } from "./webhook-event.ts";
export { admitCached, admitToVault } from "./admission.ts";
export * from "./workload.ts";
export { listWorkloadsSeen, type WorkloadSeen } from "./workload-seen.ts";
export { createWorkloadKeys, WORKLOAD_ALGORITHMS, type WorkloadKeys, type WorkloadKeysOptions } from "./workload-token.ts";
