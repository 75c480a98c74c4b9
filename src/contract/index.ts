// (module index: describe this module)
export { fieldPath, issueError, parseWith } from "./schema-input.ts";
export * from "./schemas.ts";
