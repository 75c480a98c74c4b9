// (module index: describe this module)
export * from "./audit-log.ts";
export * from "./credential-ops.ts";
export * from "./proposals.ts";
export * from "./proposal-review.ts";
export * from "./services.ts";
export * from "./webhooks.ts";
export * from "./request-approvals.ts";
export { layoutJson, type JsonLayout } from "./json-layout.ts";
