// Service rows: which hosts a vault serves and how the credential is injected.

import type { Sql } from "./db.ts";
import type { PolicyMode } from "./policy-modes.ts";
import { fail, isTextList, parseStoredJson } from "./stored-json.ts";

/** Static types inject a stored value; the minted ones (issue 18) make or sign a credential from stored ones. */
export type AuthType = "bearer" | "basic" | "header" | "passthrough" | "query" | "path" | MintedAuthType;
export type MintedAuthType = "oauth2_client_credentials" | "oauth2_refresh" | "aws_sigv4" | "github_app";

export interface ServiceRow {
  vaultId: number;
  host: string;
  description: string;
  authType: AuthType;
  authKey: string | null;
  authHeader: string | null;
  authPrefix: string | null;
  authUsername: string | null;
  /** 'query': the query parameter that carries the value. */
  authParam: string | null;
  /** 'path': where the value goes, e.g. /bot{value}, placed before the agent's path. */
  authTemplate: string | null;
  /** Minted types: their fields as JSON (credential key names and plain settings, never a value). */
  authConfig: string | null;
  enabled: boolean;
  /** JSON list of {methods, paths}, or null for no rules (everything allowed). */
  rules: string | null;
  /** The catalogue template the service was made from, or null (a custom service). */
  template: string | null;
  /** The template's operations chosen ("read", "write", …), or null; read from a JSON list. */
  operations: readonly string[] | null;
  /**
   * The service's own rules mode (migration 28), or null: its vault's policy mode. Set apart (policy-modes.ts), so a
   * put (a proposal applied, an edit) keeps it; absent in rows built to be put.
   */
  rulesMode?: PolicyMode | null;
  updatedAt: number;
}

/** Columns added after the first release: a put without them stores NULL. */
type OptionalColumns = "rules" | "authParam" | "authTemplate" | "authConfig" | "template" | "operations" | "rulesMode";

const COLUMNS = `vault_id AS "vaultId", host, description, auth_type AS "authType", auth_key AS "authKey", auth_header AS "authHeader",
  auth_prefix AS "authPrefix", auth_username AS "authUsername", auth_param AS "authParam", auth_template AS "authTemplate", auth_config AS "authConfig", enabled, rules, template, operations, rules_mode AS "rulesMode", updated_at AS "updatedAt"`;

/** How a service sends (no description, rules or template): the columns of ServiceWithCredential. */
const SENDING_COLUMNS = `vault_id AS "vaultId", host, auth_type AS "authType", auth_key AS "authKey", auth_header AS "authHeader",
  auth_prefix AS "authPrefix", auth_username AS "authUsername", auth_param AS "authParam", auth_template AS "authTemplate", auth_config AS "authConfig"`;

export function serviceRepo(sql: Sql) {
  /**
   * Every service of the vault, unbounded: for readers that must see the whole vault (the plan, /discover,
   * where a credential's value goes today). A list shown to a person or an API client is read by page().
   */
  const allOfVault = async (vaultId: number): Promise<ServiceRow[]> =>
    (await sql.all<ServiceRow>(`SELECT ${COLUMNS} FROM services WHERE vault_id = ? ORDER BY host`, [vaultId])).map(normalise);
  return {
    allOfVault,
    /** @deprecated allOfVault (the same rows): kept while work in progress elsewhere (index.ts's OFF_LOOP_READS) still names it. */
    list: allOfVault,
    /**
     * The vault's services in host order after `after` ("" for the first page): a range of the
     * UNIQUE (vault_id, host) index, stopped at LIMIT. Every host is longer than "", so one statement
     * serves the first page and the next ones.
     */
    async page(vaultId: number, after: string, limit: number): Promise<ServiceRow[]> {
      const rows = await sql.all<ServiceRow>(`SELECT ${COLUMNS} FROM services WHERE vault_id = ? AND host > ? ORDER BY host LIMIT ?`, [vaultId, after, limit]);
      return rows.map(normalise);
    },
    /**
     * Every vault's services, for the echo needles every answer is scanned for. Read once per
     * change, not per request.
     */
    async all(): Promise<ServiceRow[]> {
      return (await sql.all<ServiceRow>(`SELECT ${COLUMNS} FROM services ORDER BY vault_id, host`, [])).map(normalise);
    },
    async get(vaultId: number, host: string): Promise<ServiceRow | undefined> {
      const row = await sql.get<ServiceRow>(`SELECT ${COLUMNS} FROM services WHERE vault_id = ? AND host = ?`, [vaultId, host]);
      return row && normalise(row);
    },
    /** Inserts or replaces the service for (vault, host). */
    async put(s: Omit<ServiceRow, "updatedAt" | OptionalColumns> & Partial<Pick<ServiceRow, OptionalColumns>>, now: number): Promise<void> {
      await sql.run(
        `INSERT INTO services (vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, auth_param, auth_template, auth_config, enabled, rules, template, operations, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (vault_id, host) DO UPDATE SET description = excluded.description, auth_type = excluded.auth_type, auth_key = excluded.auth_key,
           auth_header = excluded.auth_header, auth_prefix = excluded.auth_prefix, auth_username = excluded.auth_username,
           auth_param = excluded.auth_param, auth_template = excluded.auth_template, auth_config = excluded.auth_config,
           enabled = excluded.enabled, rules = excluded.rules, template = excluded.template, operations = excluded.operations, updated_at = excluded.updated_at`,
        [
          s.vaultId,
          s.host,
          s.description,
          s.authType,
          s.authKey,
          s.authHeader,
          s.authPrefix,
          s.authUsername,
          s.authParam ?? null,
          s.authTemplate ?? null,
          s.authConfig ?? null,
          s.enabled ? 1 : 0,
          s.rules ?? null,
          s.template ?? null,
          s.operations ? JSON.stringify(s.operations) : null,
          now,
          now,
        ],
      );
    },
    async remove(vaultId: number, host: string): Promise<boolean> {
      return (await sql.run("DELETE FROM services WHERE vault_id = ? AND host = ?", [vaultId, host])) === 1;
    },
    /**
     * The services stored under `exact` or `wildcard`: a request's host as stored and the one-level
     * `*.parent` form (policy's coveringPatternTexts). Two points of the UNIQUE (vault_id, host) index,
     * whatever the vault's size: the egress plan's one read per host (egress/plan.ts).
     */
    async forHost(vaultId: number, exact: string, wildcard: string | undefined): Promise<ServiceRow[]> {
      const rows = await sql.all<ServiceRow>(`SELECT ${COLUMNS} FROM services WHERE vault_id = ? AND host IN (?, ?)`, [vaultId, exact, wildcard ?? exact]);
      return rows.map(normalise);
    },
    /**
     * A page of the vault's services in host order after `after` ("" first): how each sends, with the
     * sealed credential its auth_key names (null: none stored), in one statement; what only people read
     * (description, rules, template) is left out. What the echo needles read of a vault
     * (egress/stored-values.ts), never the whole vault at once.
     */
    async pageWithCredentials(vaultId: number, after: string, limit: number): Promise<ServiceWithCredential[]> {
      const rows = await sql.all<ServiceWithCredential>(
        `SELECT ${SENDING_COLUMNS}, c.sealed_nonce AS "credentialNonce", c.sealed_ciphertext AS "credentialCiphertext", c.sealed_reference AS "credentialReference" FROM services
         LEFT JOIN (SELECT vault_id AS sealed_vault, key AS sealed_key, nonce AS sealed_nonce, ciphertext AS sealed_ciphertext, reference AS sealed_reference FROM credentials) c
           ON c.sealed_vault = services.vault_id AND c.sealed_key = services.auth_key
         WHERE vault_id = ? AND host > ? ORDER BY host LIMIT ?`,
        [vaultId, after, limit],
      );
      for (const r of rows) {
        r.vaultId = Number(r.vaultId);
        if (r.credentialNonce !== null) r.credentialNonce = new Uint8Array(r.credentialNonce);
        if (r.credentialCiphertext !== null) r.credentialCiphertext = new Uint8Array(r.credentialCiphertext);
      }
      return rows;
    },
    /**
     * The vaults that have a service: where a read of every vault's services starts. Each step asks
     * the index for the next vault id (a skip scan), so the cost follows the vaults, not the services.
     */
    async vaultIds(): Promise<number[]> {
      const rows = await sql.all<{ vaultId: number }>(
        `WITH RECURSIVE v (id) AS (
           SELECT MIN(vault_id) FROM services
           UNION ALL
           SELECT (SELECT MIN(vault_id) FROM services WHERE vault_id > v.id) FROM v WHERE v.id IS NOT NULL
         )
         SELECT id AS "vaultId" FROM v WHERE id IS NOT NULL`,
        [],
      );
      return rows.map((r) => Number(r.vaultId));
    },
  };
}

export type ServiceRepo = ReturnType<typeof serviceRepo>;

/** How a service sends, with the sealed credential its auth_key names (ciphertext only: no crypto in the store). */
export interface ServiceWithCredential
  extends Pick<
    ServiceRow,
    "vaultId" | "host" | "authType" | "authKey" | "authHeader" | "authPrefix" | "authUsername" | "authParam" | "authTemplate" | "authConfig"
  > {
  credentialNonce: Uint8Array | null;
  credentialCiphertext: Uint8Array | null;
  /** The credential's reference as stored (JSON text), when it is one. */
  credentialReference: string | null;
}

function normalise(r: ServiceRow): ServiceRow {
  const raw = r as unknown as { operations: unknown; vaultId: unknown };
  const operations = raw.operations === null ? null : parseStoredJson("services", Number(raw.vaultId), "operations", raw.operations, assertOperations);
  const rulesMode = r.rulesMode === "report" || r.rulesMode === "enforce" ? r.rulesMode : null;
  return { ...r, vaultId: Number(r.vaultId), enabled: Boolean(Number(r.enabled)), updatedAt: Number(r.updatedAt), operations, rulesMode };
}

function assertOperations(v: unknown, at: string): asserts v is string[] {
  if (!isTextList(v)) fail(at, "must be a list of operation names");
}
