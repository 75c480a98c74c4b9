// /v1/sessions: scoped sessions bound to one vault (minted by `broker vault run`), and what a session
// met at the transparent proxy (read by `vault run` to tell its agent about blind-tunnelled hosts).

import { Hono } from "hono";
import { InvalidRequest, NotFound } from "../../errors.ts";
import { buildProposalHint, type SessionActivityLog } from "../../egress/index.ts";
import type { Domain } from "../../identity/index.ts";
import { createScopedSession, listScopedSessions, revokeScopedSession } from "../../identity/index.ts";
import { PageAfterId, parseWith, ScopedSessionCreated, ScopedSessionInput, ScopedSessionList, SessionActivityAnswer, VaultName } from "../../contract/index.ts";
import { pageQueryDoc, readPageQuery, requirePrincipal, sessionClientOf } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { readInt } from "./logs.ts";

const tags = ["sessions"];

export function sessionRoutes(d: Domain, activity?: SessionActivityLog) {
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
    async (c) => c.json(await createScopedSession(d, c.get("principal"), c.req.valid("json"), c.req.header("x-vault"), sessionClientOf(c, "api")), 201),
  );
  r.get(
    "/",
    describe({
      summary: "List the vault's active scoped sessions",
      tags,
      auth: "bearer",
      who: "their minters; vault admins see all",
      query: { vault: "the vault's name (or X-Vault)", ...pageQueryDoc("after") },
      success: { status: 200, schema: ScopedSessionList },
    }),
    async (c) => {
      const vault = c.req.query("vault") ?? c.req.header("x-vault");
      if (!vault) throw new InvalidRequest("name the vault with ?vault=", "vault");
      // Refused as it always was, under the field `name` (a vault's name wherever it comes from).
      const name = parseWith(VaultName, vault, "name");
      return c.json(await listScopedSessions(d, c.get("principal"), name, c.req.header("x-vault"), readPageQuery(c, PageAfterId)));
    },
  );
  r.get(
    "/:id/activity",
    describe({
      summary: "What this session met at the transparent proxy: CONNECTs and hosts reached through a blind tunnel",
      tags,
      auth: "bearer",
      who: "the session itself",
      query: { after: "wait only while it lists no more than this many hosts", wait: "seconds to wait for a new host, 0 to 30 (default 0)" },
      success: { status: 200, schema: SessionActivityAnswer },
    }),
    async (c) => {
      const id = c.req.param("id");
      // Only the session reads what it did itself (`vault run` polls with the session's own token).
      if (c.get("principal").sessionPublicId !== id) throw new NotFound("no such session");
      const after = readInt(c.req.query("after"), "after") ?? 0;
      const wait = readInt(c.req.query("wait"), "wait", 30) ?? 0;
      const seen = (await activity?.read(id, { after, waitMs: wait * 1000, signal: c.req.raw.signal })) ?? { connects: 0, unmatched: [] };
      const unmatched_hosts = seen.unmatched.map((u) => ({
        host: u.name,
        first_at: new Date(u.at).toISOString(),
        proposal_hint: buildProposalHint(d.publicUrl, u.host, u.port),
      }));
      return c.json({ id, connects: seen.connects, unmatched_hosts });
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
