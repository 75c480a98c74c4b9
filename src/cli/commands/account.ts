// `broker account change-password|whoami`: the logged-in person's own account.
// Passwords are prompted without echo or read with --password-stdin (current, then new).

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { jsonArg, passwordStdinArg } from "../kit/index.ts";
import { openContext } from "../kit/index.ts";
import { formatTime, printJson, printLine, printNote } from "../kit/index.ts";
import { promptHidden, promptNewPassword, readStdinLine } from "../kit/index.ts";
import { updateCliState } from "../kit/index.ts";
import type { FreshSessionBody, WhoamiBody } from "../../contract/index.ts";

const changePassword = defineCommand({
  meta: { name: "change-password", description: "Change your password; every other session of yours ends" },
  args: { ...passwordStdinArg },
  async run({ args }) {
    const ctx = openContext();
    const fromStdin = Boolean(args["password-stdin"]);
    const current = fromStdin ? await readStdinLine("current password") : await promptHidden("Current password: ");
    const next = fromStdin ? await readStdinLine("new password") : await promptNewPassword("password");
    const res = await ctx.client.request<FreshSessionBody>("POST", "/v1/auth/change-password", {
      body: { current_password: current, new_password: next },
    });
    // The server ended every session, including the one we used: keep the fresh one instead.
    updateCliState(ctx.config.configDir, { address: ctx.addr, token: new Secret(res.token) });
    if (ctx.config.sessionToken) printNote("BROKER_SESSION_TOKEN no longer works: unset it; the new session is saved in the CLI config.");
    printLine("Password changed. Your other sessions have ended; this one stays logged in.");
  },
});

function describePrincipal(me: WhoamiBody): string {
  if (me.kind === "user" && me.user) return `${me.user.email} (${me.user.role})`;
  if (me.kind === "agent" && me.agent) return `agent ${me.agent.name} (${me.agent.role})`;
  return `scoped session for vault ${me.vault ?? "?"} (${me.role ?? "?"})`;
}

const whoami = defineCommand({
  meta: { name: "whoami", description: "Show who the current session belongs to, and which broker and vault the CLI uses" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const me = await ctx.client.request<WhoamiBody>("GET", "/v1/auth/whoami");
    const vault = ctx.state.vault ?? ctx.config.vault ?? null;
    if (args.json) return printJson({ ...me, address: ctx.addr, current_vault: vault });
    const rows: [string, string][] = [
      ["Logged in as", describePrincipal(me)],
      ["Broker", ctx.addr],
      ["Session", `${me.session.id}, expires ${formatTime(me.session.expires_at)}`],
      ["Vault", vault ?? "(none: `broker vault use <name>` picks one)"],
    ];
    for (const [k, v] of rows) printLine(`${`${k}:`.padEnd(14)}${v}`);
  },
});

export default defineCommand({
  meta: { name: "account", description: "Your account: who you are logged in as, and your password" },
  subCommands: { "change-password": changePassword, whoami },
});
