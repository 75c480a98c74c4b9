// Migration 30: workload identity (issue 39 points 1–3): issuers whose JWTs the broker trusts, the bindings that map
// a token's claims to a vault and a role, and the token ids already exchanged (replay refusal).

import type { Migration } from "./migration.ts";

export const WORKLOAD_MIGRATIONS: readonly Migration[] = [
  {
    version: 30,
    name: "workload-identity",
    // docs/architecture.md D27. An issuer's `jwks_url` is null when its keys are found by OIDC discovery from
    // `issuer`; `audiences` is a JSON list. A binding's `conditions` is a JSON object from claim path to a pattern or
    // a list of them; its `agent_id` is the agent that stands for the workloads it admits (made with the binding; revoking it stops them),
    // so audit records and the Agents page name them. `workload_jtis` holds each exchanged token's `jti` until the
    // token expires. `sessions.workload_subject`: the token's `sub` for a session minted by an exchange.
    sql: `
      CREATE TABLE workload_issuers (
        id {{id}},
        name TEXT NOT NULL UNIQUE,
        issuer TEXT NOT NULL,
        jwks_url TEXT,
        audiences TEXT NOT NULL,
        clock_skew_seconds INTEGER NOT NULL,
        created_at BIGINT NOT NULL
      );
      CREATE TABLE workload_bindings (
        id {{id}},
        issuer_id BIGINT NOT NULL REFERENCES workload_issuers (id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        conditions TEXT NOT NULL,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        max_session_seconds INTEGER NOT NULL,
        agent_id BIGINT REFERENCES agents (id) ON DELETE SET NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (issuer_id, name)
      );
      CREATE TABLE workload_jtis (
        issuer_id BIGINT NOT NULL REFERENCES workload_issuers (id) ON DELETE CASCADE,
        jti TEXT NOT NULL,
        expires_at BIGINT NOT NULL,
        PRIMARY KEY (issuer_id, jti)
      );
      CREATE INDEX workload_jtis_expiry ON workload_jtis (expires_at);
      ALTER TABLE sessions ADD COLUMN workload_subject TEXT;
    `,
    // Instances cache an issuer's keys by its JWKS address, never its row; a change to issuers or bindings is still
    // announced (as a settings change: instance-wide configuration) so any cache of them stays honest.
    postgresOnly: [
      "CREATE TRIGGER workload_issuers_announce AFTER INSERT OR UPDATE OR DELETE ON workload_issuers FOR EACH ROW EXECUTE FUNCTION broker_announce('settings', 'name')",
      "CREATE TRIGGER workload_bindings_announce AFTER INSERT OR UPDATE OR DELETE ON workload_bindings FOR EACH ROW EXECUTE FUNCTION broker_announce('settings', 'name')",
    ],
  },
];
