// /v1/auth: registration, login, logout, whoami, change-password, session listing and revocation.
// Password checks (login, change-password) pass the client address to the domain's login throttle.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { ChangePasswordInput, CredentialsInput, FreshSession, OwnSessions, PageAfterId, SignedIn, Whoami } from "../../contract/index.ts";
import { changePassword, iso, listOwnSessions, loginUser, logout, publicUser, registerUser, revokeOwnSession } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { clientIp, sessionClientOf } from "../kit/index.ts";
import { jsonBody, pageQueryDoc, readPageQuery } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

export function authRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();

  const tags = ["sign-in"];
  r.post(
    "/register",
    describe({
      summary: "Register (the first person becomes the instance owner)",
      tags,
      auth: "none",
      success: { status: 201, schema: SignedIn },
      errors: [409],
    }),
    jsonBody(CredentialsInput),
    async (c) => {
      const { user, token } = await registerUser(d, c.req.valid("json"), undefined, sessionClientOf(c, "api"));
      return c.json({ token: token.reveal(), user: publicUser(user) }, 201); // reveal: the caller's own new session token
    },
  );

  r.post(
    "/login",
    describe({ summary: "Sign in with email and password", tags, auth: "none", success: { status: 200, schema: SignedIn } }),
    jsonBody(CredentialsInput),
    async (c) => {
      const { user, token } = await loginUser(d, c.req.valid("json"), clientIp(c), sessionClientOf(c, "api"));
      return c.json({ token: token.reveal(), user: publicUser(user) }); // reveal: the caller's own new session token
    },
  );

  r.use("*", requirePrincipal(d));

  r.post("/logout", describe({ summary: "End this session", tags, auth: "bearer", success: { status: 204 } }), async (c) => {
    await logout(d, c.get("principal"));
    return c.body(null, 204);
  });

  r.get("/whoami", describe({ summary: "Who this token is", tags, auth: "bearer", success: { status: 200, schema: Whoami } }), async (c) => {
    const p = c.get("principal");
    const session = { id: p.sessionPublicId, expires_at: p.expiresAt === null ? null : iso(p.expiresAt) };
    if (p.kind === "user") return c.json({ kind: p.kind, user: { id: p.userId, email: p.email, role: p.instanceRole }, session });
    if (p.kind === "agent") return c.json({ kind: p.kind, agent: { name: p.agentName, role: p.instanceRole }, session });
    const vault = await d.store.vaults.byId(p.vaultId);
    return c.json({ kind: p.kind, vault: vault?.name ?? null, role: p.role, session });
  });

  r.post(
    "/change-password",
    describe({
      summary: "Change your password (every other session ends)",
      tags,
      auth: "bearer",
      who: "user sessions",
      success: { status: 200, schema: FreshSession },
    }),
    jsonBody(ChangePasswordInput),
    async (c) => {
      const token = await changePassword(d, c.get("principal"), c.req.valid("json"), clientIp(c), sessionClientOf(c, "api"));
      return c.json({ token: token.reveal() }); // reveal: the caller's fresh session token
    },
  );

  r.get(
    "/sessions",
    describe({
      summary: "Your active sessions (scoped sessions you minted too)",
      tags,
      auth: "bearer",
      who: "user sessions",
      query: pageQueryDoc("after"),
      success: { status: 200, schema: OwnSessions },
    }),
    async (c) => c.json(await listOwnSessions(d, c.get("principal"), readPageQuery(c, PageAfterId))),
  );

  r.delete(
    "/sessions/:id",
    describe({ summary: "End one of your sessions", tags, auth: "bearer", who: "user sessions", success: { status: 204 } }),
    async (c) => {
      await revokeOwnSession(d, c.get("principal"), c.req.param("id"));
      return c.body(null, 204);
    },
  );

  return r;
}
