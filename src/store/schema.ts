// The schema's history: every migration, in order, embedded in the binary. Applied by migrations.ts.
// The SQL is portable; the two spellings that differ between SQLite and PostgreSQL are written as {{id}}
// (auto-increment primary key) and {{bytes}} (binary); what cannot be portable sits in postgresOnly / sqliteOnly.

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /** Whole statements run only on PostgreSQL (function bodies hold semicolons, so they are not split). */
  readonly postgresOnly?: readonly string[];
  /** Whole statements run only on SQLite, after `sql` (e.g. a table rebuild where PostgreSQL alters in place). */
  readonly sqliteOnly?: readonly string[];
}

/** The channel on which PostgreSQL announces committed changes to every instance (see vault/changes.ts). */
export const CHANGES_CHANNEL = "broker_changes";

export const MIGRATIONS: readonly Migration[] = [
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
  {
    version: 8,
    name: "service-rules",
    sql: `
      -- An optional allow list of methods and paths for a service, as JSON (vault/services.ts validates it);
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
];
