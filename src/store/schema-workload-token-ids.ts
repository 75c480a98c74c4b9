// Migration 33: the token ids already exchanged (replay refusal, issue 39) are kept per issuer URL (`iss`), not per
// issuer row.

import type { Migration } from "./migration.ts";

export const WORKLOAD_TOKEN_ID_MIGRATIONS: readonly Migration[] = [
  {
    version: 33,
    name: "workload-token-ids-by-iss",
    // docs/architecture.md D27. A `jti` is unique within the `iss` that issued it, and a token stays valid whatever
    // the owner does with the rows trusting that `iss`: kept per row (migration 30's workload_jtis, deleted with its
    // row), removing and re-adding an issuer, or moving its `iss` to another row with PUT, forgot every token already
    // exchanged and let each be exchanged again until it expired. Kept per `iss` now, with no tie to a row: entries
    // go when their token expires, never with an issuer. The ids claimed so far are carried over (the latest expiry of
    // one id claimed under two rows of one `iss`).
    sql: `
      CREATE TABLE workload_token_ids (
        issuer TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (issuer, jti)
      );
      INSERT INTO workload_token_ids (issuer, jti, expires_at)
        SELECT i.issuer, j.jti, MAX(j.expires_at) FROM workload_jtis j JOIN workload_issuers i ON i.id = j.issuer_id GROUP BY i.issuer, j.jti;
      DROP TABLE workload_jtis;
      CREATE INDEX workload_token_ids_expiry ON workload_token_ids (expires_at);
    `,
  },
];
