// /v1/sessions: scoped sessions bound to one vault (minted by `broker vault run`).

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import { createScopedSession, listScopedSessions, revokeScopedSession } from "../../identity/index.ts";
import { parseWith, ScopedSessionCreated, ScopedSessionInput, ScopedSessionList, VaultName } from "../../contract/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

const tags = ["sessions"];

export function sessionRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.post(
    "/",
    describe({
      summary: "Mint a scoped session bound to one vault",
      tags,
      auth: "bearer",
      who: "user sessions and agent tokens, not scoped sessions",
      success: { status: 201, schema: ScopedSessionCreated },
      errors: [409],
    }),
    jsonBody(ScopedSessionInput),
    async (c) => c.json(await createScopedSession(d, c.get("principal"), c.req.valid("json"), c.req.header("x-vault")), 201),
  );
  r.get(
    "/",
    describe({
      summary: "List the vault's active scoped sessions",
      tags,
      auth: "bearer",
      who: "their minters; vault admins see all",
      query: { vault: "the vault's name (or X-Vault)" },
      success: { status: 200, schema: ScopedSessionList },
    }),
    async (c) => {
      const vault = c.req.query("vault") ?? c.req.header("x-vault");
      if (!vault) throw new InvalidRequest("name the vault with ?vault=", "vault");
      // Refused as it always was, under the field `name` (a vault's name wherever it comes from).
      const name = parseWith(VaultName, vault, "name");
      return c.json({ sessions: await listScopedSessions(d, c.get("principal"), name, c.req.header("x-vault")) });
    },
  );
  r.delete(
    "/:id",
    describe({ summary: "Revoke a scoped session", tags, auth: "bearer", who: "its minter, a vault admin, or the session itself", success: { status: 204 } }),
    async (c) => {
      await revokeScopedSession(d, c.get("principal"), c.req.param("id"));
      return c.body(null, 204);
    },
  );
  return r;
}
