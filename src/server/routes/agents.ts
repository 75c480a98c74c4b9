// Agents: listing and revocation (/v1/agents), and redemption of an agent invite (POST {invite_url}).

import { Hono } from "hono";
import { listAgents, redeemAgentInvite, revokeAgent } from "../../identity/index.ts";
import { AgentList, AgentRedeemed, Message, PageAfterName } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import type { Domain } from "../../identity/index.ts";
import { pageQueryDoc, readPageQuery, requirePrincipal, sessionClientOf } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";

export function agentRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.get(
    "/",
    describe({
      summary: "Agents in the vaults you administer",
      tags: ["agents"],
      auth: "bearer",
      who: "admins (the owner sees all)",
      query: pageQueryDoc("after"),
      success: { status: 200, schema: AgentList },
    }),
    async (c) => c.json(await listAgents(d, c.get("principal"), readPageQuery(c, PageAfterName))),
  );
  r.delete(
    "/:name",
    describe({
      summary: "Revoke an agent: its tokens and scoped sessions end",
      tags: ["agents"],
      auth: "bearer",
      who: "admins of every vault it holds a role in, or the owner",
      success: { status: 204 },
    }),
    async (c) => {
      await revokeAgent(d, c.get("principal"), c.req.param("name"));
      return c.body(null, 204);
    },
  );
  return r;
}

/** POST /invite/:token: no authentication; the invite token is the credential. */
export function inviteRedemptionRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.post(
    "/:token",
    describe({
      summary: "Redeem an agent invite for an agent token (no body, no authentication: the invite is the credential)",
      tags: ["agents"],
      auth: "none",
      success: { status: 201, schema: AgentRedeemed },
    }),
    async (c) => c.json(await redeemAgentInvite(d, c.req.param("token"), sessionClientOf(c, "api")), 201),
  );
  r.get(
    "/:token",
    describe({ summary: "What an agent invite link is, in words", tags: ["agents"], auth: "none", success: { status: 200, schema: Message } }),
    (c) => {
      const link = `${d.publicUrl}/invite/${encodeURIComponent(c.req.param("token"))}`;
      return c.json({
        message:
          `This is an agent invite. With the broker CLI, redeem it once with \`broker agent redeem ${link}\` (it saves the agent's token), ` +
          "then run the agent with `broker vault run -- <command>`. Without the CLI: POST to this same URL (no body needed); the response holds the agent token.",
      });
    },
  );
  return r;
}
