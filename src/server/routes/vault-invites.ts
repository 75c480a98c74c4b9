// POST /v1/vault-invites/:token/accept: a human joins a vault, logged in or registering on the way.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { CredentialsInput, InviteAccepted, InviteAcceptInput, Message, parseWith } from "../../contract/index.ts";
import { acceptVaultInvite } from "../../identity/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { bearerToken, sessionClientOf } from "../kit/index.ts";

export function vaultInviteRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  const tags = ["invites"];
  r.get("/:token/accept", describe({ summary: "What a vault invite link is, in words", tags, auth: "none", success: { status: 200, schema: Message } }), (c) =>
    c.json({
      message:
        "This is a vault invite. Accept it with `broker vault join <this link>`, or POST here with your session (or with email and password to register).",
    }),
  );
  r.post(
    "/:token/accept",
    describe({
      summary: "Accept a vault invite: with your session, or with email and password to register through it",
      tags,
      auth: ["none", "bearer"],
      success: { status: 200, schema: InviteAccepted },
      errors: [409],
    }),
    jsonBody(InviteAcceptInput),
    async (c) => {
      const bearer = bearerToken(c);
      const principal = bearer ? await d.auth.authenticate(bearer) : undefined;
      const { email, password } = c.req.valid("json");
      // Without a session the body registers: a missing field is refused as registration refuses it
      // (the email alone is read again, so it is named first; a present email reads the same twice).
      const creds = principal ? undefined : email !== undefined && password !== undefined ? { email, password } : parseWith(CredentialsInput, { email });
      return c.json(await acceptVaultInvite(d, c.req.param("token"), principal, creds, sessionClientOf(c, "api")));
    },
  );
  return r;
}
