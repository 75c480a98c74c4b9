// (module index: describe this module)
export { createWebhookSender, type WebhookSender, type WebhookSenderDeps } from "./webhook-delivery.ts";
