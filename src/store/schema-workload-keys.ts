// Migration 31: workload identity's second half (issue 39): an issuer's keys given as a document, an issuer that
// requires a `jti`, and the workload named in each session and audit record.

import type { Migration } from "./migration.ts";

export const WORKLOAD_KEYS_MIGRATIONS: readonly Migration[] = [
  {
    version: 31,
    name: "workload-keys-and-audit",
    // docs/architecture.md D27. `workload_issuers.jwks`: the issuer's public keys as a JWKS document (for an issuer
    // the broker cannot reach), instead of `jwks_url` or discovery; `require_jti`: 1 refuses tokens without a `jti`.
    // A session exchanged for a platform token keeps the token's `iss` beside its `sub`, and every audit record made on
    // it names both (covered by the hash chain's v3 encoding, docs/audit-chain.md), so the log says which workload
    // asked, not only which binding's agent.
    sql: `
      ALTER TABLE workload_issuers ADD COLUMN jwks TEXT;
      ALTER TABLE workload_issuers ADD COLUMN require_jti INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE sessions ADD COLUMN workload_issuer TEXT;
      ALTER TABLE audit_logs ADD COLUMN workload_issuer TEXT;
      ALTER TABLE audit_logs ADD COLUMN workload_subject TEXT;
    `,
  },
];
