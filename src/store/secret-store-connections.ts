// Secret store connections (issue 36): how the broker reads one external store. The address and other
// non-secret settings are JSON; the auth's secret fields are sealed (opened only by workflows and the
// connection registry); an owner's connection (vault_id null) is used by the vaults it is shared with, a
// vault's own connection by that vault only.

import type { Sql } from "./db.ts";
import { fail, isTextList, parseStoredJson } from "./stored-json.ts";

export type SecretStoreKind = "vault" | "aws" | "google" | "azure";

/**
 * A connection's non-secret settings as stored (and shown): the fields of the API's body but the auth's
 * secrets. The secrets (a token, a role id and secret id, access keys, a service-account key, a client
 * secret) are a separate JSON object of text fields, sealed.
 */
export type SecretStoreSettings =
  | {
      readonly kind: "vault";
      readonly address: string;
      readonly namespace?: string;
      readonly mount?: string;
      readonly ca_pem?: string;
      readonly auth:
        | { readonly method: "token" }
        | { readonly method: "approle"; readonly mount?: string }
        | { readonly method: "jwt" | "kubernetes"; readonly role: string; readonly token_file: string; readonly mount?: string };
    }
  | {
      readonly kind: "aws";
      readonly region: string;
      readonly endpoint?: string;
      readonly sts_endpoint?: string;
      readonly auth: { readonly method: "keys" } | { readonly method: "environment" };
    }
  | {
      readonly kind: "google";
      readonly project: string;
      readonly endpoint?: string;
      readonly auth: { readonly method: "service_account_key"; readonly client_email: string };
    }
  | {
      readonly kind: "azure";
      readonly vault_url: string;
      readonly authority?: string;
      readonly auth: { readonly method: "client_credentials"; readonly tenant: string; readonly client_id: string };
    };

export interface SecretStoreConnectionRow {
  id: number;
  name: string;
  kind: SecretStoreKind;
  /** The vault that owns it, or null for the owner's. */
  vaultId: number | null;
  /** JSON text of the kind's non-secret settings (checked by the domain before it was written). */
  settings: string;
  secretsNonce: Uint8Array;
  secretsCiphertext: Uint8Array; // SECRET (sealed): never log
  refreshSeconds: number;
  graceSeconds: number;
  createdBy: number | null;
  createdAt: number;
  updatedAt: number;
}

/** A vault's share of an owner's connection: references only to paths starting with one of the prefixes (null: any). */
export interface SecretStoreShare {
  readonly connectionId: number;
  readonly vaultId: number;
  readonly pathPrefixes: readonly string[] | null;
}

export type NewSecretStoreConnection = Omit<SecretStoreConnectionRow, "id" | "updatedAt">;
export type SecretStoreConnectionChange = Pick<SecretStoreConnectionRow, "settings" | "secretsNonce" | "secretsCiphertext" | "refreshSeconds" | "graceSeconds">;

const COLUMNS = `id, name, kind, vault_id AS "vaultId", settings, secrets_nonce AS "secretsNonce", secrets_ciphertext AS "secretsCiphertext",
  refresh_seconds AS "refreshSeconds", grace_seconds AS "graceSeconds", created_by AS "createdBy", created_at AS "createdAt", updated_at AS "updatedAt"`;

export function secretStoreRepo(sql: Sql) {
  return {
    async create(c: NewSecretStoreConnection): Promise<SecretStoreConnectionRow> {
      const row = await sql.get<SecretStoreConnectionRow>(
        `INSERT INTO secret_store_connections (name, kind, vault_id, settings, secrets_nonce, secrets_ciphertext, refresh_seconds, grace_seconds, created_by, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [c.name, c.kind, c.vaultId, c.settings, c.secretsNonce, c.secretsCiphertext, c.refreshSeconds, c.graceSeconds, c.createdBy, c.createdAt, c.createdAt],
      );
      return normalise(row!);
    },
    async byName(name: string): Promise<SecretStoreConnectionRow | undefined> {
      const row = await sql.get<SecretStoreConnectionRow>(`SELECT ${COLUMNS} FROM secret_store_connections WHERE name = ?`, [name]);
      return row && normalise(row);
    },
    /** Every connection, by name (there are few: an operator's stores). */
    async list(): Promise<SecretStoreConnectionRow[]> {
      return (await sql.all<SecretStoreConnectionRow>(`SELECT ${COLUMNS} FROM secret_store_connections ORDER BY name`)).map(normalise);
    },
    async update(id: number, c: SecretStoreConnectionChange, now: number): Promise<void> {
      await sql.run(
        `UPDATE secret_store_connections SET settings = ?, secrets_nonce = ?, secrets_ciphertext = ?, refresh_seconds = ?, grace_seconds = ?, updated_at = ? WHERE id = ?`,
        [c.settings, c.secretsNonce, c.secretsCiphertext, c.refreshSeconds, c.graceSeconds, now, id],
      );
    },
    async remove(id: number): Promise<boolean> {
      return (await sql.run("DELETE FROM secret_store_connections WHERE id = ?", [id])) === 1;
    },
    /** Every (connection, vault) share, for the registry and the views. */
    async shares(): Promise<SecretStoreShare[]> {
      const rows = await sql.all<{ connectionId: number; vaultId: number; pathPrefixes: string | null }>(
        `SELECT connection_id AS "connectionId", vault_id AS "vaultId", path_prefixes AS "pathPrefixes" FROM secret_store_shares ORDER BY connection_id, vault_id`,
      );
      return rows.map((r) => ({
        connectionId: Number(r.connectionId),
        vaultId: Number(r.vaultId),
        pathPrefixes:
          r.pathPrefixes === null ? null : parseStoredJson("secret_store_shares", Number(r.connectionId), "path_prefixes", r.pathPrefixes, assertPrefixes),
      }));
    },
    /** Shares (or shares again, replacing the prefixes) a connection with a vault. */
    async share(connectionId: number, vaultId: number, pathPrefixes: readonly string[] | null, now: number): Promise<void> {
      await sql.run(
        `INSERT INTO secret_store_shares (connection_id, vault_id, path_prefixes, created_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (connection_id, vault_id) DO UPDATE SET path_prefixes = excluded.path_prefixes`,
        [connectionId, vaultId, pathPrefixes === null ? null : JSON.stringify(pathPrefixes), now],
      );
    },
    async unshare(connectionId: number, vaultId: number): Promise<boolean> {
      return (await sql.run("DELETE FROM secret_store_shares WHERE connection_id = ? AND vault_id = ?", [connectionId, vaultId])) === 1;
    },
  };
}

export type SecretStoreRepo = ReturnType<typeof secretStoreRepo>;

function normalise(r: SecretStoreConnectionRow): SecretStoreConnectionRow {
  return {
    ...r,
    id: Number(r.id),
    vaultId: r.vaultId === null ? null : Number(r.vaultId),
    secretsNonce: new Uint8Array(r.secretsNonce),
    secretsCiphertext: new Uint8Array(r.secretsCiphertext),
    refreshSeconds: Number(r.refreshSeconds),
    graceSeconds: Number(r.graceSeconds),
    createdBy: r.createdBy === null ? null : Number(r.createdBy),
    createdAt: Number(r.createdAt),
    updatedAt: Number(r.updatedAt),
  };
}

function assertPrefixes(v: unknown, at: string): asserts v is string[] {
  if (!isTextList(v)) fail(at, "must be a list of texts");
}
