// /v1/sessions: scoped sessions bound to one vault (minted by `broker vault run`).

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../vault/index.ts";
import { createScopedSession, listScopedSessions, revokeScopedSession } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { readJson } from "../request.ts";

export function sessionRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.post("/", async (c) => c.json(await createScopedSession(d, c.get("principal"), await readJson(c), c.req.header("x-vault")), 201));
  r.get("/", async (c) => {
    const vault = c.req.query("vault") ?? c.req.header("x-vault");
    if (!vault) throw new InvalidRequest("name the vault with ?vault=", "vault");
    return c.json({ sessions: await listScopedSessions(d, c.get("principal"), vault, c.req.header("x-vault")) });
  });
  r.delete("/:id", async (c) => {
    await revokeScopedSession(d, c.get("principal"), c.req.param("id"));
    return c.body(null, 204);
  });
  return r;
}
