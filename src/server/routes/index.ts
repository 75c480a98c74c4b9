// The JSON API's routes and the approval pages' routes, one file per resource; the app mounts them.

export { caRoutes } from "./ca.ts";
export { agentRoutes } from "./agents.ts";
export { inviteRedemptionRoutes } from "./agents.ts";
export { authRoutes } from "./auth.ts";
export { identityRoutes } from "./oidc.tsx";
export { oidcRoutes } from "./oidc.tsx";
export { ownerRoutes } from "./owner.ts";
export { proxyRoutes } from "./proxy.ts";
export { discoverRoutes } from "./proposals.ts";
export { proposalRoutes } from "./proposals.ts";
export { requestApprovalRoutes } from "./request-approvals.ts";
export { approveRoutes } from "./approve.tsx";
export { assetRoutes } from "./approve.tsx";
export { heldApprovalRoutes } from "./approve-held.tsx";
export { logRoutes } from "./logs.ts";
export { auditExportRoutes } from "./audit-export.ts";
export { auditCheckpointRoutes, auditKeyRoutes } from "./audit-checkpoints.ts";
export { metricsRoutes } from "./metrics.ts";
export { sessionRoutes } from "./sessions.ts";
export { vaultInviteRoutes } from "./vault-invites.ts";
export { vaultRoutes } from "./vaults.ts";
export { webhookRoutes } from "./webhooks.ts";
export { budgetRoutes } from "./budgets.ts";
export { templateRoutes, viewTemplate } from "./templates.ts";
export { readInt } from "./logs.ts";
export { secretStoreRoutes } from "./secret-stores.ts";
export { vaultCodeRoutes } from "./vault-code.ts";
