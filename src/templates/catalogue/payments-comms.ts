// Payments and messaging: Stripe, Slack, Discord, Telegram bots, Twilio, SendGrid, Mailgun and Resend.
// Money leaving (Stripe refunds and payouts, buying a Twilio number) and deleting what others wrote wait
// for a person.

import { allow, approveEach, DELETE, READ, WRITE, type Entry } from "./shape.ts";

const STRIPE_MONEY_OUT = approveEach(["POST"], ["/v1/refunds", "/v1/refunds/**", "/v1/payouts", "/v1/payouts/**"]);

/** Slack Web API methods (/api/<method>; SDKs POST every one of them). */
const SLACK_READ = [
  "auth.test",
  "bookmarks.list",
  "conversations.history",
  "conversations.info",
  "conversations.list",
  "conversations.members",
  "conversations.replies",
  "files.info",
  "files.list",
  "pins.list",
  "reactions.get",
  "search.messages",
  "team.info",
  "users.info",
  "users.list",
  "users.lookupByEmail",
].map((m) => `/api/${m}`);
const SLACK_WRITE = [
  "chat.postEphemeral",
  "chat.postMessage",
  "chat.scheduleMessage",
  "chat.update",
  "conversations.create",
  "conversations.invite",
  "conversations.join",
  "conversations.mark",
  "conversations.setPurpose",
  "conversations.setTopic",
  "files.completeUploadExternal",
  "files.getUploadURLExternal",
  "pins.add",
  "reactions.add",
  "reactions.remove",
  "bookmarks.add",
].map((m) => `/api/${m}`);
const SLACK_DESTRUCTIVE = [
  "chat.delete",
  "chat.deleteScheduledMessage",
  "conversations.archive",
  "conversations.kick",
  "files.delete",
  "pins.remove",
  "bookmarks.remove",
].map((m) => `/api/${m}`);

/** Telegram Bot API methods (the agent's path is /<method>; the broker puts /bot<token> before it). */
const TELEGRAM_READ = [
  "getMe",
  "getUpdates",
  "getChat",
  "getChatAdministrators",
  "getChatMember",
  "getChatMemberCount",
  "getFile",
  "getMyCommands",
  "getUserProfilePhotos",
  "getWebhookInfo",
].map((m) => `/${m}`);
const TELEGRAM_WRITE = [
  "sendMessage",
  "sendPhoto",
  "sendDocument",
  "sendChatAction",
  "sendLocation",
  "sendPoll",
  "forwardMessage",
  "copyMessage",
  "editMessageText",
  "editMessageReplyMarkup",
  "answerCallbackQuery",
  "setMessageReaction",
  "pinChatMessage",
  "unpinChatMessage",
  "setMyCommands",
].map((m) => `/${m}`);
const TELEGRAM_DESTRUCTIVE = ["deleteMessage", "deleteMessages", "banChatMember", "leaveChat", "deleteWebhook", "setWebhook"].map((m) => `/${m}`);

export const PAYMENTS_COMMS: readonly Entry[] = [
  {
    id: "stripe",
    name: "Stripe",
    hosts: ["api.stripe.com"],
    auth: { type: "bearer", token: "STRIPE_SECRET_KEY" },
    docs: "https://docs.stripe.com/api/authentication",
    obtain: "https://dashboard.stripe.com/apikeys",
    operations: {
      read: { summary: "read customers, charges, invoices, subscriptions and balances", rules: [allow(READ, ["/v1/**"])] },
      write: {
        summary: "create and change customers, payments, invoices and subscriptions; each refund and payout waits for a person",
        rules: [allow(["POST"], ["/v1/**"]), STRIPE_MONEY_OUT],
      },
      destructive: {
        summary: "delete customers, products, prices and the like; refunds and payouts too, each held for a person",
        rules: [allow(DELETE, ["/v1/**"]), STRIPE_MONEY_OUT],
      },
    },
  },
  {
    id: "slack",
    name: "Slack",
    hosts: ["slack.com"],
    auth: { type: "bearer", token: "SLACK_BOT_TOKEN" },
    docs: "https://api.slack.com/changelog/2017-10-keeping-up-with-the-jsons",
    obtain: "https://api.slack.com/apps",
    operations: {
      read: { summary: "read channels, messages, threads, users and files", rules: [allow(["GET", "HEAD", "POST"], SLACK_READ)] },
      write: { summary: "post, update and schedule messages; react; create, join and set up channels; upload files", rules: [allow(["POST"], SLACK_WRITE)] },
      destructive: {
        summary: "each deletion of messages or files, archiving and removing members waits for a person",
        rules: [allow(["POST"], SLACK_DESTRUCTIVE), approveEach(["GET", "POST"], SLACK_DESTRUCTIVE)],
      },
    },
  },
  {
    id: "discord",
    name: "Discord (bot)",
    hosts: ["discord.com"],
    auth: { type: "header", header: "authorization", prefix: "Bot ", token: "DISCORD_BOT_TOKEN" },
    docs: "https://discord.com/developers/docs/reference#authentication",
    obtain: "https://discord.com/developers/applications",
    operations: {
      read: { summary: "read guilds, channels, messages and members", rules: [allow(READ, ["/api/**"])] },
      write: {
        summary: "send and edit messages, react, create threads and channels; each ban waits for a person",
        rules: [allow(WRITE, ["/api/**"]), approveEach(["PUT"], ["/api/*/guilds/*/bans/*"])],
      },
      destructive: {
        summary: "delete messages, reactions and invites, kick members; deleting a channel or guild waits for a person",
        rules: [allow(DELETE, ["/api/**"]), approveEach(DELETE, ["/api/*/channels/*", "/api/*/guilds/*"])],
      },
    },
  },
  {
    id: "telegram",
    name: "Telegram Bot API",
    hosts: ["api.telegram.org"],
    auth: { type: "path", template: "/bot{value}", token: "TELEGRAM_BOT_TOKEN" },
    docs: "https://core.telegram.org/bots/api#making-requests",
    obtain: "https://core.telegram.org/bots/features#botfather",
    operations: {
      read: { summary: "read the bot, updates, chats and members", rules: [allow(["GET", "HEAD", "POST"], TELEGRAM_READ)] },
      write: { summary: "send, forward, edit and pin messages; answer callbacks; set commands", rules: [allow(["GET", "POST"], TELEGRAM_WRITE)] },
      destructive: {
        summary: "each deletion, ban, leaving a chat and webhook change waits for a person",
        rules: [allow(["GET", "POST"], TELEGRAM_DESTRUCTIVE), approveEach(["GET", "POST"], TELEGRAM_DESTRUCTIVE)],
      },
    },
  },
  {
    id: "twilio",
    name: "Twilio",
    hosts: ["api.twilio.com"],
    auth: { type: "basic", username: "AC00000000000000000000000000000000", token: "TWILIO_AUTH_TOKEN" },
    docs: "https://www.twilio.com/docs/usage/requests-to-twilio",
    obtain: "https://console.twilio.com/",
    fill: { username: "your Account SID (AC…), shown beside the Auth Token in the console" },
    operations: {
      read: { summary: "read messages, calls, recordings and phone numbers", rules: [allow(READ, ["/2010-04-01/**"])] },
      write: {
        summary: "send messages and make calls; buying a phone number waits for a person",
        rules: [
          allow(["POST"], ["/2010-04-01/**"]),
          approveEach(["POST"], ["/2010-04-01/Accounts/*/IncomingPhoneNumbers.json", "/2010-04-01/Accounts/*/IncomingPhoneNumbers/**"]),
        ],
      },
      destructive: { summary: "delete messages, recordings and phone numbers", rules: [allow(DELETE, ["/2010-04-01/**"])] },
    },
  },
  {
    id: "sendgrid",
    name: "SendGrid",
    hosts: ["api.sendgrid.com"],
    auth: { type: "bearer", token: "SENDGRID_API_KEY" },
    docs: "https://www.twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/authentication",
    obtain: "https://app.sendgrid.com/settings/api_keys",
    operations: {
      read: { summary: "read templates, contacts, lists and statistics", rules: [allow(READ, ["/v3/**"])] },
      write: { summary: "send mail (POST /v3/mail/send); create and change templates, contacts and lists", rules: [allow(WRITE, ["/v3/**"])] },
      destructive: { summary: "delete templates, contacts, lists and suppressions", rules: [allow(DELETE, ["/v3/**"])] },
    },
  },
  {
    id: "mailgun",
    name: "Mailgun",
    hosts: ["api.mailgun.net", "api.eu.mailgun.net"],
    auth: { type: "basic", username: "api", token: "MAILGUN_API_KEY" },
    docs: "https://documentation.mailgun.com/docs/mailgun/api-reference/authentication",
    obtain: "https://app.mailgun.com/settings/api_security",
    operations: {
      read: { summary: "read domains, events, logs, lists and statistics", rules: [allow(READ, ["/**"])] },
      write: { summary: "send messages; create and change routes, lists, templates and webhooks", rules: [allow(["POST", "PUT"], ["/**"])] },
      destructive: {
        summary: "delete routes, lists, templates and suppressions; deleting a domain waits for a person",
        rules: [allow(DELETE, ["/**"]), approveEach(DELETE, ["/*/domains/*"])],
      },
    },
  },
  {
    id: "resend",
    name: "Resend",
    hosts: ["api.resend.com"],
    auth: { type: "bearer", token: "RESEND_API_KEY" },
    docs: "https://resend.com/docs/api-reference/introduction",
    obtain: "https://resend.com/api-keys",
    operations: {
      read: { summary: "read emails, domains, audiences and contacts", rules: [allow(READ, ["/**"])] },
      write: { summary: "send emails and batches; create and change domains, audiences and contacts", rules: [allow(WRITE, ["/**"])] },
      destructive: { summary: "delete domains, audiences, contacts and API keys", rules: [allow(DELETE, ["/**"])] },
    },
  },
];
