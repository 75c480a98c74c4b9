// `broker owner settings get|set`: instance-wide settings only the owner may read or change.

import { defineCommand } from "citty";
import { jsonArg, parseDomainList } from "../args.ts";
import { openContext } from "../context.ts";
import { printJson, printLine } from "../output.ts";

interface OwnerSettings {
  readonly allowed_domains: string[];
}

function printSettings(s: OwnerSettings): void {
  const domains = s.allowed_domains.length ? s.allowed_domains.join(", ") : "(any: no restriction)";
  printLine(`Allowed email domains for new accounts: ${domains}`);
}

const get = defineCommand({
  meta: { name: "get", description: "Show the instance settings" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const settings = await ctx.client.request<OwnerSettings>("GET", "/v1/owner/settings");
    if (args.json) return printJson(settings);
    printSettings(settings);
  },
});

const set = defineCommand({
  meta: { name: "set", description: "Change instance settings" },
  args: {
    "allowed-domains": {
      type: "string",
      required: true,
      description: "Comma-separated email domains later accounts must use, e.g. a.com,b.org; an empty string allows any",
    },
    ...jsonArg,
  },
  async run({ args }) {
    const domains = parseDomainList(args["allowed-domains"]);
    const ctx = openContext();
    const settings = await ctx.client.request<OwnerSettings>("PATCH", "/v1/owner/settings", { body: { allowed_domains: domains } });
    if (args.json) return printJson(settings);
    printSettings(settings);
  },
});

export default defineCommand({
  meta: { name: "owner", description: "Instance settings for the owner" },
  subCommands: {
    settings: defineCommand({ meta: { name: "settings", description: "Show or change instance settings" }, subCommands: { get, set } }),
  },
});
