// `broker budget set|list|reset|remove`: how much a vault's agents may spend, in requests, LLM tokens and money per
// period (issue 38; docs/api.md, Budgets). Human admins set, reset and remove; readers of the vault's logs list.

import { defineCommand } from "citty";
import type { BudgetListBody, BudgetViewBody } from "../../contract/index.ts";
import { CliFailure, jsonArg, openContext, pickVault, printJson, printLine, printTable, vaultArg, vaultPath } from "../kit/index.ts";

const ADMIN_HINT = "only a human admin of the vault sets its budgets (agents and `vault run` sessions cannot); ask one";
const LIST_HINT = "`broker budget list` shows the vault's budgets";

/** A whole number from a flag, or undefined when the flag is absent. */
function whole(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new CliFailure(`--${flag} must be a whole number`, undefined, 2);
  return Number(v);
}

function describeBudget(b: BudgetViewBody): string {
  const l = b.limits;
  const parts = [
    l.requests !== null && `${b.used.requests}/${l.requests} requests`,
    l.input_tokens !== null && `${b.used.input_tokens}/${l.input_tokens} input tokens`,
    l.output_tokens !== null && `${b.used.output_tokens}/${l.output_tokens} output tokens`,
    l.total_tokens !== null && `${b.used.total_tokens}/${l.total_tokens} tokens`,
    l.cost !== null && `${(b.used.cost ?? 0).toFixed(2)}/${l.cost.toFixed(2)} ${b.currency}`,
  ].filter(Boolean);
  return parts.join(", ");
}

const set = defineCommand({
  meta: {
    name: "set",
    description:
      "Set a budget (create or replace; what it counted this period stays) (human admin). " +
      "Example: broker budget set daily-llm --period day --tokens 200000 --cost 20 --soft 80 --soft-action approve",
  },
  args: {
    name: { type: "positional", description: "The budget's name (lower-case letters, digits, . _ -)", required: true },
    period: { type: "string", description: "hour, day, week, month or none (default day)" },
    agent: { type: "string", description: "Count only this agent's requests (its sessions too)" },
    service: { type: "string", description: "Count only this service's requests (its host pattern)" },
    hosts: { type: "string", description: "Count only requests to these hosts (comma-separated)" },
    template: { type: "string", description: "Count only requests to a catalogue template's hosts (see broker template list)" },
    requests: { type: "string", description: "At most this many requests" },
    tokens: { type: "string", description: "At most this many LLM tokens (input and output)" },
    "input-tokens": { type: "string", description: "At most this many input tokens" },
    "output-tokens": { type: "string", description: "At most this many output tokens" },
    cost: { type: "string", description: "At most this much money, in the price table's currency (USD)" },
    soft: { type: "string", description: "Percent of a limit at which to notify (1-99)" },
    "soft-action": { type: "string", description: "notify (a webhook, the default) or approve (requests held for a person)" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const scopes = [args.agent && "agent", args.service && "service", (args.hosts || args.template) && "hosts"].filter(Boolean) as string[];
    if (scopes.length > 1 || (args.hosts && args.template))
      throw new CliFailure("give at most one of --agent, --service, --hosts and --template", undefined, 2);
    const cost = args.cost === undefined ? undefined : Number(args.cost);
    if (cost !== undefined && !(Number.isFinite(cost) && cost > 0)) throw new CliFailure("--cost must be an amount above 0, e.g. 20 or 12.50", undefined, 2);
    const body = {
      scope: scopes[0] ?? "vault",
      ...(args.agent && { agent: args.agent }),
      ...(args.service && { service: args.service }),
      ...(args.hosts && {
        hosts: args.hosts
          .split(",")
          .map((h: string) => h.trim())
          .filter(Boolean),
      }),
      ...(args.template && { template: args.template }),
      period: args.period ?? "day",
      limits: {
        requests: whole("requests", args.requests),
        total_tokens: whole("tokens", args.tokens),
        input_tokens: whole("input-tokens", args["input-tokens"]),
        output_tokens: whole("output-tokens", args["output-tokens"]),
        cost,
      },
      ...(args.soft !== undefined && { soft_percent: whole("soft", args.soft) }),
      ...(args["soft-action"] !== undefined && { soft_action: args["soft-action"] }),
    };
    if (Object.values(body.limits).every((v) => v === undefined))
      throw new CliFailure("give at least one limit: --requests, --tokens, --input-tokens, --output-tokens or --cost", undefined, 2);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const b = await ctx.client.request<BudgetViewBody>("PUT", vaultPath(vault, "budgets", args.name), { body, vault, hints: { 403: ADMIN_HINT } });
    if (args.json) return printJson(b);
    printLine(
      `Budget ${b.name} of vault ${vault}: ${describeBudget(b)} ${b.period === "none" ? "in all" : `per ${b.period}`}${b.resets_at ? ` (resets ${b.resets_at})` : ""}.`,
    );
  },
});

const list = defineCommand({
  meta: { name: "list", description: "List the vault's budgets with what each used this period and when it resets" },
  args: { ...vaultArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const res = await ctx.client.request<BudgetListBody>("GET", vaultPath(vault, "budgets"), { vault });
    if (args.json) return printJson(res.budgets);
    printTable(
      res.budgets,
      [
        { title: "NAME", value: (b) => b.name },
        {
          title: "COUNTS",
          value: (b) =>
            b.scope === "vault"
              ? "the vault"
              : b.scope === "agent"
                ? `agent ${b.agent}`
                : b.scope === "service"
                  ? `service ${b.service}`
                  : (b.hosts ?? []).join(","),
          max: 40,
        },
        { title: "PERIOD", value: (b) => b.period },
        { title: "USED / LIMIT", value: (b) => describeBudget(b), max: 70 },
        { title: "STATE", value: (b) => b.state },
        { title: "RESETS", value: (b) => b.resets_at ?? "never" },
      ],
      `Vault ${vault} has no budgets. Add one: broker budget set NAME --tokens 200000`,
    );
  },
});

const reset = defineCommand({
  meta: { name: "reset", description: "Start a budget's current period again from nothing (human admin)" },
  args: { name: { type: "positional", description: "The budget", required: true }, ...vaultArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const b = await ctx.client.request<BudgetViewBody>("POST", vaultPath(vault, "budgets", args.name, "reset"), {
      vault,
      hints: { 403: ADMIN_HINT, 404: LIST_HINT },
    });
    if (args.json) return printJson(b);
    printLine(`Budget ${b.name} of vault ${vault} counts again from nothing this ${b.period === "none" ? "time" : b.period}.`);
  },
});

const remove = defineCommand({
  meta: { name: "remove", description: "Remove a budget (human admin)" },
  args: { name: { type: "positional", description: "The budget", required: true }, ...vaultArg },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    await ctx.client.request("DELETE", vaultPath(vault, "budgets", args.name), { vault, hints: { 403: ADMIN_HINT, 404: LIST_HINT } });
    printLine(`Removed budget ${args.name} from vault ${vault}.`);
  },
});

export default defineCommand({
  meta: { name: "budget", description: "How much the vault's agents may spend: requests, LLM tokens and money per period" },
  subCommands: { set, list, reset, remove },
});
