// Migrations 1-7: the tables the broker was built on (vaults, credentials, people, agents, sessions,
// services, the audit log, proposals, the root CA, identity-provider sign-in, change announcements).
// History: append nothing here; a new migration goes at the end of schema-additions.ts.

import type { Migration } from "./migration.ts";

export const FOUNDATION: readonly Migration[] = [
  {
    version: 1,
    name: "foundation",
    sql: `
      -- The data key: raw in passwordless mode, or wrapped by an Argon2id-derived key.
      CREATE TABLE keyring (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        mode TEXT NOT NULL CHECK (mode IN ('plain', 'password')),
        data_key {{bytes}},
        wrapped_key {{bytes}},
        wrap_nonce {{bytes}},
        kdf_salt {{bytes}},
        kdf_params TEXT,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        CHECK ((mode = 'plain' AND data_key IS NOT NULL AND wrapped_key IS NULL)
            OR (mode = 'password' AND data_key IS NULL AND wrapped_key IS NOT NULL
                AND wrap_nonce IS NOT NULL AND kdf_salt IS NOT NULL AND kdf_params IS NOT NULL))
      );

      CREATE TABLE users (
        id {{id}},
        email TEXT NOT NULL UNIQUE,
        password_hash {{bytes}} NOT NULL,
        password_salt {{bytes}} NOT NULL,
        password_params TEXT NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
        created_at BIGINT NOT NULL
      );

      CREATE TABLE vaults (
        id {{id}},
        name TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL
      );

      -- Ciphertext only; AES-GCM additional data binds each row to its vault id and key.
      CREATE TABLE credentials (
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        nonce {{bytes}} NOT NULL,
        ciphertext {{bytes}} NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (vault_id, key)
      );

      -- Every bearer token is kept as its SHA-256 only; public_id names a session without revealing it.
      CREATE TABLE sessions (
        id {{id}},
        public_id TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('user', 'scoped', 'agent')),
        user_id BIGINT REFERENCES users (id) ON DELETE CASCADE,
        vault_id BIGINT REFERENCES vaults (id) ON DELETE CASCADE,
        role TEXT,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        last_seen_at BIGINT NOT NULL,
        revoked_at BIGINT
      );
      CREATE INDEX sessions_user ON sessions (user_id);
      CREATE INDEX sessions_vault ON sessions (vault_id);
    `,
  },
  {
    version: 2,
    name: "identity",
    sql: `
      CREATE TABLE agents (
        id {{id}},
        name TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
        created_by BIGINT REFERENCES users (id) ON DELETE SET NULL,
        created_at BIGINT NOT NULL
      );

      -- Sessions minted by or for an agent end with it.
      ALTER TABLE sessions ADD COLUMN agent_id BIGINT REFERENCES agents (id) ON DELETE CASCADE;
      CREATE INDEX sessions_agent ON sessions (agent_id);

      ALTER TABLE vaults ADD COLUMN unmatched_hosts TEXT NOT NULL DEFAULT 'tunnel';

      CREATE TABLE vault_members (
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'proxy')),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (vault_id, user_id)
      );
      CREATE INDEX vault_members_user ON vault_members (user_id);

      CREATE TABLE agent_grants (
        agent_id BIGINT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'proxy')),
        created_at BIGINT NOT NULL,
        PRIMARY KEY (agent_id, vault_id)
      );
      CREATE INDEX agent_grants_vault ON agent_grants (vault_id);

      -- Agent invites (av_inv_) and vault invites for humans (av_uinv_); token kept as SHA-256 only.
      CREATE TABLE invites (
        id {{id}},
        public_id TEXT NOT NULL UNIQUE,
        token_hash TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('agent', 'vault')),
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'proxy')),
        email TEXT,
        agent_name TEXT,
        agent_token_ttl_ms BIGINT,
        created_by BIGINT REFERENCES users (id) ON DELETE CASCADE,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        used_at BIGINT
      );
      CREATE INDEX invites_vault ON invites (vault_id, kind);

      CREATE TABLE services (
        id {{id}},
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        host TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        auth_type TEXT NOT NULL CHECK (auth_type IN ('bearer', 'basic', 'header', 'passthrough')),
        auth_key TEXT,
        auth_header TEXT,
        auth_prefix TEXT,
        auth_username TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        UNIQUE (vault_id, host)
      );

      CREATE TABLE settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at BIGINT NOT NULL
      );
    `,
  },
  {
    version: 3,
    name: "audit",
    sql: `
      -- One row per proxied request. Never header values, bodies, query strings or tokens.
      -- No foreign key: the record outlives the vault it describes (retention prunes it).
      CREATE TABLE audit_logs (
        id {{id}},
        at BIGINT NOT NULL,
        principal TEXT NOT NULL,
        vault_id BIGINT NOT NULL,
        vault TEXT NOT NULL,
        ingress TEXT NOT NULL,
        method TEXT NOT NULL,
        host TEXT NOT NULL,
        path TEXT NOT NULL,
        service TEXT,
        credential_keys TEXT NOT NULL,
        status INTEGER NOT NULL,
        bytes_in BIGINT NOT NULL,
        bytes_out BIGINT NOT NULL,
        duration_ms INTEGER NOT NULL,
        error TEXT
      );
      CREATE INDEX audit_logs_vault ON audit_logs (vault_id, id);
      CREATE INDEX audit_logs_at ON audit_logs (at);
    `,
  },
  {
    version: 4,
    name: "proposals",
    sql: `
      -- Agent requests for access, approved (applied) or rejected by a human; pending ones expire after 7 days.
      -- services and credentials hold the validated request as JSON (never a credential value).
      CREATE TABLE proposals (
        id {{id}},
        vault_id BIGINT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
        status TEXT NOT NULL CHECK (status IN ('pending', 'applied', 'rejected', 'expired')),
        message TEXT NOT NULL,
        user_message TEXT NOT NULL,
        services TEXT NOT NULL,
        credentials TEXT NOT NULL,
        created_by TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        approval_token_hash TEXT NOT NULL UNIQUE,
        approval_expires_at BIGINT NOT NULL,
        decided_at BIGINT,
        decided_by BIGINT REFERENCES users (id) ON DELETE SET NULL
      );
      CREATE INDEX proposals_vault_status ON proposals (vault_id, status);
      CREATE INDEX proposals_pending_expiry ON proposals (status, expires_at);
    `,
  },
  {
    version: 5,
    name: "root-ca",
    sql: `
      -- The broker's root CA for TLS interception. The private key is sealed with the data key;
      -- the newest row is the active CA (rotation inserts a new one).
      CREATE TABLE ca_certs (
        id {{id}},
        cert_pem TEXT NOT NULL,
        key_nonce {{bytes}} NOT NULL,
        key_ciphertext {{bytes}} NOT NULL,
        created_at BIGINT NOT NULL,
        not_after BIGINT NOT NULL
      );
    `,
  },
  {
    version: 6,
    name: "oidc",
    sql: `
      -- Identity-provider accounts linked to users: one (issuer, subject) belongs to one user.
      CREATE TABLE user_identities (
        id {{id}},
        user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        issuer TEXT NOT NULL,
        subject TEXT NOT NULL,
        email TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        UNIQUE (issuer, subject)
      );
      CREATE INDEX user_identities_user ON user_identities (user_id);
      -- Pending sign-ins: only the SHA-256 of the state is kept; a row is deleted when read (single use).
      CREATE TABLE oidc_states (
        state_hash TEXT PRIMARY KEY,
        nonce TEXT NOT NULL,
        code_verifier TEXT NOT NULL,
        purpose TEXT NOT NULL CHECK (purpose IN ('login', 'link', 'cli')),
        user_id BIGINT REFERENCES users (id) ON DELETE CASCADE,
        return_to TEXT,
        cli_port INTEGER,
        cli_nonce TEXT,
        expires_at BIGINT NOT NULL
      );
      CREATE INDEX oidc_states_expiry ON oidc_states (expires_at);
      -- One-time codes handing a finished CLI sign-in to the loopback listener; hashed, single use.
      CREATE TABLE oidc_cli_codes (
        code_hash TEXT PRIMARY KEY,
        user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
        cli_nonce TEXT NOT NULL,
        expires_at BIGINT NOT NULL
      );
    `,
  },
  {
    version: 7,
    name: "change-notifications",
    // SQLite belongs to one instance and needs nothing. On PostgreSQL, triggers announce every committed
    // change that an instance may hold in memory, inside the writing transaction: a change cannot
    // commit unannounced, whichever instance (or tool) made it. Payloads carry ids and token hashes, never values.
    sql: "",
    postgresOnly: [
      `CREATE OR REPLACE FUNCTION broker_announce() RETURNS trigger LANGUAGE plpgsql AS $fn$
       DECLARE r jsonb;
       BEGIN
         IF TG_OP = 'DELETE' THEN r := to_jsonb(OLD); ELSE r := to_jsonb(NEW); END IF;
         PERFORM pg_notify('broker_changes', json_build_object('t', TG_ARGV[0], 'id', r ->> TG_ARGV[1])::text);
         RETURN NULL;
       END $fn$`,
      "CREATE TRIGGER vaults_announce AFTER UPDATE OR DELETE ON vaults FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'id')",
      "CREATE TRIGGER credentials_announce AFTER INSERT OR UPDATE OR DELETE ON credentials FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'vault_id')",
      "CREATE TRIGGER services_announce AFTER INSERT OR UPDATE OR DELETE ON services FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'vault_id')",
      "CREATE TRIGGER vault_members_announce AFTER INSERT OR UPDATE OR DELETE ON vault_members FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'vault_id')",
      "CREATE TRIGGER agent_grants_announce AFTER INSERT OR UPDATE OR DELETE ON agent_grants FOR EACH ROW EXECUTE FUNCTION broker_announce('vault', 'vault_id')",
      // Only what ends or changes a session, not the last-seen touches.
      "CREATE TRIGGER sessions_announce AFTER UPDATE OF revoked_at, expires_at, role OR DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION broker_announce('session', 'token_hash')",
      "CREATE TRIGGER users_announce AFTER UPDATE OR DELETE ON users FOR EACH ROW EXECUTE FUNCTION broker_announce('principal', 'id')",
      "CREATE TRIGGER agents_announce AFTER UPDATE OR DELETE ON agents FOR EACH ROW EXECUTE FUNCTION broker_announce('principal', 'id')",
      "CREATE TRIGGER ca_certs_announce AFTER INSERT OR UPDATE OR DELETE ON ca_certs FOR EACH ROW EXECUTE FUNCTION broker_announce('ca', 'id')",
      "CREATE TRIGGER settings_announce AFTER INSERT OR UPDATE OR DELETE ON settings FOR EACH ROW EXECUTE FUNCTION broker_announce('settings', 'name')",
    ],
  },
];
