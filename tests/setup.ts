// Loaded before every test file (bunfig.toml): the request-body schemas are checked against the domain
// on every request the tests make (a schema refusing a body the handler accepts fails the request).
process.env.BROKER_SCHEMA_CHECK ??= "strict";
