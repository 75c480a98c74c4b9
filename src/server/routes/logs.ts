// GET /v1/vaults/:vault/logs: the vault's audit records, newest first, with filters and an id
// cursor (`before`), or oldest first after an id (`after`, for following).

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../vault/index.ts";
import { iso } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { openVaultFor } from "../request.ts";

function readInt(v: string | undefined, field: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined || v === "") return undefined;
  if (!/^\d+$/.test(v) || Number(v) > max) throw new InvalidRequest(`${field} must be a non-negative integer`, field);
  return Number(v);
}

export function logRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/logs", requirePrincipal(d));
  r.get("/:vault/logs", async (c) => {
    const open = await openVaultFor(d, c, "read_logs");
    const limit = readInt(c.req.query("limit"), "limit", 1000) ?? 100;
    const rows = await d.store.audit.list({
      vaultId: open.vault.id,
      before: readInt(c.req.query("before"), "before"),
      after: readInt(c.req.query("after"), "after"),
      host: c.req.query("host") || undefined,
      status: readInt(c.req.query("status"), "status", 999),
      principal: c.req.query("principal") || undefined,
      limit,
    });
    const logs = rows.map((r) => ({
      id: r.id,
      time: iso(r.at),
      principal: r.principal,
      ingress: r.ingress,
      method: r.method,
      host: r.host,
      path: r.path,
      service: r.service,
      credential_keys: r.credentialKeys ? r.credentialKeys.split(",") : [],
      status: r.status,
      bytes_in: r.bytesIn,
      bytes_out: r.bytesOut,
      duration_ms: r.durationMs,
      error: r.error,
    }));
    const last = rows.at(-1);
    return c.json({ logs, next_cursor: rows.length === limit && last ? String(last.id) : null });
  });
  return r;
}
