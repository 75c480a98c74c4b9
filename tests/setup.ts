// Loaded before every test file (bunfig.toml): every success answer the tests get is checked against the
// schema its route documents (server/openapi/describe.ts), so a response that drifts from the contract fails.
process.env.BROKER_SCHEMA_CHECK ??= "strict";
