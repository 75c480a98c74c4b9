// `broker service add|list|update|enable|disable|remove`: which hosts a vault's agents may reach,
// which credential key is injected for each, and optionally which methods and paths (rules), some
// of them held for a person's approval of each request (--approve).
// Services name keys, never values. A service decides where a stored value is sent, so only
// people change them; agents file proposals instead.

import { defineCommand } from "citty";
import { keepOthersAllowed } from "../../policy/index.ts";
import type { ServiceAnswerBody, ServiceListBody } from "../../contract/index.ts";
import { jsonArg, limitArg, parseListLimit, readPages, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { CliFailure, hintOnForbidden, SECRET_WRITE_HINT } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { printJson, printLine, printTable } from "../kit/index.ts";
import { AUTH_EXAMPLES, AUTH_NOTES, authKeyNames, buildAuth, describeAuth, MINTED_AUTH_ARGS, nameAuthFlag, type ServiceAuth } from "../kit/index.ts";
import { namesCatalogueTemplate, refuseStrayTemplateFlags, TEMPLATE_ARGS, TEMPLATE_EXAMPLES, templateFields } from "../kit/index.ts";
import {
  ADD_RULES_EXAMPLE,
  ADD_RULES_NOTES,
  ALLOW_EXAMPLE,
  allowArg,
  approveArg,
  collectRuleFlags,
  describeAllowed,
  parseRuleFlags,
  rulesFromFlags,
  rulesModeArg,
  rulesModeLine,
  warnIfNoKeys,
  UPDATE_EXAMPLES,
} from "../kit/index.ts";

/** A 404 on one host: the command that lists the hosts that do exist. */
const listHosts = (vault: string) => ({ 404: `\`broker service list\` shows the hosts in vault ${vault}` });

const hostArg = { host: { type: "positional", description: "Host, host:port, or *.domain", required: true } } as const;

/** The flags that say how a credential is sent, shared by `add` and `update`. */
const AUTH_DETAIL_ARGS = {
  token: { type: "string", description: "Credential KEY to inject (bearer, basic, header, query, path)" },
  header: { type: "string", description: "Header name (header auth), e.g. X-Api-Key" },
  prefix: { type: "string", description: "Text put before the value (header auth), e.g. 'Token '" },
  username: { type: "string", description: "User name (basic auth; the credential is the password)" },
  param: { type: "string", description: "Query parameter that carries the credential (query auth), e.g. key" },
  template: {
    type: "string",
    description:
      "A catalogue template's id (see `broker template list`), or with --auth path: the path before the agent's, {value} for the credential, e.g. /bot{value}",
  },
  ...MINTED_AUTH_ARGS,
} as const;

const add = defineCommand({
  meta: { name: "add", description: "Allow a host and say how its credential is injected, or add one from a template" },
  args: {
    host: { type: "positional", description: "Host, host:port, or *.domain (with --template: optional, one the template serves)", required: false },
    // A string, not an enum: ten types in the usage line would push every option off the screen.
    auth: { type: "string", valueHint: "type", description: "How the credential is sent: one of the types listed below (not with --template <id>)" },
    ...AUTH_DETAIL_ARGS,
    ...TEMPLATE_ARGS,
    description: { type: "string", description: "What the service is, for people reading the list" },
    disabled: { type: "boolean", description: "Add it disabled" },
    ...allowArg,
    ...approveArg,
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const fromTemplate = namesCatalogueTemplate(args);
    if (!fromTemplate) refuseStrayTemplateFlags(args);
    if (!fromTemplate && !args.host)
      throw new CliFailure("name the host, or a template: --template <id>", "broker service add <host> --auth <type> …, or broker template list", 2);
    if (!fromTemplate && !args.auth)
      throw new CliFailure("--auth is required (or add from a template: --template <id>)", "broker template list shows the templates", 2);
    if (args.host) checkHost(args.host);
    const auth = fromTemplate ? undefined : buildAuth({ ...args, auth: args.auth ?? "" });
    const ruleFlags = collectRuleFlags(rawArgs);
    if (fromTemplate && ruleFlags.length)
      throw new CliFailure("--allow and --approve do not go with --template <id>: its --operations give the rules", undefined, 2);
    // --approve alone holds those requests and keeps the rest allowed (a new service allows everything).
    const rules = ruleFlags.length ? keepOthersAllowed(parseRuleFlags(ruleFlags), false) : undefined;
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const how = fromTemplate ? templateFields(args) : { auth, rules };
    const body = { host: args.host, description: args.description, enabled: !args.disabled, ...how };
    const svc = await hintOnForbidden(
      nameAuthFlag(ctx.client.request<ServiceAnswerBody>("POST", vaultPath(vault, "services"), { body, vault }), { ...args, auth: args.auth ?? "" }),
      SECRET_WRITE_HINT,
    );
    await warnIfNoKeys(ctx.client, vault, authKeyNames(svc.auth as ServiceAuth));
    if (args.json) return printJson(svc);
    const said = svc.template?.said ?? describeAuth(svc.auth as ServiceAuth);
    printLine(`Added ${svc.host} to vault ${vault} (${said}${args.disabled ? ", disabled" : ""}).`);
    printLine(`Agents may use ${describeAllowed(svc.rules)}.`);
  },
});
/** A URL where a host belongs: name the exact host to type instead. */
export function checkHost(raw: string): void {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) return;
  const url = URL.canParse(raw) ? new URL(raw) : undefined;
  const host = url
    ? url.host
    : raw
        .replace(/^[a-z][a-z0-9+.-]*:\/\//i, "")
        .split(/[/?#]/)[0]!
        .replace(/^.*@/, "");
  // A pasted URL may carry a credential (user:password@, ?key=…): only its scheme and host are repeated.
  const shown = `${url ? url.protocol : `${raw.split(":")[0]}:`}//${host}${url && url.pathname === "/" && !url.search && !url.hash ? "" : "/…"}`;
  throw new CliFailure(
    `"${shown}" is a URL, not a host`,
    `drop the scheme${/\/./.test(raw.replace(/^[^:]+:\/\//, "")) ? " and the path" : ""}: broker service add ${host} …`,
    2,
  );
}

addHelpFooter(add, () => `EXAMPLES\n\n${TEMPLATE_EXAMPLES}\n${AUTH_EXAMPLES}\n${ADD_RULES_EXAMPLE}\n\n${AUTH_NOTES}\n\n${ADD_RULES_NOTES}`);

const update = defineCommand({
  meta: { name: "update", description: "Change a service's auth (how its credential is sent), rules or description" },
  args: {
    ...hostArg,
    auth: { type: "string", valueHint: "type", description: "A new auth type with its flags, as for `service add` (the whole auth is replaced)" },
    ...AUTH_DETAIL_ARGS,
    ...TEMPLATE_ARGS,
    ...allowArg,
    ...approveArg,
    "no-rules": { type: "boolean", description: "Remove the rules: every method and path allowed again, none held for approval" },
    ...rulesModeArg,
    description: { type: "string", description: "New description" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const ruleFlags = collectRuleFlags(rawArgs);
    // citty reads --no-rules as rules=false.
    const clear = (args as { rules?: boolean }).rules === false;
    if (clear && ruleFlags.length) {
      const given = ruleFlags[0]!.flag;
      throw new CliFailure(
        `--${given} and --no-rules contradict each other`,
        `give --allow (and --approve) to replace the rules, or --no-rules to remove them`,
        2,
      );
    }
    // --template <id> [--operations …]: auth and rules from the catalogue again (a catalogue update applied, or other operations).
    const fromTemplate = namesCatalogueTemplate(args);
    if (!fromTemplate) refuseStrayTemplateFlags(args);
    if (fromTemplate && (clear || ruleFlags.length))
      throw new CliFailure("--template <id> gives the rules; leave out --allow, --approve and --no-rules", undefined, 2);
    const detail = (Object.keys(AUTH_DETAIL_ARGS) as (keyof typeof AUTH_DETAIL_ARGS)[]).find(
      (f) => args[f] !== undefined && !(f === "template" && fromTemplate),
    );
    if (args.auth === undefined && detail)
      throw new CliFailure(
        `--${detail} changes the auth, which needs --auth`,
        `give the whole auth again: broker service update ${args.host} --auth <type> --${detail} …`,
        2,
      );
    const mode = args["rules-mode"];
    if (!fromTemplate && !clear && !ruleFlags.length && args.description === undefined && args.auth === undefined && mode === undefined) {
      throw new CliFailure(
        "nothing to change",
        `give --auth with its flags, --allow or --approve to replace the rules (${ALLOW_EXAMPLE}), --no-rules to remove them, --rules-mode, or --description`,
        2,
      );
    }
    const body: Record<string, unknown> = fromTemplate ? templateFields(args) : {};
    const auth = args.auth === undefined ? undefined : buildAuth({ ...args, auth: args.auth });
    if (auth) body.auth = auth;
    if (clear) body.rules = null;
    if (args.description !== undefined) body.description = args.description;
    if (mode !== undefined) body.rules_mode = mode === "vault" ? null : mode;
    const typedRules = ruleFlags.length ? parseRuleFlags(ruleFlags) : undefined; // a usage error before any request
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    if (typedRules) body.rules = await rulesFromFlags(ctx.client, vault, args.host, typedRules);
    const patched = ctx.client.request<ServiceAnswerBody>("PATCH", vaultPath(vault, "services", args.host), { body, vault, hints: listHosts(vault) });
    const svc = await hintOnForbidden(auth ? nameAuthFlag(patched, { ...args, auth: args.auth! }) : patched, SECRET_WRITE_HINT);
    if (auth) await warnIfNoKeys(ctx.client, vault, authKeyNames(auth));
    if (args.json) return printJson(svc);
    printLine(`Updated ${svc.host} in vault ${vault}${auth ? ` (${describeAuth(auth)})` : ""}: agents may use ${describeAllowed(svc.rules)}.`);
    if (mode !== undefined) printLine(rulesModeLine(svc.rules_mode));
  },
});
addHelpFooter(update, () => UPDATE_EXAMPLES);

const list = defineCommand({
  meta: { name: "list", description: "List the vault's services, in host order" },
  args: { ...vaultArg, ...limitArg, ...jsonArg },
  async run({ args }) {
    const max = parseListLimit(args.limit);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const page = (q: string) => ctx.client.request<ServiceListBody>("GET", `${vaultPath(vault, "services")}?${q}`, { vault });
    const services = await readPages(page, (b) => b.services, "after", max);
    if (args.json) return printJson(services);
    printTable(
      services,
      [
        { title: "HOST", value: (s) => s.host },
        { title: "AUTH", value: (s) => describeAuth(s.auth) },
        { title: "ENABLED", value: (s) => (s.enabled ? "yes" : "no") },
        { title: "DESCRIPTION", value: (s) => s.description ?? "" },
        {
          title: "ALLOWS",
          value: (s) =>
            (s.template
              ? `${s.template.said}${s.template.catalogue_rules ? " (the catalogue's rules changed: see service update --help)" : ""}`
              : describeAllowed(s.rules)) + (s.rules_mode ? ` [rules: ${s.rules_mode}]` : ""),
        },
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
      await hintOnForbidden(
        ctx.client.request("PATCH", vaultPath(vault, "services", args.host), { body: { enabled }, vault, hints: listHosts(vault) }),
        SECRET_WRITE_HINT,
      );
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
    await hintOnForbidden(ctx.client.request("DELETE", vaultPath(vault, "services", args.host), { vault, hints: listHosts(vault) }), SECRET_WRITE_HINT);
    printLine(`Removed ${args.host} from vault ${vault}.`);
  },
});

export default defineCommand({
  meta: { name: "service", description: "Add, list, update, enable, disable and remove a vault's services" },
  subCommands: { add, list, update, enable: toggle(true), disable: toggle(false), remove },
});
