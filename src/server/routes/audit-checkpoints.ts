// The audit log's signed checkpoints (docs/audit-chain.md): GET /v1/audit/public-key, the Ed25519 public key
// that verifies them (no authentication: it is public, and a verifier needs it before anything else), and
// GET /v1/vaults/:vault/audit/checkpoints, the vault's checkpoints oldest first (readers of the vault's logs).

import { Hono } from "hono";
import type { AuditPublicKey } from "../../crypto/index.ts";
import type { Domain } from "../../identity/index.ts";
import { auditPublicKey, CHECKPOINT_PAGE_MAX, listAuditCheckpoints } from "../../workflows/index.ts";
import { AuditCheckpointPage, AuditPublicKeyAnswer } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import { openVaultFor, requirePrincipal, type ApiEnv } from "../kit/index.ts";
import { readInt } from "./logs.ts";

/** GET /v1/audit/public-key, mounted at /v1/audit. `key`: the key this instance loaded at start (absent: as stored). */
export function auditKeyRoutes(d: Domain, key?: AuditPublicKey) {
  const r = new Hono<ApiEnv>();
  r.get(
    "/public-key",
    describe({
      summary: "The Ed25519 public key that verifies the audit log's checkpoints",
      tags: ["audit"],
      auth: "none",
      success: { status: 200, schema: AuditPublicKeyAnswer },
    }),
    async (c) => c.json(await auditPublicKey(d, key), 200, { "cache-control": "no-cache" }),
  );
  return r;
}

/** GET /v1/vaults/:vault/audit/checkpoints, mounted at /v1/vaults. */
export function auditCheckpointRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/audit/checkpoints", requirePrincipal(d));
  r.get(
    "/:vault/audit/checkpoints",
    describe({
      summary: "The vault's signed audit checkpoints, oldest first",
      tags: ["audit"],
      auth: "bearer",
      who: "admins and members (agents with those roles too)",
      query: {
        after_id: "checkpoints with a higher id (the next_after_id)",
        limit: `1 to ${CHECKPOINT_PAGE_MAX} (default 100)`,
      },
      success: { status: 200, schema: AuditCheckpointPage },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read_logs");
      return c.json(
        await listAuditCheckpoints(d, open, {
          afterId: readInt(c.req.query("after_id"), "after_id"),
          limit: readInt(c.req.query("limit"), "limit", CHECKPOINT_PAGE_MAX) ?? 100,
        }),
      );
    },
  );
  return r;
}
