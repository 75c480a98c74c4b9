// The HTTP API's request and response contract: one zod schema per body. The server validates with
// them, the OpenAPI document describes the API by them, and the CLI reads answers by them.

export { fieldPath, issueError, parsedBy, parseWith, says } from "../schema-input.ts";
export * from "./schemas.ts";
