// `broker vault create|list|delete|use|invite|join|webhook`: vaults, the people in them and their notifications.
// `use` remembers a vault in cli.json for every vault-scoped command that follows.

import { defineCommand } from "citty";
import { vaultAccessCommands } from "./vault-access.ts";
import { jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault, rememberVault } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import { promptLine } from "../kit/index.ts";
import joinCommand from "./vault-join.ts";
import type { InviteCreatedBody, VaultAnswerBody, VaultListBody } from "../../contract/index.ts";

const nameArg = { name: { type: "positional", description: "Vault name (lower-case letters, digits and dashes)", required: true } } as const;

const create = defineCommand({
  meta: { name: "create", description: "Create a vault; you become its admin" },
  args: { ...nameArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = await ctx.client.request<VaultAnswerBody>("POST", "/v1/vaults", { body: { name: args.name } });
    if (args.json) return printJson(vault);
    printLine(`Created vault ${vault.name} (your role: ${vault.role}).`);
    if (!ctx.state.vault) printLine(`Make it the default for later commands with: broker vault use ${vault.name}`);
  },
});

const list = defineCommand({
  meta: { name: "list", description: "List the vaults you can use (* marks the current one)" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const { vaults } = await ctx.client.request<VaultListBody>("GET", "/v1/vaults");
    if (args.json) return printJson(vaults);
    const current = ctx.state.vault ?? ctx.config.vault;
    printTable(
      vaults,
      [
        { title: "", value: (v) => (v.name === current ? "*" : "") },
        { title: "NAME", value: (v) => v.name },
        { title: "ROLE", value: (v) => v.role },
        { title: "CREATED", value: (v) => formatTime(v.created_at) },
      ],
      "No vaults yet. Create one with: broker vault create <name>",
    );
  },
});

const remove = defineCommand({
  meta: { name: "delete", description: "Delete a vault with its credentials, services, invites and sessions (admin)" },
  args: { ...nameArg, yes: { type: "boolean", description: "Do not ask for confirmation (required when not on a terminal)" } },
  async run({ args }) {
    const ctx = openContext();
    if (!args.yes) {
      const typed = await promptLine(`This deletes vault ${args.name} and every credential in it. Type its name to confirm: `);
      if (typed !== args.name) throw new CliFailure("not confirmed: nothing was deleted", "type the vault name exactly, or pass --yes");
    }
    await ctx.client.request("DELETE", vaultPath(args.name), { vault: args.name });
    if (ctx.state.vault === args.name) rememberVault(ctx, null);
    printLine(`Deleted vault ${args.name}.`);
  },
});

const use = defineCommand({
  meta: { name: "use", description: "Make a vault the default for vault-scoped commands (saved in the CLI config)" },
  args: nameArg,
  async run({ args }) {
    const ctx = openContext();
    // Check first: a typo here would otherwise surface later, far from its cause.
    const vault = await ctx.client.request<VaultAnswerBody>("GET", vaultPath(args.name), { vault: args.name });
    rememberVault(ctx, vault.name);
    printLine(`Using vault ${vault.name} (your role: ${vault.role}).`);
  },
});

const invite = defineCommand({
  meta: { name: "invite", description: "Invite a person to a vault: prints a single-use link valid for 48 hours (admin)" },
  args: {
    email: { type: "string", description: "Email the invite is for (omit to let anyone with the link accept it)" },
    role: { type: "enum", options: ["admin", "member", "proxy"], default: "member", description: "Role in the vault" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const body = { email: args.email || undefined, role: args.role };
    const inv = await ctx.client.request<InviteCreatedBody>("POST", vaultPath(vault, "invites"), { body, vault });
    if (args.json) return printJson(inv);
    printLine(`Invited ${inv.email ?? "whoever holds the link"} to vault ${vault} as ${inv.role} (single use, expires ${formatTime(inv.expires_at)}).`);
    printLine("Send them this link:");
    printLine(`  ${inv.invite_url}`);
    printLine("They accept it with `broker vault join <link>` when logged in, or create their account through it:");
    printLine(`  broker vault join ${inv.invite_url} --email ${inv.email ?? "<their email>"}`);
  },
});

export default defineCommand({
  meta: { name: "vault", description: "Vaults: create, choose and delete them, invite people, run a command as an agent" },
  subCommands: {
    create,
    list,
    delete: remove,
    use,
    invite,
    join: joinCommand,
    run: () => import("./vault-run.ts").then((m) => m.default),
    webhook: () => import("./vault-webhook.ts").then((m) => m.default),
    ...vaultAccessCommands,
  },
});
