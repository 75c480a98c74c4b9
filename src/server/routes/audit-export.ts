// A vault's audit hash chain for readers outside the broker (docs/audit-chain.md): GET /v1/vaults/:vault/audit/export,
// its chained records page by page in seq order with the anchor and head (what `broker audit export` and `broker
// audit verify` read), and GET /v1/vaults/:vault/audit/verify, the broker's own verification of it (the console's
// "verified up to"). Whoever may read the vault's logs may read these.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { AUDIT_EXPORT_PAGE_DEFAULT, AUDIT_EXPORT_PAGE_MAX, exportAuditChain, verifyAuditChainOf } from "../../workflows/index.ts";
import { AuditExportAnswer, AuditVerifyAnswer } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import { openVaultFor, requirePrincipal, type ApiEnv } from "../kit/index.ts";
import { readInt } from "./logs.ts";

/** Mounted at /v1/vaults, beside the logs. */
export function auditExportRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/audit/export", requirePrincipal(d));
  r.use("/:vault/audit/verify", requirePrincipal(d));
  r.get(
    "/:vault/audit/export",
    describe({
      summary: "The vault's audit hash chain: its chained records in seq order, with the anchor and head",
      tags: ["audit"],
      auth: "bearer",
      who: "admins and members (agents with those roles too)",
      query: {
        after_seq: "records with a higher seq (the next_after_seq)",
        limit: `1 to ${AUDIT_EXPORT_PAGE_MAX} (default ${AUDIT_EXPORT_PAGE_DEFAULT})`,
      },
      success: { status: 200, schema: AuditExportAnswer },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read_logs");
      const page = await exportAuditChain(d, open, {
        afterSeq: readInt(c.req.query("after_seq"), "after_seq"),
        limit: readInt(c.req.query("limit"), "limit", AUDIT_EXPORT_PAGE_MAX) ?? AUDIT_EXPORT_PAGE_DEFAULT,
      });
      return c.json(page);
    },
  );
  r.get(
    "/:vault/audit/verify",
    describe({
      summary: "The broker's verification of the vault's audit hash chain and checkpoints",
      tags: ["audit"],
      auth: "bearer",
      who: "admins and members (agents with those roles too)",
      success: { status: 200, schema: AuditVerifyAnswer },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read_logs");
      return c.json(await verifyAuditChainOf(d, open));
    },
  );
  return r;
}
