// /v1/vaults/:vault/webhooks: proposal notifications (add, list, remove), for human admins of the vault.
// The signing secret is in the 201 answer once; the list shows each webhook's last delivery, never a secret.

import { Hono } from "hono";
import { addWebhook, listWebhooks, removeWebhook } from "../../workflows/index.ts";
import { WebhookCreated, WebhookInput, WebhookList } from "../../contract/index.ts";
import { type Domain } from "../../identity/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { openVaultFor } from "../kit/index.ts";

const tags = ["webhooks"];
const who = "human admins of the vault; agents and scoped sessions get 403";

export function webhookRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/webhooks", requirePrincipal(d));
  r.use("/:vault/webhooks/*", requirePrincipal(d));
  r.post(
    "/:vault/webhooks",
    describe({
      summary: "Add a webhook for proposal and held-request events (the signing secret is shown once)",
      tags,
      auth: "bearer",
      who,
      success: { status: 201, schema: WebhookCreated },
      errors: [409],
    }),
    jsonBody(WebhookInput),
    async (c) => {
      const { webhook, secret } = await addWebhook(d, await openVaultFor(d, c, "manage"), c.req.valid("json"));
      // reveal: the signing secret, shown to the admin who added the webhook, once
      return c.json(
        { ...webhook, secret: secret.reveal(), message: "Keep this secret: it is shown once. Verify Broker-Signature with it (docs/api.md, Webhooks)." },
        201,
      );
    },
  );
  r.get(
    "/:vault/webhooks",
    describe({
      summary: "The vault's webhooks with their last delivery (receiver URLs masked)",
      tags,
      auth: "bearer",
      who,
      success: { status: 200, schema: WebhookList },
    }),
    async (c) => c.json({ webhooks: await listWebhooks(d, await openVaultFor(d, c, "manage")) }),
  );
  r.delete("/:vault/webhooks/:id", describe({ summary: "Remove a webhook", tags, auth: "bearer", who, success: { status: 204 } }), async (c) => {
    await removeWebhook(d, await openVaultFor(d, c, "manage"), c.req.param("id"));
    return c.body(null, 204);
  });
  return r;
}
