// `broker agent invite|list|revoke|redeem`: instance-level agents. An invite is a single-use link the
// agent redeems itself (`broker agent redeem <link>`, or `curl -X POST <link>`), so no agent token
// ever passes through the inviting person's CLI.

import { defineCommand } from "citty";
import { jsonArg, limitArg, parseListLimit, parseTokenTtl, readPages, vaultArg } from "../kit/index.ts";
import { apiPath, vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import type { AgentListBody, InviteCreatedBody } from "../../contract/index.ts";

/** 2592000 → "30d"; a whole unit when one fits, else seconds. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "never expires";
  for (const [unit, size] of [
    ["w", 604800],
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
  ] as const) {
    if (seconds % size === 0) return `expires ${seconds / size}${unit} after redemption`;
  }
  return `expires ${seconds}s after redemption`;
}

const invite = defineCommand({
  meta: { name: "invite", description: "Create a single-use agent invite (valid 15 minutes) and print its link (admin)" },
  args: {
    name: { type: "string", description: "Agent name (lower-case letters, digits and dashes; generated when absent)" },
    role: { type: "enum", options: ["proxy", "member", "admin"], default: "proxy", description: "The agent's role in the vault" },
    "token-ttl": { type: "string", description: "Lifetime of the agent's token: 90m, 12h, 30d, 2w, seconds, or never (default: never)" },
    link: { type: "boolean", description: "Print only the invite link, for scripts: INVITE=$(broker agent invite --link)" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const ttl = parseTokenTtl(args["token-ttl"]);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const body = { name: args.name || undefined, role: args.role, token_ttl_seconds: ttl };
    const inv = await ctx.client.request<InviteCreatedBody>("POST", vaultPath(vault, "agent-invites"), { body, vault });
    if (args.json) return printJson(inv);
    if (args.link) return printLine(inv.invite_url);
    printLine(`Agent invite for ${inv.name} (role ${inv.role} in vault ${vault}); single use, expires ${formatTime(inv.expires_at)}.`);
    printLine(`Its token ${formatDuration(ttl)}.`);
    printLine(`  ${inv.invite_url}`);
    printLine(`The agent runs: broker agent redeem ${inv.invite_url}`);
    printLine("          then: broker vault run -- <command>");
    printLine(`Without the broker CLI: curl -X POST ${inv.invite_url}`);
  },
});

const list = defineCommand({
  meta: { name: "list", description: "List agents by name (the owner sees all; vault admins see those granted on their vaults)" },
  args: { ...limitArg, ...jsonArg },
  async run({ args }) {
    const max = parseListLimit(args.limit);
    const ctx = openContext();
    const agents = await readPages(
      (q) => ctx.client.request<AgentListBody>("GET", `/v1/agents?${q}`),
      (b) => b.agents,
      "after",
      max,
    );
    if (args.json) return printJson(agents);
    printTable(
      agents,
      [
        { title: "NAME", value: (a) => a.name },
        { title: "INSTANCE ROLE", value: (a) => a.role },
        { title: "VAULTS (ROLE)", value: (a) => a.vaults.map((v) => `${v.name} (${v.role})`).join(", ") || "-" },
        { title: "SESSIONS", value: (a) => String(a.sessions) },
        { title: "CREATED", value: (a) => formatTime(a.created_at) },
      ],
      "No agents. Invite one with: broker agent invite",
    );
  },
});

const revoke = defineCommand({
  meta: { name: "revoke", description: "Remove an agent and revoke all its tokens at once" },
  args: { name: { type: "positional", description: "Agent name (see `broker agent list`)", required: true } },
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", apiPath("v1", "agents", args.name));
    printLine(`Revoked agent ${args.name}: its tokens no longer work.`);
  },
});

export default defineCommand({
  meta: { name: "agent", description: "Invite, list and revoke agents; an agent redeems its invite with `agent redeem`" },
  subCommands: { invite, list, revoke, redeem: () => import("./agent-redeem.ts").then((m) => m.default) },
});
