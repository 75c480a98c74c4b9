// `broker service add|list|update|enable|disable|remove`: which hosts a vault's agents may reach,
// which credential key is injected for each, and optionally which methods and paths (rules).
// Services name keys, never values. A service decides where a stored value is sent, so only
// people change them; agents file proposals instead.

import { defineCommand } from "citty";
import type { Rules } from "../../vault/index.ts";
import { jsonArg, vaultArg } from "../args.ts";
import { vaultPath } from "../client.ts";
import { openContext, pickVault } from "../context.ts";
import { CliFailure, hintOnForbidden, SECRET_WRITE_HINT } from "../fail.ts";
import { addHelpFooter } from "../help.ts";
import { printJson, printLine, printTable } from "../output.ts";
import { ADD_EXAMPLES, ALLOW_EXAMPLE, allowArg, collectFlagValues, describeAllowed, parseAllowFlags, UPDATE_EXAMPLES } from "../service-rules.ts";

export type ServiceAuth =
  | { type: "bearer"; token: string }
  | { type: "basic"; token: string; username?: string }
  | { type: "header"; header: string; token: string; prefix?: string }
  | { type: "passthrough" };

interface ServiceView {
  readonly host: string;
  readonly description: string | null;
  readonly auth: ServiceAuth;
  readonly enabled: boolean;
  readonly rules?: Rules;
}

export interface AuthFlags {
  readonly auth: string;
  readonly token?: string;
  readonly header?: string;
  readonly prefix?: string;
  readonly username?: string;
}

const AUTH_FLAGS: Record<ServiceAuth["type"], { needs: (keyof AuthFlags)[]; allows: (keyof AuthFlags)[] }> = {
  bearer: { needs: ["token"], allows: [] },
  basic: { needs: ["token"], allows: ["username"] },
  header: { needs: ["header", "token"], allows: ["prefix"] },
  passthrough: { needs: [], allows: [] },
};

/** Turns --auth and its companion flags into the API's auth object, naming any flag missing or out of place. */
export function buildAuth(flags: AuthFlags): ServiceAuth {
  const rule = AUTH_FLAGS[flags.auth as ServiceAuth["type"]];
  if (!rule) throw new CliFailure(`--auth must be one of ${Object.keys(AUTH_FLAGS).join(", ")}`, undefined, 2);
  const given = (["token", "header", "prefix", "username"] as const).filter((f) => flags[f] !== undefined && flags[f] !== "");
  const missing = rule.needs.filter((f) => !given.includes(f as (typeof given)[number]));
  if (missing.length) throw new CliFailure(`--auth ${flags.auth} needs ${missing.map((f) => `--${f}`).join(" and ")}`, "--token names the credential KEY to inject (see `broker credential list`)", 2);
  const extra = given.filter((f) => !rule.needs.includes(f) && !rule.allows.includes(f));
  if (extra.length) throw new CliFailure(`--auth ${flags.auth} does not take ${extra.map((f) => `--${f}`).join(" or ")}`, undefined, 2);
  const pick = Object.fromEntries(given.map((f) => [f, flags[f]]));
  return { type: flags.auth, ...pick } as ServiceAuth;
}

/** One-line summary for tables: `bearer OPENAI_API_KEY`, `header X-Api-Key: Token <KEY>`. */
export function describeAuth(auth: ServiceAuth): string {
  switch (auth.type) {
    case "bearer":
      return `bearer ${auth.token}`;
    case "basic":
      return `basic ${auth.username ? `${auth.username}:` : ""}${auth.token}`;
    case "header":
      return `header ${auth.header}: ${auth.prefix ?? ""}<${auth.token}>`;
    default:
      return auth.type;
  }
}

const hostArg = { host: { type: "positional", description: "Host, host:port, or *.domain", required: true } } as const;

const add = defineCommand({
  meta: { name: "add", description: "Allow a host and say how its credential is injected" },
  args: {
    ...hostArg,
    auth: { type: "enum", options: ["bearer", "basic", "header", "passthrough"], required: true, description: "How the credential is injected" },
    token: { type: "string", description: "Credential KEY to inject (bearer, basic, header)" },
    header: { type: "string", description: "Header name (header auth), e.g. X-Api-Key" },
    prefix: { type: "string", description: "Text put before the value (header auth), e.g. 'Token '" },
    username: { type: "string", description: "User name (basic auth; the credential is the password)" },
    description: { type: "string", description: "What the service is, for people reading the list" },
    disabled: { type: "boolean", description: "Add it disabled" },
    ...allowArg,
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const auth = buildAuth(args);
    const allow = collectFlagValues(rawArgs, "allow");
    const rules = allow.length ? parseAllowFlags(allow) : undefined;
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const body = { host: args.host, description: args.description, auth, enabled: !args.disabled, rules };
    const svc = await hintOnForbidden(ctx.client.request<ServiceView>("POST", vaultPath(vault, "services"), { body, vault }), SECRET_WRITE_HINT);
    if (args.json) return printJson(svc);
    printLine(`Added ${svc?.host ?? args.host} to vault ${vault} (${describeAuth(auth)}${args.disabled ? ", disabled" : ""}).`);
    printLine(`Agents may use ${describeAllowed(svc?.rules ?? rules)}.`);
  },
});
addHelpFooter(add, () => ADD_EXAMPLES);

const update = defineCommand({
  meta: { name: "update", description: "Change a service's rules (allowed methods and paths) or description" },
  args: {
    ...hostArg,
    ...allowArg,
    "no-rules": { type: "boolean", description: "Remove the rules: every method and path allowed again" },
    description: { type: "string", description: "New description" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const allow = collectFlagValues(rawArgs, "allow");
    // citty reads --no-rules as rules=false.
    const clear = (args as { rules?: boolean }).rules === false;
    if (clear && allow.length) throw new CliFailure("--allow and --no-rules contradict each other", "give --allow to replace the rules, or --no-rules to remove them", 2);
    if (!clear && !allow.length && args.description === undefined) {
      throw new CliFailure("nothing to change", `give --allow to replace the rules (${ALLOW_EXAMPLE}), --no-rules to remove them, or --description`, 2);
    }
    const body: Record<string, unknown> = {};
    if (clear) body.rules = null;
    if (allow.length) body.rules = parseAllowFlags(allow);
    if (args.description !== undefined) body.description = args.description;
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const svc = await hintOnForbidden(ctx.client.request<ServiceView>("PATCH", vaultPath(vault, "services", args.host), { body, vault }), SECRET_WRITE_HINT);
    if (args.json) return printJson(svc);
    printLine(`Updated ${svc.host} in vault ${vault}: agents may use ${describeAllowed(svc.rules)}.`);
  },
});
addHelpFooter(update, () => UPDATE_EXAMPLES);

const list = defineCommand({
  meta: { name: "list", description: "List the vault's services" },
  args: { ...vaultArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const { services } = await ctx.client.request<{ services: ServiceView[] }>("GET", vaultPath(vault, "services"), { vault });
    if (args.json) return printJson(services);
    printTable(
      services,
      [
        { title: "HOST", value: (s) => s.host },
        { title: "AUTH", value: (s) => describeAuth(s.auth) },
        { title: "ENABLED", value: (s) => (s.enabled ? "yes" : "no") },
        { title: "DESCRIPTION", value: (s) => s.description ?? "" },
        { title: "ALLOWS", value: (s) => describeAllowed(s.rules) },
      ],
      `No services in vault ${vault}. Add one with: broker service add <host> --auth bearer --token <KEY>`,
    );
  },
});

function toggle(enabled: boolean) {
  return defineCommand({
    meta: { name: enabled ? "enable" : "disable", description: enabled ? "Let agents use the service again" : "Stop injecting for a host without removing it" },
    args: { ...hostArg, ...vaultArg },
    async run({ args }) {
      const ctx = openContext();
      const vault = pickVault(ctx, args.vault);
      await hintOnForbidden(ctx.client.request("PATCH", vaultPath(vault, "services", args.host), { body: { enabled }, vault }), SECRET_WRITE_HINT);
      printLine(`${enabled ? "Enabled" : "Disabled"} ${args.host} in vault ${vault}.`);
    },
  });
}

const remove = defineCommand({
  meta: { name: "remove", description: "Remove a service from the vault" },
  args: { ...hostArg, ...vaultArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    await hintOnForbidden(ctx.client.request("DELETE", vaultPath(vault, "services", args.host), { vault }), SECRET_WRITE_HINT);
    printLine(`Removed ${args.host} from vault ${vault}.`);
  },
});

export default defineCommand({
  meta: { name: "service", description: "Add, list, update, enable, disable and remove a vault's services" },
  subCommands: { add, list, update, enable: toggle(true), disable: toggle(false), remove },
});
