// Agents: listing and revocation (/v1/agents), and redemption of an agent invite (POST {invite_url}).

import { Hono } from "hono";
import { listAgents, redeemAgentInvite, revokeAgent } from "../../vault/index.ts";
import type { Domain } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";

export function agentRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.get("/", async (c) => c.json({ agents: await listAgents(d, c.get("principal")) }));
  r.delete("/:name", async (c) => {
    await revokeAgent(d, c.get("principal"), c.req.param("name"));
    return c.body(null, 204);
  });
  return r;
}

/** POST /invite/:token: no authentication; the invite token is the credential. */
export function inviteRedemptionRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.post("/:token", async (c) => c.json(await redeemAgentInvite(d, c.req.param("token")), 201));
  r.get("/:token", (c) =>
    c.json({ message: "This is an agent invite. Redeem it once with POST to this same URL (no body needed); the response holds the agent token." }),
  );
  return r;
}
