// `broker agent redeem <invite-link-or-token>`: the agent's side of an invite. Redeems it (POST to the
// link, as `curl -X POST <link>` does) and saves the agent token where `auth login` saves a login
// (cli.json, 0600, with the server's address and the agent's vault when it has one), so `broker vault
// run -- <command>` works next. The token is never printed; a person's saved login is not replaced
// unless asked.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { AgentRedeemed, type AgentRedeemedBody } from "../../contract/index.ts";
import { addressArg, jsonArg } from "../kit/index.ts";
import { openContext, updateCliState } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { formatTime, printJson, printLine, printNote } from "../kit/index.ts";
import { isAgentToken, statePath } from "../kit/index.ts";

export interface AgentInviteRef {
  readonly token: string;
  /** The broker's address as the link names it: the link without its `/invite/<token>` tail. */
  readonly base?: string;
}

/** A bare agent invite token (av_inv_…) or a link ending in /invite/<token>. */
export function parseAgentInvite(raw: string): AgentInviteRef {
  const text = raw.trim();
  if (/^av_uinv_/.test(text) || /\/vault-invites\//.test(text))
    throw new CliFailure("that is an invite for a person, not for an agent", `a person accepts it with: broker vault join ${text}`, 2);
  if (/^av_inv_[A-Za-z0-9_-]+$/.test(text)) return { token: text };
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  const m = url && /^(.*)\/invite\/(av_inv_[A-Za-z0-9_-]+)\/?$/.exec(url.pathname);
  if (!url || !m || !/^https?:$/.test(url.protocol) || url.search || url.hash || url.username || url.password)
    throw new CliFailure(
      "that is neither an agent invite link nor an invite token",
      "paste the whole link from `broker agent invite` or the console, e.g. broker agent redeem https://broker.example/invite/av_inv_…",
      2,
    );
  return { token: m[2]!, base: `${url.origin}${m[1]}` };
}

/** Names as a broker makes them (lower-case letters, digits, '-'): nothing a terminal would act on. */
const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

/** The invite's answer, checked to be a broker's: a link may lead anywhere, and its names reach the terminal. */
function brokerAnswer(answer: unknown): AgentRedeemedBody {
  const read = AgentRedeemed.safeParse(answer);
  if (!read.success || !NAME.test(read.data.agent.name) || !read.data.vaults.every((v) => NAME.test(v.name))) {
    throw new CliFailure(
      "the invite link's server did not answer as a broker does; nothing was saved",
      "check the link: ask whoever invited the agent for a new one",
    );
  }
  return read.data;
}

function describeVaults(vaults: AgentRedeemedBody["vaults"]): string {
  if (vaults.length === 1) return `${vaults[0]!.role} in vault ${vaults[0]!.name}`;
  return `in vaults ${vaults.map((v) => `${v.name} (${v.role})`).join(", ")}`;
}

export default defineCommand({
  meta: { name: "redeem", description: "Redeem an agent invite and save the agent's token as this CLI's login (the agent runs it)" },
  args: {
    invite: { type: "positional", description: "The invite link (or just its token, av_inv_…)", required: true },
    "replace-login": { type: "boolean", description: "Replace a person's saved login (otherwise refused; or use another BROKER_CONFIG_DIR)" },
    ...addressArg,
    ...jsonArg,
  },
  async run({ args }) {
    const ref = parseAgentInvite(args.invite);
    // The broker that issued the link, unless --address or BROKER_ADDR says otherwise.
    const probe = openContext({ address: args.address });
    const ctx = args.address || probe.config.addr || !ref.base ? probe : openContext({ address: ref.base });
    const saved = ctx.state.token;
    if (saved && !isAgentToken(saved) && !args["replace-login"]) {
      throw new CliFailure(
        `this CLI is logged in as a person${ctx.state.email ? ` (${ctx.state.email})` : ""}; redeeming would replace that login`,
        `keep both: BROKER_CONFIG_DIR=<another directory> broker agent redeem … (and the same BROKER_CONFIG_DIR for vault run), or pass --replace-login`,
        2,
      );
    }
    const path = `/invite/${encodeURIComponent(ref.token)}`;
    const answer = await ctx.client.request<AgentRedeemedBody>("POST", path, {
      anonymous: true,
      hints: { 404: "an invite works once and for 15 minutes: ask for a new one (`broker agent invite`, or the console's Agents page)" },
    });
    const res = brokerAnswer(answer);
    const vault = res.vaults.length === 1 ? res.vaults[0]!.name : null;
    updateCliState(ctx.config.configDir, { address: ctx.addr, token: new Secret(res.token), email: null, vault });
    const file = statePath(ctx.config.configDir);
    if (ctx.config.sessionToken) printNote("note: BROKER_SESSION_TOKEN is set and overrides the saved token: unset it to act as this agent");
    if (args.json) return printJson({ agent: res.agent.name, vaults: res.vaults, broker_url: ctx.addr, expires_at: res.expires_at, saved_to: file });
    const expiry = res.expires_at ? `; its token expires ${formatTime(res.expires_at)}` : "";
    printLine(`Redeemed: agent ${res.agent.name}, ${describeVaults(res.vaults)}${expiry}.`);
    printLine(`Its token is saved for ${ctx.addr} in ${file}${saved ? " (replacing the previous login)" : ""}.`);
    if (vault) printLine("Next: broker vault run -- <command>");
    else if (res.vaults.length > 1) printLine("Next: broker vault use <vault>, then broker vault run -- <command>");
  },
});
