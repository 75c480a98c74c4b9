// `broker request list|show|approve|deny`: the human side of service rules with "approve": "each".
// The broker holds each request such a rule matches (the agent gets 428 approval_required); a person
// reads the request here exactly as it would be sent (method, URL, headers, body; the credential is
// added by the broker and never shown) and approves or denies that one request. An approval lets
// the agent's identical retry through once. Only a person's own login decides: agent tokens and
// `vault run` sessions are refused by the server, and the hint says so.
// Everything shown was written by an agent: control characters are neutralised before printing.

import { defineCommand } from "citty";
import { layoutJson } from "../../workflows/index.ts";
import type { RequestApprovalAnswerBody, RequestApprovalListBody } from "../../contract/index.ts";
import { requesterPrefix } from "../../identity/index.ts";
import { jsonArg, limitArg, parseListLimit, readPages, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { formatTime, hasCutCells, printJson, printLine, printNote, printTable, type Column } from "../kit/index.ts";

const STATES = ["pending", "approved", "denied", "used", "expired"];
const ID = /^apr_[A-Za-z0-9_-]{16}$/;
const idArg = {
  id: { type: "positional", description: "The held request's id (apr_…), as the agent's 428 answer and `broker request list` show it", required: true },
} as const;

/** A person's login is what decides; say so instead of "ask an admin for a bigger role". */
const DECIDE_FORBIDDEN =
  "only a person decides held requests, with their own login (`broker auth login`) as a member or admin of the vault; " +
  "an agent token or a `broker vault run` session cannot, and a viewer or proxy role cannot either";

function checkId(raw: string): string {
  const id = raw.trim();
  if (!ID.test(id))
    throw new CliFailure(
      `"${clean(raw)}" is not a held request's id`,
      "ids look like apr_ followed by 16 letters, digits, - or _; `broker request list` shows them",
      2,
    );
  return id;
}

function hintsFor(id: string, vault: string): Record<number, string> {
  return {
    404: `there is no held request ${id} in vault ${vault}: \`broker request list --vault ${vault}\` shows them (pass --vault if it is in another vault)`,
    409: `nothing changed; \`broker request show ${id}\` shows how it was decided (a request can be decided once, and only until it expires)`,
  };
}

const list = defineCommand({
  meta: { name: "list", description: "List the vault's held requests, those awaiting a decision first" },
  args: {
    state: { type: "string", description: `Only requests in this state: ${STATES.join(", ")}` },
    ...vaultArg,
    ...limitArg,
    ...jsonArg,
  },
  async run({ args }) {
    if (args.state !== undefined && !STATES.includes(args.state)) {
      throw new CliFailure(`--state: "${clean(args.state)}" is not a held request's state`, `use one of ${STATES.join(", ")}`, 2);
    }
    const max = parseListLimit(args.limit);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const hints = {
      403: "the list is for the vault's members and admins, logged in as themselves (`broker auth login`); an agent polls its own request at the poll_url of its 428 answer",
    };
    const page = (q: string) => ctx.client.request<RequestApprovalListBody>("GET", `${vaultPath(vault, "request-approvals")}?${q}`, { vault, hints });
    const all = await readPages(page, (b) => b.request_approvals, "after", args.state === undefined ? max : undefined);
    const rows = all.filter((r) => args.state === undefined || r.state === args.state).slice(0, max);
    if (args.json) return printJson(rows);
    const now = Date.now();
    const columns: Column<RequestApprovalAnswerBody>[] = [
      { title: "ID", value: (r) => r.id },
      { title: "STATE", value: (r) => r.state },
      { title: "REQUEST", value: (r) => clean(`${r.method} ${r.url}`), max: 70 },
      { title: "WHO", value: (r) => clean(r.requested_by_name), max: 24 },
      { title: "ASKED", value: (r) => `${span(now - Date.parse(r.created_at))} ago` },
      { title: "EXPIRES", value: (r) => (r.state === "pending" || r.state === "approved" ? `in ${span(Date.parse(r.expires_at) - now)}` : "-") },
    ];
    printTable(rows, columns, `No ${args.state ? `${args.state} ` : ""}held requests in vault ${vault}.`);
    if (hasCutCells(rows, columns)) printNote("`broker request show <id>` shows a request in full.");
    const pending = rows.filter((r) => r.state === "pending").length;
    if (pending && !args.state)
      printNote(`${pending} awaiting a decision: \`broker request show <id>\`, then \`broker request approve <id>\` or \`broker request deny <id>\`.`);
  },
});

const show = defineCommand({
  meta: { name: "show", description: "Show a held request as it would be sent (method, URL, headers, body), who asked, and its state" },
  args: { ...idArg, ...vaultArg, ...jsonArg },
  async run({ args }) {
    const id = checkId(args.id);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const r = await ctx.client.request<RequestApprovalAnswerBody>("GET", vaultPath(vault, "request-approvals", id), { vault, hints: hintsFor(id, vault) });
    if (args.json) return printJson(r);
    printRequest(r);
    if (r.state === "pending") printLine(`\nApprove with: broker request approve ${r.id}   Deny with: broker request deny ${r.id}`);
  },
});

/** The request in full, as the person judges it; every agent-written text cleaned. */
function printRequest(r: RequestApprovalAnswerBody): void {
  printLine(`Held request ${r.id} in vault ${clean(r.vault)}: ${describeState(r)}`);
  printLine("");
  printLine(`  ${clean(r.method)} ${clean(r.url)}`);
  printLine(`  Service:      ${clean(r.service)} (the broker adds its credential; it is not shown)`);
  printLine(`  Requested by: ${requesterPrefix(r.requested_by_kind)}${clean(r.requested_by_name)}`);
  printLine(`  Asked:        ${formatTime(r.created_at)}`);
  if (r.decided_at) printLine(`  Decided:      ${formatTime(r.decided_at)}${r.decided_by ? ` by ${clean(r.decided_by)}` : ""}`);
  if (r.used_at) printLine(`  Sent:         ${formatTime(r.used_at)}`);
  printLine(`  Expires:      ${formatTime(r.expires_at)}`);
  printLine("\nHeaders:");
  if (r.headers.length === 0) printLine("  (none besides the credential)");
  for (const [name, value] of r.headers) printLine(`  ${clean(name)}: ${clean(value)}`);
  printLine(`\nBody (${r.body_bytes} bytes, SHA-256 ${r.body_sha256}):`);
  if (r.body_bytes === 0) printLine("  (empty)");
  else if (r.body === null) printLine("  (not text: not shown; the SHA-256 above is what the approval binds)");
  else {
    printLine(indent(prettyBody(r.body, r.body_truncated)));
    if (r.body_truncated)
      printLine(
        `  … (truncated: only the first ${Buffer.byteLength(r.body)} of ${r.body_bytes} bytes are shown; the approval binds the whole body by its SHA-256)`,
      );
  }
  printLine(`\nApproval page: ${clean(r.approval_url)}`);
}

function describeState(r: RequestApprovalAnswerBody): string {
  const words: Record<string, string> = {
    pending: `awaiting a decision (until ${formatTime(r.expires_at)})`,
    approved: `approved, not sent yet: the agent's next identical request is sent once, until ${formatTime(r.expires_at)}`,
    used: "approved and sent",
    denied: "denied (not sent)",
  };
  return words[r.state] ?? "expired (not sent)";
}

/** A whole JSON body laid out (every key, number and escape as sent; repeated keys named); other text as is. */
function prettyBody(body: string, truncated: boolean): string {
  const layout = truncated ? null : layoutJson(body);
  if (!layout) return body;
  const repeated = layout.duplicateKeys.length
    ? `(warning: the body names ${layout.duplicateKeys.join(", ")} more than once; services differ in which value they use)\n`
    : "";
  return repeated + layout.text;
}

function decide(decision: "approve" | "deny") {
  const approving = decision === "approve";
  return defineCommand({
    meta: {
      name: decision,
      description: approving
        ? "Approve one held request: the agent's next identical request is sent once (check it first with `broker request show <id>`)"
        : "Deny one held request: it is not sent, and the agent's identical retry gets 403 approval_denied",
    },
    args: { ...idArg, ...vaultArg, ...jsonArg },
    async run({ args }) {
      const id = checkId(args.id);
      const ctx = openContext();
      const vault = pickVault(ctx, args.vault);
      const r = await ctx.client.request<RequestApprovalAnswerBody>("POST", vaultPath(vault, "request-approvals", id, decision), {
        vault,
        hints: { ...hintsFor(id, vault), 403: DECIDE_FORBIDDEN },
      });
      if (args.json) return printJson(r);
      const what = clean(`${r.method} ${r.url}`);
      if (approving) printLine(`Approved: the agent's next identical request (${what}) will be sent once, until ${formatTime(r.expires_at)}.`);
      else printLine(`Denied: ${what} was not sent; the agent's identical retry gets 403 approval_denied until ${formatTime(r.expires_at)}.`);
    },
  });
}

const [approve, deny] = [decide("approve"), decide("deny")];
const EXAMPLES = `EXAMPLES

  broker request list
  broker request show apr_3kQ9vX2mLpR8sT1w
  broker request approve apr_3kQ9vX2mLpR8sT1w
  broker request deny apr_3kQ9vX2mLpR8sT1w --vault payments

A service rule added with \`broker service add|update <host> --approve "POST /v1/refunds"\` holds each
matching request: the agent gets 428 approval_required with the request's id and an approval link.
Approving lets the agent's identical retry (same method, URL, body and meaningful headers) through
once; a changed request is held again. Only people decide, with their own login.`;

for (const cmd of [list, show, approve, deny]) addHelpFooter(cmd, () => EXAMPLES);

/** 45 s, 3 min, 2 h 5 min. */
function span(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

/** Agent-written text: control characters (terminal escapes) shown as `?`, so it cannot rewrite the screen. */
function clean(text: string): string {
  return text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]/g, "?");
}

function indent(text: string): string {
  return text
    .split(/\r?\n/)
    .map((l) => `  ${clean(l)}`)
    .join("\n");
}

const root = defineCommand({
  meta: { name: "request", description: "Review, approve and deny single requests that a service rule holds for a person (--approve rules)" },
  subCommands: { list, show, approve, deny },
});
addHelpFooter(root, () => EXAMPLES);
export default root;
