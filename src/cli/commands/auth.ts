// `broker auth register|login|logout|sessions`: a person's session with the broker. The token is
// saved in cli.json (0600) and printed only with --print-token; passwords come from a prompt
// without echo or from --password-stdin, never from the command line; `login --sso` uses sso.ts.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { addressArg, jsonArg, limitArg, parseListLimit, passwordStdinArg, readPages } from "../kit/index.ts";
import { ApiFailure, apiPath } from "../kit/index.ts";
import { forgetLogin, openContext, saveLogin, type CliContext } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { formatTime, printJson, printLine, printNote, printSecret, printTable } from "../kit/index.ts";
import { promptHidden, promptNewPassword, readStdinLine } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { loginWithSso } from "../kit/index.ts";
import type { OwnSessionsBody, SignedInBody } from "../../contract/index.ts";

const loginArgs = {
  email: { type: "string", description: "Your email address", required: true },
  ...passwordStdinArg,
  ...addressArg,
  "print-token": { type: "boolean", description: "Also print the session token (alone on stdout; the message goes to stderr)" },
} as const;

/** Saves the new session and says who is logged in; the token is shown only on request. */
export function finishLogin(ctx: CliContext, res: SignedInBody, message: string, printToken: boolean): void {
  const token = new Secret(res.token);
  saveLogin(ctx, { token, email: res.user.email });
  if (printToken) {
    printNote(message);
    printSecret(token);
  } else printLine(message);
}

const register = defineCommand({
  meta: { name: "register", description: "Create an account (the first account on a broker becomes its owner) and log in" },
  args: loginArgs,
  async run({ args }) {
    const ctx = openContext({ address: args.address });
    const password = args["password-stdin"] ? await readStdinLine("password") : await promptNewPassword("password");
    const res = await ctx.client.request<SignedInBody>("POST", "/v1/auth/register", { body: { email: args.email, password }, anonymous: true });
    const owner = res.user.role === "owner" ? " as the instance owner" : "";
    finishLogin(ctx, res, `Registered ${res.user.email}${owner} at ${ctx.addr}. Logged in as ${res.user.email}`, Boolean(args["print-token"]));
  },
});

const login = defineCommand({
  meta: { name: "login", description: "Log in with your email and password, or with --sso through the identity provider, and remember the session" },
  args: {
    ...loginArgs,
    email: { type: "string", description: "Your email address (not with --sso)" },
    sso: { type: "boolean", description: "Sign in through the broker's identity provider in a browser: prints a link to open (no password)" },
  },
  async run({ args }) {
    const ctx = openContext({ address: args.address });
    if (args.sso) return loginInBrowser(ctx, args);
    if (!args.email) throw new CliFailure("--email is required", "pass --email <you>, or sign in through the identity provider with --sso", 2);
    const password = args["password-stdin"] ? await readStdinLine("password") : await promptHidden("Password: ");
    const hints = { 401: "the email or password is wrong: check both and try again (`broker auth register` creates an account)" };
    const res = await ctx.client.request<SignedInBody>("POST", "/v1/auth/login", { body: { email: args.email, password }, anonymous: true, hints });
    finishLogin(ctx, res, `Logged in as ${res.user.email}`, Boolean(args["print-token"]));
  },
});

async function loginInBrowser(ctx: CliContext, args: { email?: string; "password-stdin"?: boolean; "print-token"?: boolean }): Promise<void> {
  if (args.email || args["password-stdin"])
    throw new CliFailure("--sso takes no --email or --password-stdin: the identity provider checks who you are", undefined, 2);
  const abort = new AbortController();
  const onInterrupt = () => abort.abort();
  process.once("SIGINT", onInterrupt); // Ctrl-C ends the wait and closes the listener
  try {
    const res = await loginWithSso(ctx.client, {
      signal: abort.signal,
      show: (link, name) => printNote(`To sign in with ${name}, open this link in your browser:\n\n  ${link}\n\nWaiting for the browser (Ctrl-C to cancel)...`),
    });
    finishLogin(ctx, res, `Logged in as ${res.user.email}`, Boolean(args["print-token"]));
  } finally {
    process.off("SIGINT", onInterrupt);
  }
}

const logout = defineCommand({
  meta: { name: "logout", description: "End the current session on the broker and forget it locally" },
  async run() {
    const ctx = openContext();
    if (!ctx.client.hasToken) {
      forgetLogin(ctx);
      return printLine("Not logged in.");
    }
    await ctx.client.request("POST", "/v1/auth/logout").catch((err: unknown) => {
      // An already-dead session is the outcome we wanted; anything else is worth reporting.
      if (!(err instanceof ApiFailure && err.status === 401)) throw err;
    });
    // With BROKER_SESSION_TOKEN, that session is the one revoked: the saved login is a different one and stays.
    if (ctx.config.sessionToken) printNote("The session in BROKER_SESSION_TOKEN is revoked: unset the variable.");
    else forgetLogin(ctx);
    printLine("Logged out.");
  },
});

const sessionsList = defineCommand({
  meta: { name: "list", description: "List your active sessions, oldest first (logins and scoped sessions you minted)" },
  args: { ...limitArg, ...jsonArg },
  async run({ args }) {
    const max = parseListLimit(args.limit);
    const ctx = openContext();
    const sessions = await readPages(
      (q) => ctx.client.request<OwnSessionsBody>("GET", `/v1/auth/sessions?${q}`),
      (b) => b.sessions,
      "after",
      max,
    );
    if (args.json) return printJson(sessions);
    printTable(
      sessions,
      [
        { title: "ID", value: (s) => s.id },
        { title: "KIND", value: (s) => s.kind },
        { title: "VAULT", value: (s) => s.vault ?? "-" },
        { title: "ROLE", value: (s) => s.role ?? "-" },
        { title: "CREATED", value: (s) => formatTime(s.created_at) },
        { title: "LAST SEEN", value: (s) => formatTime(s.last_seen_at ?? undefined) },
        { title: "EXPIRES", value: (s) => formatTime(s.expires_at) },
        { title: "", value: (s) => (s.current ? "(this session)" : "") },
      ],
      "No active sessions.",
    );
  },
});

const sessionsRevoke = defineCommand({
  meta: { name: "revoke", description: "Revoke one of your sessions by id (see `broker auth sessions list`)" },
  args: { id: { type: "positional", description: "Session id", required: true } },
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", apiPath("v1", "auth", "sessions", args.id));
    printLine(`Revoked session ${args.id}.`);
  },
});

const authCommand = defineCommand({
  meta: { name: "auth", description: "Register, log in and out, and manage your sessions" },
  subCommands: {
    register,
    login,
    logout,
    sessions: defineCommand({
      meta: { name: "sessions", description: "List or revoke your sessions" },
      subCommands: { list: sessionsList, revoke: sessionsRevoke },
    }),
  },
});

addHelpFooter(login, () =>
  [
    "",
    "WITH --sso (a broker whose operator set up identity-provider sign-in)",
    "",
    "  The CLI listens on 127.0.0.1 (a random port) and prints a link. Open it in a browser on this machine,",
    "  sign in with the provider, and the browser hands the CLI a one-time code it exchanges for a session.",
    "  The CLI never sees the provider's tokens. It waits 5 minutes at most; Ctrl-C cancels.",
  ].join("\n"),
);

addHelpFooter(authCommand, () =>
  [
    "",
    "ENVIRONMENT (all CLI commands)",
    "",
    "  BROKER_ADDR           Broker address; overrides the saved one (default http://127.0.0.1:14321)",
    "  BROKER_SESSION_TOKEN  Session or agent token; overrides the saved login",
    "  BROKER_VAULT          Vault used when neither --vault nor `broker vault use` names one",
    "  BROKER_CONFIG_DIR     Where cli.json lives (default $XDG_CONFIG_HOME/broker or ~/.config/broker)",
  ].join("\n"),
);

export default authCommand;
