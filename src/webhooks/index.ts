// Delivery of signed webhook events (proposals, held requests) to the URLs a vault lists, through
// the network guard, with retries; the domain names only the notifier it calls.

export { createWebhookSender, type WebhookSender, type WebhookSenderDeps } from "./webhook-delivery.ts";
