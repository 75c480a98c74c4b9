// POST /v1/vault-invites/:token/accept: a human joins a vault, logged in or registering on the way.

import { Hono } from "hono";
import type { Domain } from "../../vault/index.ts";
import { acceptVaultInvite } from "../../vault/index.ts";
import { readCredentials } from "../../vault/index.ts";
import type { ApiEnv } from "../env.ts";
import { bearerToken, readJson } from "../request.ts";

export function vaultInviteRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.get("/:token/accept", (c) =>
    c.json({ message: "This is a vault invite. Accept it with `broker vault join <this link>`, or POST here with your session (or with email and password to register)." }),
  );
  r.post("/:token/accept", async (c) => {
    const bearer = bearerToken(c);
    const principal = bearer ? await d.auth.authenticate(bearer) : undefined;
    const body = principal ? undefined : await readJson(c);
    const creds = body === undefined ? undefined : readCredentials(body);
    return c.json(await acceptVaultInvite(d, c.req.param("token"), principal, creds));
  });
  return r;
}
