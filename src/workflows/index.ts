// What people and agents do in a vault: credentials, services, proposals and their review, held
// requests and their approval, webhook settings, the audit log's queries, connected accounts, vaults kept as code.

export * from "./audit-log.ts";
export * from "./audit-export.ts";
export * from "./audit-checkpoints.ts";
export * from "./credential-ops.ts";
export * from "./proposals.ts";
export * from "./proposal-review.ts";
export * from "./services.ts";
export * from "./webhooks.ts";
export * from "./budgets.ts";
export * from "./request-approvals.ts";
export * from "./vault-summary.ts";
export { layoutJson, type JsonLayout } from "./json-layout.ts";
export * from "./connect.ts";
export * from "./connect-complete.ts";
export {
  CONNECT_CALLBACK_PATH,
  CONNECT_STATE_TTL_MS,
  connectConfigured,
  connectWarnings,
  operatorClient,
  type CodeRedemption,
  type ConnectDeps,
  type ConnectKeys,
  type OperatorClient,
  type Redeemed,
} from "./connect-plan.ts";
export * from "./secret-stores.ts";
export * from "./budget-gate.ts";
export * from "./llm-prices.ts";
export { exportVaults, type ExportedFile, type FileWebhook, type VaultCodeFile, type VaultCodeSpec } from "./vault-file.ts";
export { applyVaultFile } from "./vault-apply.ts";
export type { ApplyResult, PendingForPerson, PlannedChange, VaultPlan } from "./vault-plan.ts";
