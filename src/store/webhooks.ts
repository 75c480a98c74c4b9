// Webhook rows: a vault's proposal-notification receivers. The signing secret is stored sealed (nonce and
// ciphertext, opened only by workflows/webhooks.ts); the last_* columns record the newest delivery's outcome.

import type { Sql } from "./db.ts";

export type WebhookFormat = "json" | "slack";
export type WebhookStatus = "pending" | "delivered" | "retrying" | "failed" | "blocked";

export interface WebhookRow {
  id: number;
  vaultId: number;
  url: string;
  format: WebhookFormat;
  secretNonce: Uint8Array;
  secretCiphertext: Uint8Array; // SECRET (sealed): never log
  createdBy: number | null;
  createdAt: number;
  lastStatus: WebhookStatus | null;
  lastEvent: string | null;
  lastAttempts: number;
  lastError: string | null;
  lastAttemptAt: number | null;
}

export interface WebhookDelivery {
  readonly status: WebhookStatus;
  readonly event: string;
  readonly attempts: number;
  readonly error: string | null;
  readonly at: number;
}

const COLUMNS = `id, vault_id AS "vaultId", url, format, secret_nonce AS "secretNonce", secret_ciphertext AS "secretCiphertext",
  created_by AS "createdBy", created_at AS "createdAt", last_status AS "lastStatus", last_event AS "lastEvent",
  last_attempts AS "lastAttempts", last_error AS "lastError", last_attempt_at AS "lastAttemptAt"`;

export function webhookRepo(sql: Sql) {
  return {
    async create(w: Pick<WebhookRow, "vaultId" | "url" | "format" | "secretNonce" | "secretCiphertext" | "createdBy" | "createdAt">): Promise<WebhookRow> {
      const row = await sql.get<WebhookRow>(
        `INSERT INTO webhooks (vault_id, url, format, secret_nonce, secret_ciphertext, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
        [w.vaultId, w.url, w.format, w.secretNonce, w.secretCiphertext, w.createdBy, w.createdAt],
      );
      return normalise(row!);
    },
    async byId(id: number): Promise<WebhookRow | undefined> {
      const row = await sql.get<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE id = ?`, [id]);
      return row && normalise(row);
    },
    async list(vaultId: number): Promise<WebhookRow[]> {
      return (await sql.all<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE vault_id = ? ORDER BY id`, [vaultId])).map(normalise);
    },
    async count(vaultId: number): Promise<number> {
      const row = await sql.get<{ n: number }>("SELECT COUNT(*) AS n FROM webhooks WHERE vault_id = ?", [vaultId]);
      return Number(row?.n ?? 0);
    },
    /** Deletes a webhook of this vault; false when there was none. */
    async remove(vaultId: number, id: number): Promise<boolean> {
      return (await sql.run("DELETE FROM webhooks WHERE vault_id = ? AND id = ?", [vaultId, id])) === 1;
    },
    /** Records a delivery's outcome; false when the webhook was removed meanwhile. */
    async recordDelivery(id: number, d: WebhookDelivery): Promise<boolean> {
      return (
        (await sql.run("UPDATE webhooks SET last_status = ?, last_event = ?, last_attempts = ?, last_error = ?, last_attempt_at = ? WHERE id = ?", [
          d.status,
          d.event,
          d.attempts,
          d.error,
          d.at,
          id,
        ])) === 1
      );
    },
  };
}

function normalise(r: WebhookRow): WebhookRow {
  return {
    ...r,
    id: Number(r.id),
    vaultId: Number(r.vaultId),
    secretNonce: new Uint8Array(r.secretNonce),
    secretCiphertext: new Uint8Array(r.secretCiphertext),
    createdBy: r.createdBy === null ? null : Number(r.createdBy),
    createdAt: Number(r.createdAt),
    lastAttempts: Number(r.lastAttempts),
    lastAttemptAt: r.lastAttemptAt === null ? null : Number(r.lastAttemptAt),
  };
}
