// `broker secret-store add|list|show|set|remove|share|unshare|check`: connections to the secret stores teams
// already use (HashiCorp Vault / OpenBao, AWS Secrets Manager, Google Secret Manager, Azure Key Vault), which
// credentials then refer to (`broker credential set KEY --ref <connection>:<path>#<field>`). The owner's
// connections are shared with vaults one by one; a vault's human admin may add one only that vault uses.
// An auth's secrets are typed at hidden prompts or piped, never flags, and the broker never sends them back.

import { defineCommand } from "citty";
import type { SecretStoreCheckBody, SecretStoreConnectionBody, SecretStoreConnectionListBody } from "../../contract/index.ts";
import { addHelpFooter, apiPath, CliExit, CliFailure, collectFlagValues, jsonArg, openContext } from "../kit/index.ts";
import { formatTime, printJson, printLine, printTable } from "../kit/index.ts";
import {
  nameStoreFlag,
  readAuthSecrets,
  SECRETS_NOTES,
  STORE_KINDS,
  STORE_SETTING_ARGS,
  storeBodyFromFlags,
  storeHints,
  type StoreKind,
} from "../kit/index.ts";
import { authWords, kindWords, ownerWords, REFERENCE_COLUMNS, referenceStatus, storeWhere } from "../kit/index.ts";

const nameArg = {
  name: { type: "positional", description: "Connection name (lower-case letters, digits and dashes): what references start with", required: true },
} as const;
const ADD_CONFLICT = "pick another name (`broker secret-store list` shows the connections), or change that one with `broker secret-store set`";
const storePath = (name: string, ...rest: string[]) => apiPath("v1", "secret-stores", name, ...rest);

const EXAMPLES = `EXAMPLES

  broker secret-store add team-vault --kind vault --address https://vault.example.com:8200   # token prompted
  printf %s "$VAULT_TOKEN" | broker secret-store add team-vault --kind vault --address https://vault.example.com:8200
  printf '%s\\n%s\\n' "$ROLE_ID" "$SECRET_ID" | broker secret-store add ci --kind vault --address https://… --auth approle
  broker secret-store add k8s --kind vault --address https://… --auth kubernetes --role broker \\
      --token-file /var/run/secrets/kubernetes.io/serviceaccount/token
  broker secret-store add prod-aws --kind aws --region eu-west-1 --auth environment
  broker secret-store add gcp --kind google --project my-project --key-file ./service-account.json
  broker secret-store add kv --kind azure --vault-url https://my-kv.vault.azure.net --tenant contoso.onmicrosoft.com \\
      --client-id 00000000-0000-0000-0000-000000000000                                     # client secret prompted
  broker secret-store share team-vault main
  broker credential set OPENAI_API_KEY --ref team-vault:apps/openai#api_key`;

const add = defineCommand({
  meta: {
    name: "add",
    description:
      "Connect a secret store (owner; or a vault's human admin with --vault): where it is and how the broker signs in. Its secrets are typed hidden or piped",
  },
  args: {
    ...nameArg,
    kind: { type: "enum", options: [...STORE_KINDS], required: true, description: "vault (HashiCorp Vault or OpenBao), aws, google or azure" },
    vault: {
      type: "string",
      description: "Make it this vault's own connection (its human admins manage it, only it uses it); without it: the owner's, shared with vaults one by one",
    },
    ...STORE_SETTING_ARGS,
    ...jsonArg,
  },
  async run({ args }) {
    const kind = args.kind as StoreKind;
    const { body, method } = storeBodyFromFlags(kind, args, true);
    const ctx = openContext();
    const secrets = await readAuthSecrets(method ?? "", args.name);
    const full = { name: args.name, kind, ...(args.vault && { vault: args.vault }), ...body, auth: { ...(body.auth as object), ...secrets } };
    const c = await nameStoreFlag(
      ctx.client.request<SecretStoreConnectionBody>("POST", "/v1/secret-stores", { body: full, hints: { ...storeHints(args.name), 409: ADD_CONFLICT } }),
    );
    if (args.json) return printJson(c);
    printLine(`Added secret store connection ${c.name}: ${kindWords(c.kind)} at ${storeWhere(c)}, signing in with ${authWords(c.auth)}; ${ownerWords(c)}.`);
    if (!c.vault) printLine(`Share it with a vault whose credentials may refer to it: broker secret-store share ${c.name} <vault>`);
    printLine(`Point a credential at a secret in it: broker credential set <KEY> --ref ${c.name}:<path>#<field>`);
  },
});
addHelpFooter(add, () => `${EXAMPLES}\n\n${SECRETS_NOTES}`);

const list = defineCommand({
  meta: { name: "list", description: "List the secret store connections you may see, with how their last reads went" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const { connections } = await ctx.client.request<SecretStoreConnectionListBody>("GET", "/v1/secret-stores", { hints: storeHints("") });
    if (args.json) return printJson(connections);
    printTable(
      connections,
      [
        { title: "NAME", value: (c) => c.name },
        { title: "KIND", value: (c) => c.kind },
        { title: "WHERE", value: (c) => storeWhere(c), max: 50 },
        { title: "VAULTS", value: (c) => (c.vault ? `${c.vault} (own)` : c.shared_with.join(", ") || "-"), max: 40 },
        { title: "REFS", value: (c) => String(c.status.references) },
        { title: "LAST REFRESH", value: (c) => formatTime(c.status.last_refresh) },
        { title: "LAST ERROR", value: (c) => c.status.last_error ?? "-", max: 60 },
      ],
      "No secret store connections. Add one with: broker secret-store add <name> --kind vault|aws|google|azure …",
    );
  },
});

const show = defineCommand({
  meta: { name: "show", description: "Show a connection: its settings, auth method, vaults, status and each reference with its last read" },
  args: { ...nameArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const c = await ctx.client.request<SecretStoreConnectionBody>("GET", storePath(args.name), { hints: storeHints(args.name) });
    if (args.json) return printJson(c);
    printLine(`Connection ${c.name}: ${kindWords(c.kind)}`);
    for (const [k, v] of Object.entries(c.settings)) printLine(`  ${k.padEnd(14)}${k === "ca_pem" ? "extra root certificates (PEM)" : String(v)}`);
    printLine(`  ${"auth".padEnd(14)}${authWords(c.auth)}`);
    printLine(`  ${"vaults".padEnd(14)}${ownerWords(c)}`);
    printLine(`  ${"refresh".padEnd(14)}every ${c.refresh_seconds} s; the last value serves ${c.grace_seconds} s more while the store is unreachable`);
    const s = c.status;
    printLine(
      `  ${"status".padEnd(14)}${s.references} reference(s); last refresh ${formatTime(s.last_refresh)}${s.last_error ? `; last error: ${s.last_error}` : ""}`,
    );
    printLine(`  ${"created".padEnd(14)}${formatTime(c.created_at)}; updated ${formatTime(c.updated_at)}`);
    printLine();
    printTable(c.references ?? [], REFERENCE_COLUMNS, `No credential refers to ${c.name} yet: broker credential set <KEY> --ref ${c.name}:<path>#<field>`);
  },
});

const set = defineCommand({
  meta: {
    name: "set",
    description: "Change a connection's settings, refresh, grace or auth (a new --auth replaces the old one whole; its secrets typed hidden or piped)",
  },
  args: { ...nameArg, ...STORE_SETTING_ARGS, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const hints = storeHints(args.name);
    const current = await ctx.client.request<SecretStoreConnectionBody>("GET", storePath(args.name), { hints });
    const { body, method } = storeBodyFromFlags(current.kind as StoreKind, args, false);
    if (Object.keys(body).length === 0) throw new CliFailure("nothing to change: give the flags to change", `\`broker secret-store set --help\` lists them`, 2);
    if (method) body.auth = { ...(body.auth as object), ...(await readAuthSecrets(method, args.name)) };
    const c = await nameStoreFlag(ctx.client.request<SecretStoreConnectionBody>("PATCH", storePath(args.name), { body, hints }));
    if (args.json) return printJson(c);
    printLine(
      `Changed ${c.name}: ${kindWords(c.kind)} at ${storeWhere(c)}, signing in with ${authWords(c.auth)}; every ${c.refresh_seconds} s, grace ${c.grace_seconds} s.`,
    );
    printLine(`Every value read through it is read again; \`broker secret-store check ${c.name}\` reads them now.`);
  },
});
addHelpFooter(set, () => `An empty value removes an optional setting (--namespace "", --ca-file "").\n\n${SECRETS_NOTES}`);

const remove = defineCommand({
  meta: { name: "remove", description: "Remove a connection (refused while a credential refers to it)" },
  args: nameArg,
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", storePath(args.name), { hints: storeHints(args.name) });
    printLine(`Removed secret store connection ${args.name}; its sealed auth is gone.`);
  },
});

const vaultPositional = { vault: { type: "positional", description: "Vault name", required: true } } as const;

const share = defineCommand({
  meta: {
    name: "share",
    description: "Let a vault's credentials refer to one of the owner's connections (owner); --path narrows it to paths starting with a prefix",
  },
  args: {
    ...nameArg,
    ...vaultPositional,
    path: {
      type: "string",
      valueHint: "prefix",
      description:
        "Only paths starting with this prefix, as references write them (payments/); repeatable. Without it: every path the connection can read. Sharing again replaces the prefixes",
    },
  },
  async run({ args, rawArgs }) {
    const ctx = openContext();
    const paths = collectFlagValues(rawArgs, "path");
    const c = await ctx.client.request<SecretStoreConnectionBody>("PUT", storePath(args.name, "vaults", args.vault), {
      ...(paths.length && { body: { paths } }),
      hints: storeHints(args.name),
    });
    const narrowed = c.share_paths[args.vault];
    printLine(
      `Shared ${c.name} with vault ${args.vault}${narrowed ? ` for paths starting with ${narrowed.join(", ")}` : ", every path"} (now ${ownerWords(c)}).`,
    );
    printLine(`Its admins and members may point credentials at it: broker credential set <KEY> --ref ${c.name}:<path>#<field> --vault ${args.vault}`);
  },
});

const unshare = defineCommand({
  meta: { name: "unshare", description: "Stop sharing a connection with a vault (owner; refused while that vault's credentials refer to it)" },
  args: { ...nameArg, ...vaultPositional },
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", storePath(args.name, "vaults", args.vault), { hints: storeHints(args.name) });
    printLine(`Stopped sharing ${args.name} with vault ${args.vault}.`);
  },
});

const check = defineCommand({
  meta: {
    name: "check",
    description: "Read every reference through a connection now (one read moments ago stands) and report each; exits 1 when any fails",
  },
  args: { ...nameArg, ...jsonArg },
  async run({ args }) {
    const ctx = openContext();
    const res = await ctx.client.request<SecretStoreCheckBody>("POST", storePath(args.name, "check"), { hints: storeHints(args.name) });
    if (args.json) {
      printJson(res);
      if (!res.ok) throw new CliExit(1);
      return;
    }
    printTable(res.references, REFERENCE_COLUMNS, `No credential refers to ${args.name}: nothing to read.`);
    const failed = res.references.filter((r) => referenceStatus(r.reference) !== "ok");
    if (res.ok && failed.length === 0) {
      if (res.references.length) printLine(`\nAll ${res.references.length} reference(s) through ${args.name} read.`);
      return;
    }
    throw new CliFailure(
      `${failed.length} of ${res.references.length} reference(s) through ${args.name} failed: ${failed.map((r) => `${r.vault}/${r.key} (${r.reference.text})`).join(", ")}`,
      `fix the secret in the store, or the connection (\`broker secret-store set ${args.name} …\`), then run \`broker secret-store check ${args.name}\` again`,
    );
  },
});

export default defineCommand({
  meta: { name: "secret-store", description: "Connections to HashiCorp Vault, AWS, Google and Azure secret stores that credentials refer to" },
  subCommands: { add, list, show, set, remove, share, unshare, check },
});
