// The request and response bodies of the HTTP API, one zod schema each (grouped by concern). The
// routes validate with them and the OpenAPI document (server/openapi/) describes the API by them.

export * from "./sessions.ts";
export * from "./proposals.ts";
export * from "./vaults.ts";
export * from "./services.ts";
export * from "./templates.ts";
export * from "./accounts.ts";
export * from "./pages.ts";
export * from "./secret-stores.ts";
export * from "./audit-checkpoints.ts";
export * from "./audit.ts";
export * from "./budgets.ts";
export * from "./llm-prices.ts";
export * from "./vault-file.ts";
export * from "./workload.ts";
