// `broker vault webhook add|list|remove`: proposal notifications (human admins of the vault).
// The signing secret is printed once by `add`; `list` masks the receiver's URL (Slack's webhook URLs
// are secrets themselves) and never shows a secret.

import { defineCommand } from "citty";
import { jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import { DELIVERY_STATUS_WORDS } from "../../workflows/index.ts";
import type { WebhookCreatedBody, WebhookListBody } from "../../contract/index.ts";

const DOCS = "docs/api.md, section Webhooks";
const ADMIN_HINT = "only a human admin of the vault manages its webhooks (agents and `vault run` sessions cannot); ask one";
const LIST_HINT = "`broker vault webhook list` shows the ids";
const MASK = "***";

/** Hides what may be a secret in a receiver URL (a Slack webhook's path is its credential): the query and every path segment over 20 characters. */
export function maskWebhookUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return MASK;
  }
  const path = url.pathname
    .split("/")
    .map((seg) => (seg.length > 20 ? MASK : seg))
    .join("/");
  return `${url.protocol}//${url.host}${path}${url.search ? `?${MASK}` : ""}`;
}

const add = defineCommand({
  meta: {
    name: "add",
    description:
      "Send the vault's proposal events (created, approved, rejected, expired) to a URL, signed with a secret shown once (human admin). " +
      "Example: broker vault webhook add https://hooks.slack.com/services/T0/B0/XXXX --slack",
  },
  args: {
    url: { type: "positional", description: "Receiver URL (https://, or http:// for a private receiver)", required: true },
    slack: { type: "boolean", description: "Send Slack's incoming-webhook shape ({text}) instead of the JSON event" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const body = { url: args.url, format: args.slack ? "slack" : "json" };
    const hook = await ctx.client.request<WebhookCreatedBody>("POST", vaultPath(vault, "webhooks"), {
      body,
      vault,
      hints: { 403: ADMIN_HINT, 409: "`broker vault webhook list` shows the vault's webhooks; remove one first" },
    });
    if (args.json) return printJson(hook);
    printLine(`Added webhook ${hook.id} to vault ${vault}: ${maskWebhookUrl(hook.url)} (${hook.format === "slack" ? "Slack format" : "JSON events"}).`);
    printLine("Signing secret (shown once; store it now, it cannot be shown again):");
    printLine(`  ${hook.secret}`);
    printLine(`Each request carries Broker-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">; verify it with this secret (${DOCS}).`);
  },
});

const list = defineCommand({
  meta: { name: "list", description: "List the vault's webhooks with their last delivery (human admin)" },
  args: { ...vaultArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const res = await ctx.client.request<WebhookListBody>("GET", vaultPath(vault, "webhooks"), { vault, hints: { 403: ADMIN_HINT } });
    const hooks = res.webhooks.map((w) => ({ ...w, url: maskWebhookUrl(w.url) }));
    if (args.json) return printJson(hooks);
    printTable(
      hooks,
      [
        { title: "ID", value: (w) => String(w.id) },
        { title: "URL", value: (w) => w.url, max: 60 },
        { title: "FORMAT", value: (w) => w.format },
        { title: "STATUS", value: (w) => DELIVERY_STATUS_WORDS[w.delivery.status] ?? w.delivery.status },
        { title: "LAST EVENT", value: (w) => (w.delivery.event ? `${w.delivery.event} ${formatTime(w.delivery.at)}` : "-") },
        { title: "ATTEMPTS", value: (w) => String(w.delivery.attempts) },
        { title: "LAST ERROR", value: (w) => w.delivery.error ?? "-", max: 60 },
      ],
      `No webhooks in vault ${vault}. Add one with: broker vault webhook add <url> [--slack]`,
    );
  },
});

const remove = defineCommand({
  meta: { name: "remove", description: "Stop sending proposal events to a webhook (human admin). Example: broker vault webhook remove 3" },
  args: { id: { type: "positional", description: "Webhook id (from `broker vault webhook list`)", required: true }, ...vaultArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    await ctx.client.request("DELETE", vaultPath(vault, "webhooks", args.id), { vault, hints: { 403: ADMIN_HINT, 404: LIST_HINT } });
    printLine(`Removed webhook ${args.id} from vault ${vault}; it gets no more events.`);
  },
});

export default defineCommand({
  meta: { name: "webhook", description: "Proposal notifications: add, list and remove the vault's webhooks (human admins)" },
  subCommands: { add, list, remove },
});
