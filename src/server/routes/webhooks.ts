// /v1/vaults/:vault/webhooks: proposal notifications (add, list, remove), for human admins of the vault.
// The signing secret is in the 201 answer once; the list shows each webhook's last delivery, never a secret.

import { Hono } from "hono";
import { addWebhook, listWebhooks, removeWebhook, type Domain } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { openVaultFor, readJson } from "../request.ts";

export function webhookRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/webhooks", requirePrincipal(d));
  r.use("/:vault/webhooks/*", requirePrincipal(d));
  r.post("/:vault/webhooks", async (c) => {
    const { webhook, secret } = await addWebhook(d, await openVaultFor(d, c, "manage"), await readJson(c));
    // reveal: the signing secret, shown to the admin who added the webhook, once
    return c.json({ ...webhook, secret: secret.reveal(), message: "Keep this secret: it is shown once. Verify Broker-Signature with it (docs/api.md, Webhooks)." }, 201);
  });
  r.get("/:vault/webhooks", async (c) => c.json({ webhooks: await listWebhooks(d, await openVaultFor(d, c, "manage")) }));
  r.delete("/:vault/webhooks/:id", async (c) => {
    await removeWebhook(d, await openVaultFor(d, c, "manage"), c.req.param("id"));
    return c.body(null, 204);
  });
  return r;
}
