// Migrations 8 to 22: what the second round added (service rules, URL credentials, webhooks, minted credentials,
// contained sessions, held requests, session clients, list indexes, secret store connections). Later migrations
// live with their concern (schema-audit-chain.ts, schema-budgets.ts, schema-audit-usage.ts); store/schema.ts lists
// them all in order.

import type { Migration } from "./migration.ts";

export const ADDITIONS: readonly Migration[] = [
  {
    version: 8,
    name: "service-rules",
    sql: `
      -- An optional allow list of methods and paths for a service, as JSON (workflows/services.ts validates it);
      -- NULL allows every method and path.
      ALTER TABLE services ADD COLUMN rules TEXT;
    `,
  },
  {
    version: 9,
    name: "url-credentials",
    // Credentials that travel in the URL: 'query' (auth_param names the query parameter) and 'path'
    // (auth_template, e.g. /bot{value}, is placed before the agent's path). Widening auth_type's CHECK
    // needs a table rebuild on SQLite (nothing references services, so no foreign key is involved);
    // PostgreSQL swaps the constraint in place and keeps migration 7's services_announce trigger.
    sql: `
      ALTER TABLE services ADD COLUMN auth_param TEXT;
      ALTER TABLE services ADD COLUMN auth_template TEXT;
    `,
    sqliteOnly: [
      `CREATE TABLE services_v9 (
        id INTEGER PRIMARY KEY,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        host TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        auth_type TEXT NOT NULL CHECK (auth_type IN ('bearer', 'basic', 'header', 'passthrough', 'query', 'path')),
        auth_key TEXT,
        auth_header TEXT,
        auth_prefix TEXT,
        auth_username TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        rules TEXT,
        auth_param TEXT,
        auth_template TEXT,
        UNIQUE (vault_id, host)
      )`,
      `INSERT INTO services_v9 (id, vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, enabled, created_at, updated_at, rules, auth_param, auth_template)
       SELECT id, vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, enabled, created_at, updated_at, rules, auth_param, auth_template FROM services`,
      "DROP TABLE services",
      "ALTER TABLE services_v9 RENAME TO services",
    ],
    postgresOnly: [
      `ALTER TABLE services DROP CONSTRAINT services_auth_type_check,
         ADD CONSTRAINT services_auth_type_check CHECK (auth_type IN ('bearer', 'basic', 'header', 'passthrough', 'query', 'path'))`,
    ],
  },
  {
    version: 10,
    name: "webhooks",
    sql: `
      -- Proposal notifications: a vault's webhook receivers. The signing secret is sealed with the data key
      -- (additional data: vault id and URL), since the broker must sign with it; it is shown once, at creation.
      -- last_* is the newest delivery's outcome, for the list (never a payload or a response body).
      CREATE TABLE webhooks (
        id {{id}},
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        url TEXT NOT NULL,
        format TEXT NOT NULL CHECK (format IN ('json', 'slack')),
        secret_nonce {{bytes}} NOT NULL,
        secret_ciphertext {{bytes}} NOT NULL,
        created_by BIGINT,
        created_at BIGINT NOT NULL,
        last_status TEXT CHECK (last_status IN ('pending', 'delivered', 'retrying', 'failed', 'blocked')),
        last_event TEXT,
        last_attempts INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        last_attempt_at BIGINT,
        UNIQUE (vault_id, url)
      );
    `,
  },
  {
    version: 11,
    name: "minted-credentials",
    // Credentials the broker mints or signs (OAuth 2.0 tokens, AWS SigV4, GitHub App tokens): their
    // settings and credential key names as JSON in auth_config. Widening auth_type's CHECK rebuilds the
    // table on SQLite, as migration 9 did; PostgreSQL swaps the constraint in place.
    sql: `
      ALTER TABLE services ADD COLUMN auth_config TEXT;
    `,
    sqliteOnly: [
      `CREATE TABLE services_v11 (
        id INTEGER PRIMARY KEY,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        host TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        auth_type TEXT NOT NULL CHECK (auth_type IN ('bearer', 'basic', 'header', 'passthrough', 'query', 'path',
          'oauth2_client_credentials', 'oauth2_refresh', 'aws_sigv4', 'github_app')),
        auth_key TEXT,
        auth_header TEXT,
        auth_prefix TEXT,
        auth_username TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        rules TEXT,
        auth_param TEXT,
        auth_template TEXT,
        auth_config TEXT,
        UNIQUE (vault_id, host)
      )`,
      `INSERT INTO services_v11 (id, vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, enabled, created_at, updated_at, rules, auth_param, auth_template, auth_config)
       SELECT id, vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, enabled, created_at, updated_at, rules, auth_param, auth_template, auth_config FROM services`,
      "DROP TABLE services",
      "ALTER TABLE services_v11 RENAME TO services",
    ],
    postgresOnly: [
      `ALTER TABLE services DROP CONSTRAINT services_auth_type_check,
         ADD CONSTRAINT services_auth_type_check CHECK (auth_type IN ('bearer', 'basic', 'header', 'passthrough', 'query', 'path',
           'oauth2_client_credentials', 'oauth2_refresh', 'aws_sigv4', 'github_app'))`,
    ],
  },
  {
    version: 12,
    name: "contained-sessions",
    // Sessions minted by `vault run --contain` say so, and so does every audit record made on one.
    sql: `
      ALTER TABLE sessions ADD COLUMN contained INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE audit_logs ADD COLUMN contained INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 13,
    name: "request-approvals",
    // Requests held for a human's approval (rules with "approve": "each"), and who approved each
    // request the audit log records. The row keeps a description and a fingerprint, never a credential.
    sql: `
      CREATE TABLE request_approvals (
        id {{id}},
        public_id TEXT NOT NULL UNIQUE,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        principal TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'used', 'expired')),
        method TEXT NOT NULL,
        host TEXT NOT NULL,
        target TEXT NOT NULL,
        service TEXT NOT NULL,
        headers TEXT NOT NULL,
        body_preview TEXT,
        body_bytes BIGINT NOT NULL,
        body_sha256 TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        decided_at BIGINT,
        decided_by BIGINT,
        used_at BIGINT
      );
      CREATE INDEX request_approvals_request ON request_approvals (vault_id, principal, fingerprint, id);
      CREATE UNIQUE INDEX request_approvals_one_pending ON request_approvals (vault_id, principal, fingerprint) WHERE state = 'pending';
      CREATE INDEX request_approvals_vault ON request_approvals (vault_id, state, id);
      CREATE INDEX request_approvals_expiry ON request_approvals (expires_at);
      ALTER TABLE audit_logs ADD COLUMN approved_by TEXT;
    `,
  },
  {
    version: 14,
    name: "request-approvals-sealed",
    // A held request's full URL, headers and body preview are sealed with the data key (additional
    // data: vault id and public id), as the audit log keeps no query, header value or body in the
    // clear; target keeps the path alone, for webhooks. Rows from before stay readable as they are.
    // via_session: sent by a `vault run` session of the principal (shown as such, not as the person).
    sql: `
      ALTER TABLE request_approvals ADD COLUMN sealed_nonce {{bytes}};
      ALTER TABLE request_approvals ADD COLUMN sealed_description {{bytes}};
      ALTER TABLE request_approvals ADD COLUMN via_session INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 15,
    name: "proposals-via-session",
    // A proposal filed by a `vault run` session is shown as that session's, not as the person's own.
    sql: `
      ALTER TABLE proposals ADD COLUMN via_session INTEGER NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 16,
    name: "services-from-templates",
    // A service made from a catalogue template records which one and the operations chosen (a JSON
    // list of names), so it is described as "GitHub, read only" and a later catalogue can be compared.
    sql: `
      ALTER TABLE services ADD COLUMN template TEXT;
      ALTER TABLE services ADD COLUMN operations TEXT;
    `,
  },
  {
    version: 17,
    name: "connect-states",
    // Connecting an account at a template's provider (OAuth authorization code with PKCE): the flow a
    // person started, bound to their session, the vault, the template and the operations chosen. Only the
    // SHA-256 of the state is kept; a row is deleted when read (single use) and lives 10 minutes.
    sql: `
      CREATE TABLE connect_states (
        state_hash TEXT PRIMARY KEY,
        code_verifier TEXT NOT NULL,
        user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        session_public_id TEXT NOT NULL,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        template TEXT NOT NULL,
        operations TEXT NOT NULL,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX connect_states_expiry ON connect_states (expires_at);
    `,
  },
  {
    version: 18,
    name: "session-clients",
    // Where a session came from, for its owner's list: how it was made (a page's form, the JSON API, an
    // identity provider in the browser or for the CLI), the creating client's User-Agent (cut short) and
    // address. Never a token or a header other than User-Agent. NULL in rows from before.
    sql: `
      ALTER TABLE sessions ADD COLUMN channel TEXT;
      ALTER TABLE sessions ADD COLUMN client_agent TEXT;
      ALTER TABLE sessions ADD COLUMN client_address TEXT;
    `,
  },
  {
    version: 19,
    name: "audit-filter-indexes",
    // Every filter of the vault's log (GET /v1/vaults/:vault/logs, the console's Logs page, `broker
    // logs`) is one index range scan: vault, the filtered column, then the id cursor, read in id order
    // (newest first or, following, oldest first) and stopped at the page's LIMIT. Without them a
    // filter that matches few rows read the vault's whole log.
    sql: `
      CREATE INDEX audit_logs_vault_host ON audit_logs (vault_id, host, id);
      CREATE INDEX audit_logs_vault_status ON audit_logs (vault_id, status, id);
      CREATE INDEX audit_logs_vault_principal ON audit_logs (vault_id, principal, id);
    `,
  },
  {
    version: 20,
    name: "audit-journal-marks",
    // Each instance writes every audit record to a journal file in its data directory before the
    // database (egress/audit-journal.ts); the last journal sequence number written to audit_logs is
    // kept here, in the same transaction as the records, so replaying the journal after a crash or an
    // outage writes exactly the records that are missing, never one twice.
    sql: `
      CREATE TABLE audit_journal_marks (
        journal TEXT PRIMARY KEY,
        seq BIGINT NOT NULL
      );
    `,
  },
  {
    version: 21,
    name: "list-page-indexes",
    // Every list that can grow is read a page at a time (issue 35): a range of an index that starts with
    // what the list is of (a user, a vault, an agent, a status or principal) and ends in the id the page
    // is ordered and cut by, stopped at the page's LIMIT. SQLite's indexes end in the rowid already;
    // PostgreSQL's need the id spelled out, or each page sorted everything the list is of. The
    // single-column indexes they replace are their prefixes.
    sql: `
      CREATE INDEX sessions_user_id ON sessions (user_id, id);
      CREATE INDEX sessions_vault_id ON sessions (vault_id, id);
      CREATE INDEX sessions_agent_id ON sessions (agent_id, id);
      DROP INDEX sessions_user;
      DROP INDEX sessions_vault;
      DROP INDEX sessions_agent;
      CREATE INDEX proposals_vault_id ON proposals (vault_id, id);
      CREATE INDEX proposals_vault_status_id ON proposals (vault_id, status, id);
      DROP INDEX proposals_vault_status;
      CREATE INDEX request_approvals_vault_id ON request_approvals (vault_id, id);
      CREATE INDEX request_approvals_vault_principal ON request_approvals (vault_id, principal, id);
    `,
  },
  {
    version: 22,
    name: "secret-store-connections",
    // External secret stores (issue 36): a connection's address and non-secret settings as JSON, its auth's
    // secret fields sealed with the data key (additional data: the connection's name), and the vaults an
    // owner's connection is shared with (each share may be narrowed to paths starting with given prefixes,
    // JSON; null: every path the connection's sign-in can read). A vault's own connection (vault_id set) is used by that vault only.
    // A credential may hold a reference (JSON of its parts) instead of a value: its nonce and ciphertext
    // are then empty, so anything that tried to open it as a value fails closed.
    sql: `
      CREATE TABLE secret_store_connections (
        id {{id}},
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('vault', 'aws', 'google', 'azure')),
        vault_id BIGINT REFERENCES vaults (id) ON DELETE CASCADE,
        settings TEXT NOT NULL,
        secrets_nonce {{bytes}} NOT NULL,
        secrets_ciphertext {{bytes}} NOT NULL,
        refresh_seconds INTEGER NOT NULL,
        grace_seconds INTEGER NOT NULL,
        created_by BIGINT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
      );
      CREATE INDEX secret_store_connections_vault ON secret_store_connections (vault_id);
      CREATE TABLE secret_store_shares (
        connection_id BIGINT NOT NULL REFERENCES secret_store_connections (id) ON DELETE CASCADE,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        path_prefixes TEXT,
        created_at BIGINT NOT NULL,
        PRIMARY KEY (connection_id, vault_id)
      );
      CREATE INDEX secret_store_shares_vault ON secret_store_shares (vault_id);
      ALTER TABLE credentials ADD COLUMN reference TEXT;
      ALTER TABLE audit_logs ADD COLUMN credential_refs TEXT;
    `,
    postgresOnly: [
      "CREATE TRIGGER secret_store_connections_announce AFTER INSERT OR UPDATE OR DELETE ON secret_store_connections FOR EACH ROW EXECUTE FUNCTION broker_announce('secret_store', 'id')",
      "CREATE TRIGGER secret_store_shares_announce AFTER INSERT OR UPDATE OR DELETE ON secret_store_shares FOR EACH ROW EXECUTE FUNCTION broker_announce('secret_store', 'connection_id')",
    ],
  },
];
