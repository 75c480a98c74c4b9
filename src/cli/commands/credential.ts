// `broker credential set|get|list|delete`: secret values in a vault. A value is typed at a
// prompt without echo, or piped on stdin; it is never a flag or argument (see args.ts). It is
// shown only by `get` (the value alone, for pipes) and `list --reveal`. A credential may instead
// refer to a secret in a store (`set --ref`); `list` then shows the reference and its last read. All but a plain `list` are
// for people only: an agent is refused whatever its role and told to file a proposal.

import { defineCommand } from "citty";
import { Secret } from "../../secret.ts";
import { jsonArg, vaultArg } from "../kit/index.ts";
import { vaultPath } from "../kit/index.ts";
import { openContext, pickVault } from "../kit/index.ts";
import { CliFailure, hintOnForbidden, SECRET_READ_HINT, SECRET_WRITE_HINT } from "../kit/index.ts";
import { type Client, type Column, formatTime, printJson, printLine, printNote, printSecret, printTable } from "../kit/index.ts";
import { CREDENTIAL_REFERENCE_COLUMNS, firstReadWords, nameRefFlag, REF_EXAMPLE, refBody, type RefBody } from "../kit/index.ts";
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
  meta: {
    name: "set",
    description:
      "Store a credential: typed at a hidden prompt, or all of stdin when piped (one trailing newline dropped); " +
      "or point it at a secret store with --ref <connection>:<path>#<field> (nothing is read then)",
  },
  args: {
    ...keyArg,
    ref: { type: "string", valueHint: "connection:path#field", description: "Instead of a value: the secret in a store (`broker secret-store list`)" },
    version: { type: "string", description: "With --ref: the version the store keeps to read (default: the latest)" },
    ...vaultArg,
  },
  async run({ args }) {
    const key = checkKey(args.key);
    if (args.version !== undefined && args.ref === undefined) throw new CliFailure("--version goes with --ref", REF_EXAMPLE, 2);
    const ref = args.ref === undefined ? undefined : refBody("--ref", args.ref, args.version);
    const ctx = openContext();
    const vault = pickVault(ctx, args.vault);
    if (ref) return setReference(ctx.client, vault, key, ref);
    const value = stdinIsTerminal() ? await promptHidden(`Value for ${key} (input hidden): `) : await readStdinValue(`value for ${key}`);
    if (value.reveal() === "") throw new CliFailure("the value is empty: nothing was stored", "type or pipe a non-empty value");
    await hintOnForbidden(ctx.client.request("PUT", vaultPath(vault, "credentials", key), { body: { value }, vault }), SECRET_WRITE_HINT);
    printLine(`Set ${key} in vault ${vault}.`);
  },
});

/** `set --ref`: the broker reads the secret once before answering; a failed first read still saves the reference. */
async function setReference(client: Client, vault: string, key: string, ref: RefBody): Promise<void> {
  const call = client.request<CredentialRevealedBody>("PUT", vaultPath(vault, "credentials", key), { body: ref, vault });
  const res = await nameRefFlag(hintOnForbidden(call, SECRET_WRITE_HINT));
  printLine(`Set ${key} in vault ${vault} to the secret store reference ${res.reference?.text ?? ref.ref}.`);
  if (!res.reference) return;
  if (res.reference.last_error === null) return printLine(`Read it: ${firstReadWords(res.reference)}.`);
  printNote(`warning: ${firstReadWords(res.reference)}`);
  printNote(
    `The reference is saved and read again every refresh interval; fix the path, field or store, then \`broker secret-store check ${res.reference.connection}\`.`,
  );
}

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
    if (res.reference)
      throw new CliFailure(
        `${key} refers to ${res.reference.text}: its value lives in that store`,
        "read it there; `broker credential list` shows its last read",
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
    const rows = res.credentials.map((c) => ({ ...c, value: c.value === undefined ? undefined : new Secret(c.value) }));
    // Without --reveal, never show a value even if a server sent one; with it, showing is the point.
    const shown = (s: Secret | undefined) => (args.reveal && s ? s.reveal() : undefined);
    if (args.json)
      return printJson(
        rows.map((r) => ({
          key: r.key,
          updated_at: r.updated_at,
          ...(args.reveal && !r.reference ? { value: shown(r.value) } : {}),
          ...(r.reference && { reference: r.reference }),
        })),
      );
    type Row = (typeof rows)[number];
    const columns: Column<Row>[] = [
      { title: "KEY", value: (r) => r.key },
      { title: "UPDATED", value: (r) => formatTime(r.updated_at) },
      ...(args.reveal ? [{ title: "VALUE", value: (r: Row) => (r.reference ? "(in the store)" : (shown(r.value) ?? "")) }] : []),
      // A reference's columns only where the vault has one, so a vault of stored values lists as before.
      ...(rows.some((r) => r.reference) ? CREDENTIAL_REFERENCE_COLUMNS : []),
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
