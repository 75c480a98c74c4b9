// Vaults as code (issue 39): GET /v1/export writes the vaults a person administers as a file (never a value, a
// token or a signing secret), POST /v1/apply makes a file true in one transaction and answers with the plan in
// words; `?dry_run=true` answers the same plan and changes nothing.

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import { ApplyAnswer, VaultFile, VaultName, parseWith } from "../../contract/index.ts";
import type { Domain } from "../../identity/index.ts";
import { applyVaultFile, exportVaults } from "../../workflows/index.ts";
import { jsonBody, requirePrincipal, type ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

const tags = ["vaults"];
const who = "people who administer the vaults the file names (any person may create one it names that does not exist); never agents or scoped sessions";

function dryRun(v: string | undefined): boolean {
  if (v === undefined || v === "" || v === "false") return false;
  if (v === "true") return true;
  throw new InvalidRequest("dry_run must be true or false", "dry_run");
}

export function vaultCodeRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/export", requirePrincipal(d));
  r.use("/apply", requirePrincipal(d));
  r.get(
    "/export",
    describe({
      summary: "The vaults you administer as a vault file (keys and references, never values; receiver URLs masked)",
      tags,
      auth: "bearer",
      who: "human admins of the vaults; never agents or scoped sessions",
      query: { vault: "one vault (absent: every vault you administer)" },
      success: { status: 200, schema: VaultFile },
    }),
    async (c) => {
      const vault = c.req.query("vault");
      return c.json(await exportVaults(d, c.get("principal"), vault === undefined ? undefined : parseWith(VaultName, vault, "vault")));
    },
  );
  r.post(
    "/apply",
    describe({
      summary: "Make a vault file true in one transaction; the answer is the plan in words (dry_run=true: nothing changes)",
      tags,
      auth: "bearer",
      who,
      query: { dry_run: "true: answer the plan and change nothing" },
      success: { status: 200, schema: ApplyAnswer },
      errors: [409],
    }),
    jsonBody(VaultFile),
    async (c) => {
      const result = await applyVaultFile(d, c.get("principal"), c.req.valid("json"), { dryRun: dryRun(c.req.query("dry_run")) });
      // reveal: the signing secret of each webhook this apply added, shown once to the person who applied it
      return c.json({ ...result, webhook_secrets: result.webhook_secrets.map((w) => ({ ...w, secret: w.secret.reveal() })) });
    },
  );
  return r;
}
