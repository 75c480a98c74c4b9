// Who can reach a vault, and how it treats unknown hosts: `broker vault members`,
// `broker vault invites list|revoke`, `broker vault agent-invites list|revoke`, and
// `broker vault set --unmatched-hosts tunnel|deny` (admin) `--policy-mode enforce|report` (human admin).

import { defineCommand } from "citty";
import { CliFailure, jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import type { InviteListBody, MemberListBody, VaultAnswerBody } from "../../contract/index.ts";

type Member = MemberListBody["members"][number];
type PendingInvite = InviteListBody["invites"][number];

const members = defineCommand({
  meta: { name: "members", description: "List the people who can use a vault and their roles (admin)" },
  args: { ...vaultArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const res = await ctx.client.request<MemberListBody>("GET", vaultPath(vault, "members"), { vault });
    if (args.json) return printJson(res.members);
    printTable(
      res.members,
      [
        { title: "EMAIL", value: (m: Member) => m.email },
        { title: "ROLE", value: (m: Member) => m.role },
      ],
      `No members in vault ${vault}.`,
    );
  },
});

/** list|revoke for one kind of pending invite ("invites" for people, "agent-invites" for agents). */
function inviteCommands(path: "invites" | "agent-invites", who: string) {
  const list = defineCommand({
    meta: { name: "list", description: `List pending ${who} invites (admin)` },
    args: { ...vaultArg, ...jsonArg },
    async run({ args }) {
      const ctx = openContext();
      const vault = pickVault(ctx, args.vault);
      const res = await ctx.client.request<InviteListBody>("GET", vaultPath(vault, path), { vault });
      if (args.json) return printJson(res.invites);
      printTable(
        res.invites,
        [
          { title: "ID", value: (i: PendingInvite) => i.id },
          {
            title: path === "invites" ? "EMAIL" : "AGENT",
            value: (i: PendingInvite) => (path === "invites" ? (i.email ?? "(anyone with the link)") : (i.name ?? "")),
          },
          { title: "ROLE", value: (i: PendingInvite) => i.role },
          { title: "EXPIRES", value: (i: PendingInvite) => formatTime(i.expires_at) },
        ],
        `No pending ${who} invites in vault ${vault}.`,
      );
    },
  });
  const revoke = defineCommand({
    meta: { name: "revoke", description: `Cancel a pending ${who} invite so its link stops working (admin)` },
    args: { id: { type: "positional", description: "Invite id (from the list)", required: true }, ...vaultArg },
    async run({ args }) {
      const ctx = openContext();
      const vault = pickVault(ctx, args.vault);
      await ctx.client.request("DELETE", vaultPath(vault, path, args.id), { vault });
      printLine(`Revoked invite ${args.id}.`);
    },
  });
  return defineCommand({ meta: { name: path, description: `Pending ${who} invites: list or revoke` }, subCommands: { list, revoke } });
}

const set = defineCommand({
  meta: { name: "set", description: "Change vault settings (admin; --policy-mode: human admins)" },
  args: {
    "unmatched-hosts": {
      type: "enum",
      options: ["tunnel", "deny"],
      description: "Hosts without a service: tunnel (relay blind, no credential; the default) or deny (403 with a proposal hint)",
    },
    "policy-mode": {
      type: "enum",
      options: ["enforce", "report"],
      description:
        "enforce (the default) refuses what the rules and --unmatched-hosts deny refuse; report lets it through and marks its audit record would_refuse",
    },
    ...vaultArg,
  },
  async run({ args }) {
    const unmatched = args["unmatched-hosts"];
    const mode = args["policy-mode"];
    if (unmatched === undefined && mode === undefined)
      throw new CliFailure("nothing to change", "give --unmatched-hosts tunnel|deny, --policy-mode enforce|report, or both", 2);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const body = { ...(unmatched !== undefined && { unmatched_hosts: unmatched }), ...(mode !== undefined && { policy_mode: mode }) };
    const res = await ctx.client.request<VaultAnswerBody>("PATCH", vaultPath(vault), { body, vault });
    if (unmatched !== undefined)
      printLine(
        `Vault ${vault}: hosts without a service are now ${res.unmatched_hosts === "deny" ? "refused (403 with a proposal hint)" : "relayed as blind tunnels"}.`,
      );
    if (mode !== undefined)
      printLine(
        res.policy_mode === "report"
          ? `Vault ${vault} is in report mode: requests its rules or unmatched-host policy would refuse go through, marked would_refuse in the log (broker logs --would-refuse).`
          : `Vault ${vault} enforces its rules and unmatched-host policy again.`,
      );
  },
});

export const vaultAccessCommands = {
  members,
  invites: inviteCommands("invites", "people"),
  "agent-invites": inviteCommands("agent-invites", "agent"),
  set,
};
