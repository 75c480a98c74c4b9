// `broker workload-binding add|list|remove` (issue 39; docs/api.md, Workload identity): the bindings from a trusted
// issuer's claim conditions to a vault and a role (the issuers themselves: workload-issuer.ts). The instance owner
// only. Agents then sign in with `broker vault run --identity-token-file`.

import { defineCommand } from "citty";
import type { WorkloadBindingListBody, WorkloadBindingViewBody, WorkloadIssuerListBody } from "../../contract/index.ts";
import { apiPath, CliFailure, jsonArg, openContext, printJson, printLine, printTable } from "../kit/index.ts";

export const OWNER_HINT = "only the instance owner manages workload issuers and bindings";

/** `--claim path=pattern`, repeatable: a path named twice becomes a list (any of its patterns matches). */
export function readClaims(rawArgs: readonly string[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i]!;
    if (a === "--") break;
    const value = a === "--claim" ? rawArgs[++i] : a.startsWith("--claim=") ? a.slice("--claim=".length) : undefined;
    if (value === undefined) continue;
    const eq = value.indexOf("=");
    if (eq <= 0) throw new CliFailure("--claim takes path=pattern, e.g. --claim repository=org/repo", undefined, 2);
    const [path, pattern] = [value.slice(0, eq), value.slice(eq + 1)];
    const had = out[path];
    out[path] = had === undefined ? pattern : [...(typeof had === "string" ? [had] : had), pattern];
  }
  return out;
}

function describeConditions(c: WorkloadBindingViewBody["conditions"]): string {
  return Object.entries(c)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : v.join("|")}`)
    .join(" ");
}

const bindingAdd = defineCommand({
  meta: {
    name: "add",
    description:
      "Bind claim conditions to a vault and a role (owner). Example: broker workload-binding add github deploy --vault prod --claim repository=org/repo --claim ref=refs/heads/main",
  },
  args: {
    issuer: { type: "positional", description: "The issuer's name", required: true },
    name: { type: "positional", description: "The binding's name (1-32 lower-case letters, digits, -)", required: true },
    vault: { type: "string", description: "The vault its sessions are bound to", required: true },
    claim: { type: "string", description: "path=pattern (exact, or a glob with * and ?); repeat it; a path given twice matches either", required: true },
    role: { type: "string", description: "proxy (default), member or admin" },
    "max-session": { type: "string", description: "Longest session in seconds (60-86400, default 3600); never past the token's exp" },
    ...jsonArg,
  },
  async run({ args, rawArgs }) {
    const max = args["max-session"] === undefined ? undefined : Number(args["max-session"]);
    if (max !== undefined && !Number.isInteger(max)) throw new CliFailure("--max-session must be a whole number of seconds", undefined, 2);
    const body = {
      name: args.name,
      vault: args.vault,
      conditions: readClaims(rawArgs),
      ...(args.role ? { role: args.role } : {}),
      ...(max !== undefined ? { max_session_seconds: max } : {}),
    };
    const ctx = openContext();
    const b = await ctx.client.request<WorkloadBindingViewBody>("POST", apiPath("v1", "workload-issuers", args.issuer, "bindings"), {
      body,
      hints: { 403: OWNER_HINT },
    });
    if (args.json) return printJson(b);
    printLine(`Bound ${describeConditions(b.conditions)} to vault ${b.vault} as ${b.role}; its workloads act as agent ${b.agent}.`);
  },
});

const bindingList = defineCommand({
  meta: { name: "list", description: "List the bindings of one issuer (or of all), in the order they are tried (owner)" },
  args: { issuer: { type: "positional", description: "The issuer's name (default: every issuer)", required: false }, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const hints = { 403: OWNER_HINT };
    const names = args.issuer
      ? [args.issuer]
      : (await ctx.client.request<WorkloadIssuerListBody>("GET", apiPath("v1", "workload-issuers"), { hints })).issuers.map((i) => i.name);
    const bindings: WorkloadBindingViewBody[] = [];
    for (const name of names) {
      bindings.push(...(await ctx.client.request<WorkloadBindingListBody>("GET", apiPath("v1", "workload-issuers", name, "bindings"), { hints })).bindings);
    }
    if (args.json) return printJson(bindings);
    printTable(
      bindings,
      [
        { title: "ISSUER", value: (b) => b.issuer },
        { title: "NAME", value: (b) => b.name },
        { title: "CONDITIONS", value: (b) => describeConditions(b.conditions), max: 80 },
        { title: "VAULT", value: (b) => b.vault },
        { title: "ROLE", value: (b) => b.role },
        { title: "MAX SESSION", value: (b) => `${b.max_session_seconds}s` },
        { title: "AGENT", value: (b) => b.agent ?? "revoked" },
      ],
      `No bindings. Add one with: broker workload-binding add ${args.issuer ?? "<issuer>"} <name> --vault V --claim sub=…`,
    );
  },
});

const bindingRemove = defineCommand({
  meta: { name: "remove", description: "Remove a binding, its agent and every session exchanged under it (owner)" },
  args: {
    issuer: { type: "positional", description: "The issuer's name", required: true },
    name: { type: "positional", description: "The binding's name", required: true },
  },
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", apiPath("v1", "workload-issuers", args.issuer, "bindings", args.name), { hints: { 403: OWNER_HINT } });
    printLine(`Removed binding ${args.name} of ${args.issuer} and its sessions.`);
  },
});

export const workloadBindingCommand = defineCommand({
  meta: { name: "workload-binding", description: "Which workloads' tokens get which vault and role" },
  subCommands: { add: bindingAdd, list: bindingList, remove: bindingRemove },
});
