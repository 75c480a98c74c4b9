// `broker proposal list|show|approve|reject`: the human side of the agent protocol. An agent
// files a proposal (hosts, credential slots); a person reviews it here and approves it, typing
// each slot's value at a hidden prompt or piping the values on stdin, one line per slot in order,
// or answering a slot with a secret store reference (`--ref KEY=<connection>:<path>#<field>`).
// Values travel inside Secret until the request body is serialised; they are never printed.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { jsonArg, limitArg, parseListLimit, readPages, vaultArg } from "../kit/index.ts";
import { apiPath, type Client, vaultPath } from "../kit/index.ts";
import { type CliContext, openContext, pickVault, pickVaultOrOnly } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import { promptHidden, stdinIsTerminal } from "../kit/index.ts";
import { checkWholePem, describeAuth, slotPrompt } from "../kit/index.ts";
import { nameRefFlag, refAnswers, type RefBody } from "../kit/index.ts";
import { requesterPrefix } from "../../identity/index.ts";
import type { CredentialListBody, ProposalAnswerBody, ProposalListBody } from "../../contract/index.ts";

const STATUSES = ["pending", "applied", "rejected", "expired"];
const idArg = { id: { type: "positional", description: "Proposal id (a number, as `broker proposal list` shows)", required: true } } as const;

function checkId(raw: string): string {
  if (!/^\d{1,15}$/.test(raw)) throw new CliFailure(`"${raw}" is not a proposal id`, "ids are numbers; `broker proposal list` shows them", 2);
  return raw;
}

/** The vault named by --vault, `vault use` or BROKER_VAULT, or undefined (a user session may read any of its vaults' proposals). */
function optionalVault(ctx: CliContext, flag: string | undefined): string | undefined {
  return flag?.trim() || ctx.state.vault || ctx.config.vault || undefined;
}

/** A 404 names the id and the command that lists the proposals that do exist. */
function proposalHints(id: string, vault: string | undefined): Record<number, string> {
  return { 404: `there is no proposal ${id} in ${vault ? `vault ${vault}` : "your vaults"}: \`broker proposal list\` shows them` };
}

function fetchProposal(client: Client, id: string, vault: string | undefined): Promise<ProposalAnswerBody> {
  return client.request<ProposalAnswerBody>("GET", apiPath("v1", "proposals", id), { vault, headerVault: true, hints: proposalHints(id, vault) });
}

const list = defineCommand({
  meta: { name: "list", description: "List a vault's proposals (newest first)" },
  args: {
    status: { type: "string", description: "Only proposals in this state: pending, applied, rejected or expired" },
    ...vaultArg,
    ...limitArg,
    ...jsonArg,
  },
  async run({ args }) {
    if (args.status !== undefined && !STATUSES.includes(args.status)) {
      throw new CliFailure(`--status: "${args.status}" is not a proposal state`, `use one of ${STATUSES.join(", ")}`, 2);
    }
    const max = parseListLimit(args.limit);
    const ctx = openContext();
    const vault = await pickVaultOrOnly(ctx, args.vault);
    const status = args.status ? `status=${encodeURIComponent(args.status)}&` : "";
    const page = (q: string) => ctx.client.request<ProposalListBody>("GET", `/v1/proposals?${status}${q}`, { vault, headerVault: true });
    const res = { proposals: await readPages(page, (b) => b.proposals, "before", max) };
    if (args.json) return printJson(res.proposals);
    const empty = `No ${args.status ?? ""}${args.status ? " " : ""}proposals in vault ${vault}.`;
    printTable(
      res.proposals,
      [
        { title: "ID", value: (p) => String(p.id) },
        { title: "STATUS", value: (p) => p.status },
        { title: "HOSTS", value: (p) => p.services.map((s) => s.host).join(", ") || "-" },
        { title: "KEYS", value: (p) => p.credentials.map((c) => c.key).join(", ") || "-" },
        { title: "CREATED", value: (p) => formatTime(p.created_at) },
      ],
      empty,
    );
  },
});

const show = defineCommand({
  meta: { name: "show", description: "Show a proposal: the agent's messages, hosts, credential slots (with where to get them) and status" },
  args: { ...idArg, ...vaultArg, ...jsonArg },
  async run({ args }) {
    const id = checkId(args.id);
    const ctx = openContext();
    const p = await fetchProposal(ctx.client, id, optionalVault(ctx, args.vault));
    if (args.json) return printJson(p);
    printLine(`Proposal ${p.id} in vault ${p.vault}: ${p.status}`);
    if (p.requested_by)
      printLine(
        `Requested by ${requesterPrefix(p.requested_by_kind ?? "unknown")}${clean(p.requested_by)}${p.requested_by_role ? ` (${p.requested_by_role} in this vault)` : ""}`,
      );
    printLine(`Created ${formatTime(p.created_at)}; ${p.status === "pending" ? `expires ${formatTime(p.expires_at)}` : `decided ${formatTime(p.decided_at)}`}`);
    if (p.message) printLine(`\nAgent's note:\n${indent(p.message)}`);
    if (p.user_message) printLine(`\nMessage for you:\n${indent(p.user_message)}`);
    if (p.services.length) {
      printLine("\nHosts:");
      for (const s of p.services) printLine(`  ${s.host}  ${describeAuth(s.auth)}${s.description ? `  ${oneLine(s.description)}` : ""}`);
    }
    if (p.credentials.length) {
      printLine("\nCredentials to supply:");
      for (const c of p.credentials) {
        printLine(`  ${c.key}${c.description ? `  ${oneLine(c.description)}` : ""}`);
        printLine(`    get it at: ${clean(c.obtain) || "(no link given)"}`);
        if (c.obtain_instructions) printLine(indent(c.obtain_instructions, "    "));
      }
    }
    if (p.status === "pending") printLine(`\nApprove with: broker proposal approve ${p.id}   Reject with: broker proposal reject ${p.id}`);
  },
});

/** Reads every line of stdin once; a value per slot, in slot order (CR/LF removed). */
async function stdinLines(): Promise<string[]> {
  const lines = (await Bun.stdin.text()).split(/\r?\n/);
  if (lines.at(-1) === "") lines.pop();
  return lines;
}

const approve = defineCommand({
  meta: {
    name: "approve",
    description:
      "Approve a proposal, supplying each credential: typed at hidden prompts, or piped one line per slot in order (an empty line keeps a stored value); " +
      "or answer a slot with a secret store reference, --ref KEY=<connection>:<path>#<field>",
  },
  args: {
    ...idArg,
    ref: {
      type: "string",
      valueHint: "KEY=connection:path#field",
      description: "Answer slot KEY with a secret in a store instead of a value (`broker secret-store list`); repeatable. The other slots are typed or piped",
    },
    "ref-version": {
      type: "string",
      valueHint: "KEY=version",
      description: "With --ref KEY=…: the version the store keeps to read (default: the latest); repeatable",
    },
    ...vaultArg,
  },
  async run({ args, rawArgs }) {
    const id = checkId(args.id);
    const ctx = openContext();
    const vault = optionalVault(ctx, args.vault);
    const p = await fetchProposal(ctx.client, id, vault);
    if (p.status !== "pending") throw new CliFailure(`proposal ${p.id} is ${p.status}, not pending`, "only pending proposals can be approved");
    const refs = refAnswers(
      rawArgs,
      p.credentials.map((c) => c.key),
      p.id,
    );
    const asked = p.credentials.filter((c) => !refs.has(c.key));
    const stored = asked.length
      ? (await ctx.client.request<CredentialListBody>("GET", vaultPath(p.vault, "credentials"), { vault: p.vault })).credentials.map((c) => c.key)
      : [];
    const terminal = stdinIsTerminal();
    const piped = terminal || asked.length === 0 ? [] : await stdinLines();
    const values: Record<string, Secret | RefBody> = Object.fromEntries(refs);
    for (const [i, slot] of asked.entries()) {
      const exists = stored.includes(slot.key);
      const value = terminal ? await promptHidden(slotPrompt(p.services, slot.key, exists)) : new Secret(piped[i] ?? "");
      checkWholePem(p.services, slot.key, value, p.id);
      if (value.reveal() !== "") values[slot.key] = value;
      else if (!exists) {
        throw new CliFailure(
          `no value for ${slot.key}: nothing was approved`,
          terminal
            ? "type the value at the prompt, or answer the slot with --ref KEY=<connection>:<path>#<field>"
            : `pipe ${asked.length} line(s), one value per slot in the order \`broker proposal show ${p.id}\` lists them${refs.size ? " (leaving out those given by --ref)" : ""}`,
        );
      }
    }
    const call = ctx.client.request("POST", apiPath("v1", "proposals", id, "approve"), {
      body: { credentials: values },
      vault: vault ?? p.vault,
      headerVault: true,
      hints: { ...proposalHints(id, vault), 409: decidedHint(id) },
    });
    await nameRefFlag(call);
    printLine(`Approved proposal ${p.id}`);
    for (const [key, ref] of refs) printLine(`  ${key} refers to ${ref.ref}${ref.version ? ` (version ${ref.version})` : ""}`);
  },
});

const reject = defineCommand({
  meta: { name: "reject", description: "Reject a pending proposal" },
  args: { ...idArg, ...vaultArg },
  async run({ args }) {
    const id = checkId(args.id);
    const ctx = openContext();
    const vault = optionalVault(ctx, args.vault);
    const hints = { ...proposalHints(id, vault), 409: decidedHint(id) };
    const res = await ctx.client.request<ProposalAnswerBody>("POST", apiPath("v1", "proposals", id, "reject"), { vault, headerVault: true, hints });
    printLine(`Rejected proposal ${res.id}`);
  },
});

/** A 409 on approve or reject: someone decided it first (or it expired); nothing changed. */
function decidedHint(id: string): string {
  return `nothing changed; \`broker proposal show ${id}\` shows how it was decided`;
}

/** Agent-written text: control characters (terminal escapes) shown as `?`, so it cannot rewrite the screen. */
function clean(text: string): string {
  return text.replace(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, "?");
}

function indent(text: string, pad = "  "): string {
  return text
    .split(/\r?\n/)
    .map((l) => `${pad}${clean(l)}`)
    .join("\n");
}

function oneLine(s: string): string {
  return clean(s.replace(/\r?\n/g, " "));
}

export default defineCommand({
  meta: { name: "proposal", description: "Review, approve and reject agents' proposals (access to hosts and credentials)" },
  subCommands: { list, show, approve, reject },
});
