// `broker credential set|get|list|delete`: secret values in a vault. A value is typed at a
// prompt without echo, or piped on stdin; it is never a flag or argument (see args.ts). It is
// shown only by `get` (the value alone, for pipes) and `list --reveal`. All but a plain `list` are
// for people only: an agent is refused whatever its role and told to file a proposal.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { CliFailure, hintOnForbidden, SECRET_READ_HINT, SECRET_WRITE_HINT } from "../kit/index.ts";
import { formatTime, printJson, printLine, printSecret, printTable } from "../kit/index.ts";
import { promptHidden, readStdinValue, stdinIsTerminal } from "../kit/index.ts";
import type { CredentialListBody, CredentialRevealedBody } from "../../contract/index.ts";

/** A 404 on one key: the command that lists the keys that do exist. */
const listKeys = (vault: string) => ({ 404: `\`broker credential list\` shows the keys in vault ${vault}` });

const KEY_PATTERN = /^[A-Z][A-Z0-9_]*$/;

/** Checked before reading the value, so a typo fails before anyone pastes a secret. */
export function checkKey(key: string): string {
  if (key.length > 128 || !KEY_PATTERN.test(key)) {
    throw new CliFailure(
      `"${key}" is not a credential key`,
      "keys are upper-case letters, digits and underscores, starting with a letter, e.g. OPENAI_API_KEY",
      2,
    );
  }
  return key;
}

const keyArg = { key: { type: "positional", description: "Credential key, e.g. OPENAI_API_KEY", required: true } } as const;

const set = defineCommand({
  meta: { name: "set", description: "Store a credential: typed at a hidden prompt, or all of stdin when piped (one trailing newline dropped)" },
  args: { ...keyArg, ...vaultArg },
  async run({ args }) {
    const key = checkKey(args.key);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const value = stdinIsTerminal() ? await promptHidden(`Value for ${key} (input hidden): `) : await readStdinValue(`value for ${key}`);
    if (value.reveal() === "") throw new CliFailure("the value is empty: nothing was stored", "type or pipe a non-empty value");
    await hintOnForbidden(ctx.client.request("PUT", vaultPath(vault, "credentials", key), { body: { value }, vault }), SECRET_WRITE_HINT);
    printLine(`Set ${key} in vault ${vault}.`);
  },
});

const get = defineCommand({
  meta: { name: "get", description: "Print a credential's value alone (so it can be piped); people who are admins or members only, never agents" },
  args: { ...keyArg, ...vaultArg },
  async run({ args }) {
    const key = checkKey(args.key);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const res = await hintOnForbidden(
      ctx.client.request<CredentialRevealedBody>("GET", vaultPath(vault, "credentials", key), { vault, hints: listKeys(vault) }),
      SECRET_READ_HINT,
    );
    if (typeof res.value !== "string") throw new CliFailure("the broker returned no value", "check the server version");
    printSecret(new Secret(res.value));
  },
});

const list = defineCommand({
  meta: { name: "list", description: "List credential keys (values only with --reveal)" },
  args: {
    reveal: { type: "boolean", description: "Also show the values (people who are admins or members only, never agents)" },
    ...vaultArg,
    ...jsonArg,
  },
  async run({ args }) {
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    const query = args.reveal ? "?reveal=true" : "";
    const call = ctx.client.request<CredentialListBody>("GET", `${vaultPath(vault, "credentials")}${query}`, { vault });
    const res = args.reveal ? await hintOnForbidden(call, SECRET_READ_HINT) : await call;
    const rows = res.credentials.map((c) => ({ key: c.key, updated_at: c.updated_at, value: c.value === undefined ? undefined : new Secret(c.value) }));
    // Without --reveal, never show a value even if a server sent one; with it, showing is the point.
    const shown = (s: Secret | undefined) => (args.reveal && s ? s.reveal() : undefined);
    if (args.json) return printJson(rows.map((r) => ({ key: r.key, updated_at: r.updated_at, ...(args.reveal ? { value: shown(r.value) } : {}) })));
    const columns = [
      { title: "KEY", value: (r: (typeof rows)[number]) => r.key },
      { title: "UPDATED", value: (r: (typeof rows)[number]) => formatTime(r.updated_at) },
      ...(args.reveal ? [{ title: "VALUE", value: (r: (typeof rows)[number]) => shown(r.value) ?? "" }] : []),
    ];
    printTable(rows, columns, `No credentials in vault ${vault}. Add one with: broker credential set <KEY>`);
  },
});

const remove = defineCommand({
  meta: { name: "delete", description: "Delete a credential from the vault" },
  args: { ...keyArg, ...vaultArg },
  async run({ args }) {
    const key = checkKey(args.key);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    await hintOnForbidden(ctx.client.request("DELETE", vaultPath(vault, "credentials", key), { vault, hints: listKeys(vault) }), SECRET_WRITE_HINT);
    printLine(`Deleted ${key} from vault ${vault}.`);
  },
});

export default defineCommand({
  meta: { name: "credential", description: "Store, read, list and delete credentials in a vault" },
  subCommands: { set, get, list, delete: remove },
});
