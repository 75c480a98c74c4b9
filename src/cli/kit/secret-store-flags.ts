// The flags of `broker secret-store add|set` and the API body built from them: each kind's settings,
// its auth (a method and its non-secret fields), the refresh and grace. Secret fields of an auth are never
// flags (see secret-store-secrets.ts): they are read at a hidden prompt or from standard input. A flag
// that is not the kind's, or not the method's, is refused by name before anything is read or sent.

import { Secret } from "../../secret.ts";
import { CliFailure } from "./fail.ts";
import { readSettingFile } from "./secret-store-secrets.ts";

export const STORE_KINDS = ["vault", "aws", "google", "azure"] as const;
export type StoreKind = (typeof STORE_KINDS)[number];

export const AUTH_METHODS: Record<StoreKind, readonly string[]> = {
  vault: ["token", "approle", "jwt", "kubernetes"],
  aws: ["keys", "environment"],
  google: ["service_account_key"],
  azure: ["client_credentials"],
};
const ALL_METHODS = [...new Set(Object.values(AUTH_METHODS).flat())];

/** The flags that are settings of a kind (`--ca-file` is read into ca_pem), and those that are its auth's. */
const SETTING_FLAGS: Record<StoreKind, readonly string[]> = {
  vault: ["address", "namespace", "mount", "ca-file"],
  aws: ["region", "endpoint", "sts-endpoint"],
  google: ["project", "endpoint"],
  azure: ["vault-url", "authority"],
};
const REQUIRED_SETTING: Record<StoreKind, string> = { vault: "address", aws: "region", google: "project", azure: "vault-url" };

/** Per method: the flags it needs, those it allows, and whether it has secrets read apart. */
const METHOD_FLAGS: Record<string, { needs: string[]; allows: string[] }> = {
  token: { needs: [], allows: [] },
  approle: { needs: [], allows: ["auth-mount"] },
  jwt: { needs: ["role", "token-file"], allows: ["auth-mount"] },
  kubernetes: { needs: ["role", "token-file"], allows: ["auth-mount"] },
  keys: { needs: [], allows: [] },
  environment: { needs: [], allows: [] },
  service_account_key: { needs: ["key-file"], allows: [] },
  client_credentials: { needs: ["tenant", "client-id"], allows: [] },
};
const AUTH_DETAIL_FLAGS = ["role", "token-file", "auth-mount", "key-file", "tenant", "client-id"] as const;
const AUTH_FIELD: Record<string, string> = { role: "role", "token-file": "token_file", "auth-mount": "mount", tenant: "tenant", "client-id": "client_id" };

/** A flag's API field: --vault-url sets vault_url, --ca-file sets ca_pem. */
const settingField = (flag: string) => (flag === "ca-file" ? "ca_pem" : flag.replaceAll("-", "_"));

const s = (description: string, valueHint?: string) => ({ type: "string", description, ...(valueHint && { valueHint }) }) as const;

/** The flags `set` shares with `add` (not --kind, --vault). */
export const STORE_SETTING_ARGS = {
  refresh: s("Seconds between reads of each value from the store (10 to 86400; default 300)", "seconds"),
  grace: s("Seconds the last value keeps serving past its interval while the store is unreachable (0 to 86400; default 300; 0 fails closed)", "seconds"),
  auth: s("How the broker signs in: vault token (default), approle, jwt, kubernetes; aws keys (default), environment (see SECRETS)", "method"),
  address: s("vault: the server's address, https://host[:port]", "url"),
  namespace: s("vault: the Enterprise or OpenBao namespace"),
  mount: s("vault: the KV v2 mount (default secret)"),
  "ca-file": s("vault: a PEM file of extra root certificates for the address", "file"),
  role: s("vault --auth jwt|kubernetes: the role to log in as"),
  "token-file": s("vault --auth jwt|kubernetes: the JWT's file on the broker's machine (read again at every login)", "path"),
  "auth-mount": s("vault --auth approle|jwt|kubernetes: the auth method's mount (default: the method's name)", "mount"),
  region: s("aws: the region, e.g. eu-west-1"),
  endpoint: s("aws, google: another API endpoint (https://)", "url"),
  "sts-endpoint": s("aws: another STS endpoint (https://), for web identity", "url"),
  project: s("google: the project id or number"),
  "key-file": s("google: the service-account key file (JSON); its private key is sealed, never shown", "file"),
  "vault-url": s("azure: the key vault's URL, https://<name>.vault.azure.net", "url"),
  authority: s("azure: another Microsoft Entra authority (https://)", "url"),
  tenant: s("azure: the tenant id or domain"),
  "client-id": s("azure: the application (client) id", "id"),
} as const;

export type StoreFlags = { readonly [K in keyof typeof STORE_SETTING_ARGS]?: string };

/** What the secret reader must ask for: the auth's method (its secret fields follow from it). */
export interface StoreBody {
  readonly body: Record<string, unknown>;
  /** The new auth's method, when the body carries a new auth (its secrets still to be read). */
  readonly method?: string;
}

const given = (flags: StoreFlags, name: keyof StoreFlags) => flags[name] !== undefined;

/** `--refresh 300`: a whole number of seconds (the broker checks the range). */
function seconds(flag: "refresh" | "grace", raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\d{1,6}$/.test(raw.trim())) throw new CliFailure(`--${flag}: "${raw}" is not a number of seconds`, `e.g. --${flag} 300`, 2);
  return Number(raw.trim());
}

/**
 * The body of `POST /v1/secret-stores` (creating) or `PATCH /v1/secret-stores/{name}` from the flags.
 * Creating, the kind's address (or region, project, URL) is required and the auth defaults to the kind's
 * first method. Changing, an empty value removes an optional setting, and a new auth replaces the old whole.
 */
export function storeBodyFromFlags(kind: StoreKind, flags: StoreFlags, creating: boolean): StoreBody {
  const other = (Object.keys(SETTING_FLAGS) as StoreKind[]).flatMap((k) => (k === kind ? [] : SETTING_FLAGS[k]));
  const stray = other.filter((f) => !SETTING_FLAGS[kind].includes(f) && given(flags, f as keyof StoreFlags));
  if (stray.length) {
    const owner = (f: string) => (Object.keys(SETTING_FLAGS) as StoreKind[]).filter((k) => SETTING_FLAGS[k].includes(f)).join(" or ");
    throw new CliFailure(
      `--${stray[0]} is a setting of --kind ${owner(stray[0]!)}, not of ${kind}`,
      `\`broker secret-store add --help\` lists each kind's flags`,
      2,
    );
  }
  const body: Record<string, unknown> = {};
  for (const flag of SETTING_FLAGS[kind]) {
    const raw = flags[flag as keyof StoreFlags];
    if (raw === undefined) continue;
    const value = raw.trim();
    if (value === "") {
      if (creating || flag === REQUIRED_SETTING[kind]) throw new CliFailure(`--${flag} is empty`, `give a value, e.g. ${example(flag)}`, 2);
      body[settingField(flag)] = null; // changing: removed
    } else body[settingField(flag)] = flag === "ca-file" ? readSettingFile("--ca-file", value) : value;
  }
  const required = REQUIRED_SETTING[kind];
  if (creating && !given(flags, required as keyof StoreFlags))
    throw new CliFailure(`--kind ${kind} needs --${required}`, `e.g. broker secret-store add <name> --kind ${kind} ${example(required)}`, 2);
  const refresh = seconds("refresh", flags.refresh);
  const grace = seconds("grace", flags.grace);
  if (refresh !== undefined) body.refresh_seconds = refresh;
  if (grace !== undefined) body.grace_seconds = grace;
  const method = authMethod(kind, flags, creating);
  if (method) body.auth = { method, ...authFields(method, flags) };
  return { body, method };
}

/** The auth's method: --auth, else (creating, or a single-method kind given its auth flags) the kind's first. */
function authMethod(kind: StoreKind, flags: StoreFlags, creating: boolean): string | undefined {
  const methods = AUTH_METHODS[kind];
  const details = AUTH_DETAIL_FLAGS.filter((f) => given(flags, f));
  if (flags.auth !== undefined) {
    const method = flags.auth.trim().replaceAll("-", "_");
    if (!methods.includes(method)) {
      const known = ALL_METHODS.includes(method) ? ` (that is a method of another kind)` : "";
      throw new CliFailure(`--auth for --kind ${kind} is ${orWords(methods)}${known}`, undefined, 2);
    }
    return method;
  }
  if (creating || (methods.length === 1 && details.length)) return methods[0];
  if (details.length)
    throw new CliFailure(
      `--${details[0]} goes with a new auth: give --auth too`,
      `a new auth replaces the old one whole, e.g. --auth ${methods[1] ?? methods[0]}`,
      2,
    );
  return undefined;
}

/** The method's non-secret fields from its flags; a flag it does not take, or one it needs and lacks, is named. */
function authFields(method: string, flags: StoreFlags): Record<string, unknown> {
  const rule = METHOD_FLAGS[method]!;
  const extra = AUTH_DETAIL_FLAGS.filter((f) => given(flags, f) && !rule.needs.includes(f) && !rule.allows.includes(f));
  if (extra.length)
    throw new CliFailure(`--auth ${method} does not take --${extra[0]}`, `\`broker secret-store add --help\` says which flags go with each method`, 2);
  const missing = rule.needs.filter((f) => !flags[f as keyof StoreFlags]?.trim());
  if (missing.length) throw new CliFailure(`--auth ${method} needs ${missing.map((f) => `--${f}`).join(" and ")}`, `e.g. ${missing.map(example).join(" ")}`, 2);
  const out: Record<string, unknown> = {};
  for (const f of [...rule.needs, ...rule.allows]) {
    const raw = flags[f as keyof StoreFlags]?.trim();
    if (!raw) continue;
    if (f === "key-file")
      out.key = new Secret(readSettingFile("--key-file", raw)); // a private key: never printed
    else out[AUTH_FIELD[f]!] = raw;
  }
  return out;
}

const EXAMPLES: Record<string, string> = {
  address: "--address https://vault.example.com:8200",
  region: "--region eu-west-1",
  project: "--project my-project",
  "vault-url": "--vault-url https://my-vault.vault.azure.net",
  role: "--role broker",
  "token-file": "--token-file /var/run/secrets/tokens/vault-token",
  "key-file": "--key-file ./service-account.json",
  tenant: "--tenant contoso.onmicrosoft.com",
  "client-id": "--client-id 00000000-0000-0000-0000-000000000000",
};
function example(flag: string): string {
  return EXAMPLES[flag] ?? `--${flag} <value>`;
}

function orWords(words: readonly string[]): string {
  return words.length === 1 ? words[0]! : `${words.slice(0, -1).join(", ")} or ${words.at(-1)}`;
}

/** The flag that set a body field the broker refused (`auth.token_file` → `--token-file`), or undefined. */
export function flagOfField(field: string): string | undefined {
  if (field === "refresh_seconds") return "--refresh";
  if (field === "grace_seconds") return "--grace";
  if (field === "ca_pem") return "--ca-file";
  if (field === "auth.key") return "--key-file";
  if (field === "auth.mount") return "--auth-mount";
  if (field === "auth" || field === "auth.method") return "--auth";
  const auth = /^auth\.(role|token_file|tenant|client_id)$/.exec(field)?.[1];
  if (auth) return `--${auth.replaceAll("_", "-")}`;
  const setting = Object.values(SETTING_FLAGS)
    .flat()
    .find((f) => settingField(f) === field);
  return setting ? `--${setting}` : field === "kind" || field === "vault" ? `--${field}` : undefined;
}
