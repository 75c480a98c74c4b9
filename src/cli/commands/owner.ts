// `broker owner settings get|set`: instance-wide settings only the owner may read or change:
// allowed signup domains and rate limits (read-only when BROKER_RATELIMIT_LOCK pins them).

import { defineCommand } from "citty";
import type { OwnerSettingsBody } from "../../contract/index.ts";
import { jsonArg, parseDomainList } from "../kit/index.ts";
import { openContext } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { printJson, printLine } from "../kit/index.ts";

function printSettings(s: OwnerSettingsBody): void {
  const domains = s.allowed_domains.length ? s.allowed_domains.join(", ") : "(any: no restriction)";
  printLine(`Allowed email domains for new accounts: ${domains}`);
  const r = s.rate_limits;
  if (!r) return;
  printLine(`Rate limits: profile ${r.profile}${r.locked ? " (pinned by BROKER_RATELIMIT_LOCK: read-only)" : ""}`);
  for (const [name, t] of [
    ["auth (per client IP)", r.auth],
    ["authed (per principal)", r.authed],
    ["proxy (per principal and vault)", r.proxy],
  ] as const) {
    printLine(`  ${name.padEnd(32)} ${t.rps}/s, burst ${t.burst}`);
  }
  printLine(`  ${"global (whole server)".padEnd(32)} ${r.global.rps}/s, ${r.global.inflight} in flight`);
}

/** "proxy.rps=100,global.inflight=1024" → { proxy: { rps: 100 }, global: { inflight: 1024 } } */
export function parseRateLimitKnobs(raw: string): Record<string, Record<string, number>> {
  const out: Record<string, Record<string, number>> = {};
  for (const item of raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^(auth|authed|proxy|global)\.(rps|burst|inflight)=(\d+(?:\.\d+)?)$/.exec(item);
    if (!m)
      throw new CliFailure(
        `--ratelimit: "${item}" is not tier.knob=number`,
        "tiers: auth, authed, proxy, global; knobs: rps, burst (global: rps, inflight)",
        2,
      );
    (out[m[1]!] ??= {})[m[2]!] = Number(m[3]);
  }
  return out;
}

const get = defineCommand({
  meta: { name: "get", description: "Show the instance settings" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const settings = await ctx.client.request<OwnerSettingsBody>("GET", "/v1/owner/settings");
    if (args.json) return printJson(settings);
    printSettings(settings);
  },
});

const set = defineCommand({
  meta: { name: "set", description: "Change instance settings" },
  args: {
    "allowed-domains": { type: "string", description: "Comma-separated email domains later accounts must use, e.g. a.com,b.org; an empty string allows any" },
    "ratelimit-profile": { type: "string", description: "Rate-limit profile: default, strict, loose or off" },
    ratelimit: { type: "string", description: "Rate-limit knobs, e.g. proxy.rps=100,proxy.burst=400,global.inflight=1024" },
    ...jsonArg,
  },
  async run({ args }) {
    const body: Record<string, unknown> = {};
    if (args["allowed-domains"] !== undefined) body.allowed_domains = parseDomainList(args["allowed-domains"]);
    if (args["ratelimit-profile"] !== undefined || args.ratelimit !== undefined) {
      body.rate_limits = {
        ...(args.ratelimit ? parseRateLimitKnobs(args.ratelimit) : {}),
        ...(args["ratelimit-profile"] ? { profile: args["ratelimit-profile"] } : {}),
      };
    }
    if (Object.keys(body).length === 0) throw new CliFailure("nothing to change", "pass --allowed-domains, --ratelimit-profile or --ratelimit", 2);
    const ctx = openContext();
    const settings = await ctx.client.request<OwnerSettingsBody>("PATCH", "/v1/owner/settings", { body });
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
