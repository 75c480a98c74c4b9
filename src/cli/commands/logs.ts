// `broker logs [--follow]`: the vault's audit records (one per proxied request), newest last.
// Records hold names and numbers only; there is nothing secret to print.

import { defineCommand } from "citty";
import { jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVaultOrOnly } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { formatTable, hasCutCells, printJson, printLine, printNote } from "../kit/index.ts";
import type { AuditPageAnswerBody } from "../../contract/index.ts";

/** One audit record. Servers older than principal_name, contained, approved_by_name and credential_refs omit them: the columns fall back. */
type LogRecord = AuditPageAnswerBody["logs"][number];

const COLUMNS = [
  { title: "TIME", value: (r: LogRecord) => r.time },
  { title: "WHO", value: (r: LogRecord) => r.principal_name ?? r.principal, max: 32 },
  { title: "WORKLOAD", value: (r: LogRecord) => r.workload?.subject ?? "", max: 48 },
  { title: "VIA", value: (r: LogRecord) => (r.contained ? `${r.ingress},contained` : r.ingress) },
  { title: "REQUEST", value: (r: LogRecord) => `${r.method} ${r.host}${r.path}`, max: 60 },
  { title: "STATUS", value: (r: LogRecord) => String(r.status) },
  { title: "MS", value: (r: LogRecord) => String(r.duration_ms) },
  { title: "KEYS", value: (r: LogRecord) => r.credential_keys.join(","), max: 32 },
  { title: "REFS", value: (r: LogRecord) => (r.credential_refs ?? []).join(", "), max: 48 },
  { title: "APPROVED BY", value: (r: LogRecord) => r.approved_by_name ?? "", max: 32 },
  { title: "TOKENS", value: (r: LogRecord) => (r.llm ? `${r.llm.input_tokens}+${r.llm.output_tokens}` : "") },
  { title: "COST", value: (r: LogRecord) => (r.llm ? (r.llm.cost === null ? "unpriced" : formatCost(r.llm.cost, r.llm.currency)) : "") },
  { title: "ERROR", value: (r: LogRecord) => r.error ?? "", max: 80 },
];

/** Money as people read it: "0.0123 USD" (cost per call is often below a cent, so up to 6 decimals, trailing zeros cut). */
function formatCost(amount: number, currency: string): string {
  return `${amount.toFixed(6).replace(/\.?0+$/, "")} ${currency}`;
}

export default defineCommand({
  meta: { name: "logs", description: "Show the vault's audit log of proxied requests (--follow to keep watching)" },
  args: {
    follow: { type: "boolean", alias: "f", description: "Keep printing new records as they arrive (Ctrl-C to stop)" },
    limit: { type: "string", description: "How many recent records to show first (default 50, at most 1000)" },
    host: { type: "string", description: "Only records for this host (as in the REQUEST column, without the path)" },
    who: { type: "string", description: "Only records made by this agent (its name) or person (their email)" },
    "would-refuse": { type: "boolean", description: "Only requests report mode let through that the policy would refuse (error would_refuse:…)" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const limit = args.limit === undefined ? 50 : Number(args.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new CliFailure("--limit must be a whole number from 1 to 1000", undefined, 2);
    const ctx = openContext();
    const vault = await pickVaultOrOnly(ctx, args.vault);
    const filter =
      (args.host ? `&host=${encodeURIComponent(args.host)}` : "") +
      (args.who ? `&principal=${encodeURIComponent(args.who)}` : "") +
      (args["would-refuse"] ? "&would_refuse=true" : "");
    const first = await ctx.client.request<AuditPageAnswerBody>("GET", `${vaultPath(vault, "logs")}?limit=${limit}${filter}`, { vault });
    const shown = first.logs.reverse();
    // The REFS column only when the first page has a credential by reference, TOKENS and COST only when it has an LLM
    // call, WORKLOAD only when it has a workload's request: most vaults have none of them, and they are wide.
    const refs = shown.some((r) => (r.credential_refs ?? []).length > 0);
    const llm = shown.some((r) => r.llm);
    const workload = shown.some((r) => r.workload);
    const columns = COLUMNS.filter(
      (c) => (c.title !== "REFS" || refs) && ((c.title !== "TOKENS" && c.title !== "COST") || llm) && (c.title !== "WORKLOAD" || workload),
    );
    const print = (rows: LogRecord[], header: boolean) => {
      if (args.json) return rows.forEach((r) => printLine(JSON.stringify(r)));
      const table = formatTable(rows, columns).split("\n");
      for (const line of header ? table : table.slice(1)) printLine(line);
      if (header && hasCutCells(rows, columns)) printNote("(long cells are cut with …; --json shows every value in full)");
    };
    if (!args.follow) {
      if (args.json) return printJson(shown);
      if (shown.length === 0) return printLine(`No audit records in vault ${vault} yet.`);
      return print(shown, true);
    }
    print(shown, true);
    let after = shown.at(-1)?.id ?? 0;
    for (;;) {
      await Bun.sleep(1000);
      const next = await ctx.client.request<AuditPageAnswerBody>("GET", `${vaultPath(vault, "logs")}?after=${after}&limit=1000${filter}`, { vault });
      if (next.logs.length === 0) continue;
      print(next.logs, false);
      after = next.logs.at(-1)!.id;
    }
  },
});
