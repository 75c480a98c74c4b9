// `broker vault join <token-or-invite-url>`: accept a human vault invite, either with the saved
// login or, given --email, by creating an account through the invite. The saved session token
// is only ever sent to the configured address, never to whatever host an invite link names.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { addressArg, passwordStdinArg } from "../kit/index.ts";
import { apiPath } from "../kit/index.ts";
import { openContext, rememberVault, saveLogin } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { printLine, printNote, printSecret } from "../kit/index.ts";
import { promptNewPassword, readStdinLine } from "../kit/index.ts";
import type { InviteAcceptedBody } from "../../contract/index.ts";

export interface InviteRef {
  readonly token: string;
  /** The origin of an invite link, when a link (not a bare token) was given. */
  readonly origin?: string;
}

/** Accepts a bare invite token or any link whose last path segment is the token. */
export function parseInviteRef(raw: string): InviteRef {
  const text = raw.trim();
  if (!text.includes("/")) {
    if (!/^[A-Za-z0-9_-]+$/.test(text)) throw badInvite();
    return { token: text };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw badInvite();
  }
  const segments = url.pathname.split("/").filter(Boolean);
  if (segments.at(-1) === "accept") segments.pop();
  const token = decodeURIComponent(segments.at(-1) ?? "");
  if (!/^[A-Za-z0-9_-]+$/.test(token)) throw badInvite();
  return { token, origin: url.origin };
}

function badInvite(): CliFailure {
  return new CliFailure(
    "that is neither an invite link nor an invite token",
    "paste the whole link you were sent, e.g. broker vault join https://broker.example/…",
    2,
  );
}

export default defineCommand({
  meta: { name: "join", description: "Accept a vault invite with your login, or create your account through it with --email" },
  args: {
    invite: { type: "positional", description: "The invite link (or just its token)", required: true },
    email: { type: "string", description: "Create an account with this email through the invite (instead of using your login)" },
    ...passwordStdinArg,
    ...addressArg,
    "print-token": { type: "boolean", description: "With --email: also print the new session token (alone on stdout)" },
  },
  async run({ args }) {
    const ref = parseInviteRef(args.invite);
    const path = apiPath("v1", "vault-invites", ref.token, "accept");
    let ctx = openContext({ address: args.address });
    if (!args.email) {
      if (!ctx.client.hasToken) {
        throw new CliFailure(
          "not logged in",
          `log in with \`broker auth login\`, or create your account through the invite: broker vault join <link> --email <you>`,
        );
      }
      if (ref.origin && ref.origin !== new URL(ctx.addr).origin)
        printNote(`note: the link names ${ref.origin}; the CLI uses ${ctx.addr} (change it with --address)`);
      const res = await ctx.client.request<InviteAcceptedBody>("POST", path);
      printLine(`Joined vault ${res.vault} as ${res.role}.`);
      if (!ctx.state.vault) printLine(`Make it the default with: broker vault use ${res.vault}`);
      return;
    }
    // A new account belongs to the broker that issued the link, unless told otherwise.
    if (!args.address && !ctx.config.addr && ref.origin) ctx = openContext({ address: ref.origin });
    const password = args["password-stdin"] ? await readStdinLine("password") : await promptNewPassword("password");
    const res = await ctx.client.request<InviteAcceptedBody>("POST", path, { body: { email: args.email, password }, anonymous: true });
    if (!res.token) throw new CliFailure("the broker accepted the invite but returned no session", "log in with `broker auth login`");
    const token = new Secret(res.token);
    saveLogin(ctx, { token, email: res.user?.email ?? args.email });
    rememberVault(ctx, res.vault);
    const message = `Registered ${res.user?.email ?? args.email} at ${ctx.addr} and joined vault ${res.vault} as ${res.role}. Logged in; vault ${res.vault} is now the default.`;
    if (args["print-token"]) {
      printNote(message);
      printSecret(token);
    } else printLine(message);
  },
});
