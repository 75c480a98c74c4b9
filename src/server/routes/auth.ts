// /v1/auth: registration, login, logout, whoami, change-password, session listing and revocation.
// Password checks (login, change-password) pass the client address to the domain's login throttle.

import { Hono } from "hono";
import type { Domain } from "../../vault/index.ts";
import { changePassword, iso, listOwnSessions, loginUser, logout, publicUser, readCredentials, registerUser, revokeOwnSession } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { clientIp } from "../limits.ts";
import { readJson } from "../request.ts";

export function authRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();

  r.post("/register", async (c) => {
    const { user, token } = await registerUser(d, readCredentials(await readJson(c)));
    return c.json({ token: token.reveal(), user: publicUser(user) }, 201); // reveal: the caller's own new session token
  });

  r.post("/login", async (c) => {
    const { user, token } = await loginUser(d, readCredentials(await readJson(c)), clientIp(c));
    return c.json({ token: token.reveal(), user: publicUser(user) }); // reveal: the caller's own new session token
  });

  r.use("*", requirePrincipal(d));

  r.post("/logout", async (c) => {
    await logout(d, c.get("principal"));
    return c.body(null, 204);
  });

  r.get("/whoami", async (c) => {
    const p = c.get("principal");
    const session = { id: p.sessionPublicId, expires_at: p.expiresAt === null ? null : iso(p.expiresAt) };
    if (p.kind === "user") return c.json({ kind: p.kind, user: { id: p.userId, email: p.email, role: p.instanceRole }, session });
    if (p.kind === "agent") return c.json({ kind: p.kind, agent: { name: p.agentName, role: p.instanceRole }, session });
    const vault = await d.store.vaults.byId(p.vaultId);
    return c.json({ kind: p.kind, vault: vault?.name ?? null, role: p.role, session });
  });

  r.post("/change-password", async (c) => {
    const token = await changePassword(d, c.get("principal"), await readJson(c), clientIp(c));
    return c.json({ token: token.reveal() }); // reveal: the caller's fresh session token
  });

  r.get("/sessions", async (c) => c.json({ sessions: await listOwnSessions(d, c.get("principal")) }));

  r.delete("/sessions/:id", async (c) => {
    await revokeOwnSession(d, c.get("principal"), c.req.param("id"));
    return c.body(null, 204);
  });

  return r;
}
