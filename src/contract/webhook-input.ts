// POST /v1/vaults/:vault/webhooks (and the console's add form): the receiver's URL and the format its
// events are sent in. The URL is read back normalised (what is stored and signed for); a receiver
// that carries a user name, a password or a #fragment is refused, since none of them is ever sent.

import { z } from "zod";
import { says } from "../schema-input.ts";
import type { WebhookFormat } from "../store/index.ts";
import { urlCheckedBy } from "./fields.ts";

const MAX_URL_LENGTH = 2048;
const URL_TEXT = `{field} must be an http(s) URL of at most ${MAX_URL_LENGTH} characters`;

const ReceiverUrl = z
  .string(says(URL_TEXT))
  .min(1, says(URL_TEXT))
  .max(MAX_URL_LENGTH, says(URL_TEXT))
  .transform(
    urlCheckedBy("{field} must be an http(s) URL", (url) => {
      if (url.protocol !== "https:" && url.protocol !== "http:") return "{field} must start with https:// (or http://)";
      if (url.username || url.password) return "{field} must not carry a user name or password";
      if (url.hash) return "{field} must not carry a #fragment";
      return null;
    }),
  )
  .describe("https:// (or http://) receiver");

export const WebhookInput = z
  .strictObject(
    {
      url: ReceiverUrl,
      format: z.enum(["json", "slack"], says('{field} must be "json" or "slack"')).optional().describe('"json" (default) or "slack"'),
      slack: z.boolean(says("{field} must be true or false")).optional().describe('true: the same as format "slack"'),
    },
    { error: (iss) => (iss.code === "invalid_type" ? "expected a JSON object with url" : undefined) },
  )
  .transform((b): { url: string; format: WebhookFormat } => ({ url: b.url, format: b.format === "slack" || b.slack === true ? "slack" : "json" }));
