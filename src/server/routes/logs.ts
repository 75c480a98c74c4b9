// GET /v1/vaults/:vault/logs: the vault's audit records, newest first, with filters and an id
// cursor (`before`), or oldest first after an id (`after`, for following). Each record names who
// made the request (`principal_name`) besides its stable id (`principal`).

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import { AUDIT_PAGE_MAX, listAuditLog } from "../../workflows/index.ts";
import { AuditPageAnswer } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { openVaultFor } from "../kit/index.ts";

export function readInt(v: string | undefined, field: string, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (v === undefined || v === "") return undefined;
  if (!/^\d+$/.test(v) || Number(v) > max) throw new InvalidRequest(`${field} must be a non-negative integer`, field);
  return Number(v);
}

/** A yes/no query parameter: `true` or `false` (absent or empty: false). */
export function readFlag(v: string | undefined, field: string): boolean {
  if (v === undefined || v === "" || v === "false") return false;
  if (v === "true") return true;
  throw new InvalidRequest(`${field} must be true or false`, field);
}

export function logRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/logs", requirePrincipal(d));
  r.get(
    "/:vault/logs",
    describe({
      summary: "The vault's audit log: one record per proxied request, newest first",
      tags: ["audit"],
      auth: "bearer",
      who: "admins and members (agents with those roles too)",
      query: {
        limit: "1 to 1000 (default 100)",
        before: "records older than this id (the next_cursor)",
        after: "records newer than this id, oldest first (following)",
        host: "only this host",
        status: "only this HTTP status",
        principal: "an id (agent:3), an agent's name or a person's email",
        would_refuse: "true: only requests report mode let through (error beginning would_refuse:)",
      },
      success: { status: 200, schema: AuditPageAnswer },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read_logs");
      const page = await listAuditLog(d, open, {
        before: readInt(c.req.query("before"), "before"),
        after: readInt(c.req.query("after"), "after"),
        host: c.req.query("host") || undefined,
        status: readInt(c.req.query("status"), "status", 999),
        principal: c.req.query("principal") || undefined,
        wouldRefuse: readFlag(c.req.query("would_refuse"), "would_refuse"),
        limit: readInt(c.req.query("limit"), "limit", AUDIT_PAGE_MAX) ?? 100,
      });
      return c.json(page);
    },
  );
  return r;
}
