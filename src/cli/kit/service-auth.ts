// `--auth` and its companion flags for `broker service add`: the API's auth object built from them
// (--token-url sets token_url), auth in words for tables (words/'s authSummary: key names and where
// they go, never a value), and the broker's 400 on an auth field told against the flag that set it.
// The broker validates; this only names flags.

import { ApiFailure } from "./client.ts";
import { CliFailure } from "./fail.ts";
import { authSummary, type AuthShape } from "../../words/index.ts";
import {
  MINTED_EXAMPLES,
  MINTED_FIELD_HINTS,
  MINTED_FLAGS,
  MINTED_KEY_FLAGS,
  MINTED_NEEDS_HINT,
  MINTED_NOTES,
  MINTED_RULES,
  type MintedFlags,
  type MintedServiceAuth,
} from "./service-auth-minted.ts";

export { checkWholePem, MINTED_AUTH_ARGS, slotPrompt } from "./service-auth-minted.ts";

export type ServiceAuth =
  | { type: "bearer"; token: string }
  | { type: "basic"; token: string; username?: string }
  | { type: "header"; header: string; token: string; prefix?: string }
  | { type: "query"; param: string; token: string }
  | { type: "path"; template: string; token: string }
  | { type: "passthrough" }
  | MintedServiceAuth;

export interface AuthFlags extends MintedFlags {
  readonly auth: string;
  readonly token?: string;
  readonly header?: string;
  readonly prefix?: string;
  readonly username?: string;
  readonly param?: string;
  readonly template?: string;
}

type CompanionFlag = Exclude<keyof AuthFlags, "auth">;

const COMPANIONS: readonly CompanionFlag[] = ["token", "header", "prefix", "username", "param", "template", ...MINTED_FLAGS];

const AUTH_FLAGS: Record<ServiceAuth["type"], { needs: CompanionFlag[]; allows: CompanionFlag[] }> = {
  bearer: { needs: ["token"], allows: [] },
  basic: { needs: ["token"], allows: ["username"] },
  header: { needs: ["header", "token"], allows: ["prefix"] },
  query: { needs: ["param", "token"], allows: [] },
  path: { needs: ["template", "token"], allows: [] },
  passthrough: { needs: [], allows: [] },
  ...MINTED_RULES,
};

export const AUTH_TYPES = Object.keys(AUTH_FLAGS) as ServiceAuth["type"][];

/** The flags that name credential KEYs (the rest are plain settings). */
const KEY_FLAGS: readonly CompanionFlag[] = ["token", ...MINTED_KEY_FLAGS];

/** What each companion flag is for, when one is missing. */
const NEEDS_HINT: Partial<Record<CompanionFlag, string>> = {
  token: "--token names the credential KEY to inject (see `broker credential list`)",
  header: "--header names the header that carries the credential, e.g. --header X-Api-Key",
  param: "--param names the query parameter that carries the credential, e.g. --param key",
  template: 'the credential goes where {value} is and the agent\'s path follows, e.g. --template "/bot{value}"',
  ...MINTED_NEEDS_HINT,
};

/** A flag's API field: --token-url sets token_url. */
const fieldOf = (flag: CompanionFlag) => flag.replaceAll("-", "_");

/** Turns --auth and its companion flags into the API's auth object, naming any flag missing or out of place. */
export function buildAuth(flags: AuthFlags): ServiceAuth {
  const rule = AUTH_FLAGS[flags.auth as ServiceAuth["type"]];
  if (!rule) throw new CliFailure(`--auth must be one of ${AUTH_TYPES.join(", ")}`, undefined, 2);
  const given = COMPANIONS.filter((f) => flags[f] !== undefined && flags[f] !== "");
  const missing = rule.needs.filter((f) => !given.includes(f));
  if (missing.length) throw new CliFailure(`--auth ${flags.auth} needs ${missing.map((f) => `--${f}`).join(" and ")}`, NEEDS_HINT[missing[0]!], 2);
  const extra = given.filter((f) => !rule.needs.includes(f) && !rule.allows.includes(f));
  if (extra.length) throw new CliFailure(`--auth ${flags.auth} does not take ${extra.map((f) => `--${f}`).join(" or ")}`, undefined, 2);
  const pick = Object.fromEntries(given.map((f) => [fieldOf(f), f === "scopes" ? splitScopes(flags.scopes!) : flags[f]]));
  return { type: flags.auth, ...pick } as ServiceAuth;
}

/** --scopes "read write" or "read,write": the list the API takes. */
function splitScopes(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** Every credential KEY the auth names (none for passthrough), for the "no such key yet" warning. */
export function authKeyNames(auth: ServiceAuth): string[] {
  const a = auth as Record<string, unknown>;
  return KEY_FLAGS.map((f) => a[fieldOf(f)]).filter((k): k is string => typeof k === "string" && k !== "");
}

/**
 * One-line summary for tables: `bearer OPENAI_API_KEY`, `header X-Api-Key: Token <KEY>`, `query ?key= from KEY`,
 * `aws_sigv4 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY s3 eu-west-1`. Key names and settings only; words/ words it.
 */
export function describeAuth(answer: { readonly type: string; readonly [field: string]: unknown }): string {
  return authSummary(answer as unknown as AuthShape); // the broker's answer types auth loosely; its type names the fields
}

export const AUTH_EXAMPLES = `  broker service add api.openai.com --auth bearer --token OPENAI_API_KEY
  broker service add api.example.com --auth header --header X-Api-Key --token EXAMPLE_KEY
  broker service add maps.googleapis.com --auth query --param key --token GOOGLE_API_KEY
  broker service add api.telegram.org --auth path --template "/bot{value}" --token TELEGRAM_TOKEN
${MINTED_EXAMPLES}`;

export const AUTH_NOTES = `--auth is one of ${AUTH_TYPES.slice(0, 6).join(", ")} (a stored credential sent as is) or
${AUTH_TYPES.slice(6).join(", ")} (made or signed by the broker).
--auth query sets the query parameter --param to the credential, replacing any the agent sent.
--auth path puts --template, with the credential where {value} is, before the agent's path: the
agent asks for /getMe and the upstream gets /bot<value>/getMe. Rules and logs see the agent's path.
${MINTED_NOTES}`;

/** Next steps for a refused auth field, by flag. */
const FIELD_HINTS: Partial<Record<string, string>> = {
  auth: "this broker does not know that type: it may be older than this CLI (`broker service add --help` lists the types)",
  token: "`broker credential list` shows the vault's keys",
  param: "give the parameter's name only, e.g. --param key (not ?key= or key=…)",
  template: 'it starts with /, holds {value} once and does not end with /, e.g. --template "/bot{value}"',
  ...MINTED_FIELD_HINTS,
};
for (const f of KEY_FLAGS) FIELD_HINTS[f] ??= "`broker credential list` shows the vault's keys";

/**
 * Awaits an API call; a 400 on `auth.<field>` is told against the flag that set it (`--template must
 * start with /`) with a next step. Flag values are not repeated: a pasted credential must not echo.
 */
/** The flag of a template body's field: settings.username → username, keys.token → key, operations[0] → operations. */
function templateFlagOf(field: string): string | undefined {
  const setting = /^settings\.(\w+)$/.exec(field)?.[1];
  if (setting) return setting.replaceAll("_", "-");
  if (/^keys\./.test(field)) return "key";
  if (/^operations(\[\d+\])?$/.test(field)) return "operations";
  return field === "template" ? "template" : undefined;
}

export async function nameAuthFlag<T>(call: Promise<T>, flags: AuthFlags): Promise<T> {
  try {
    return await call;
  } catch (err) {
    if (!(err instanceof ApiFailure) || err.status !== 400) throw err;
    const template = templateFlagOf(err.field ?? "");
    if (template) {
      const rest = err.message.replace(/ \(400 [^)]*\)$/, "").replace(/^[\w.[\]]+:?\s*/, "");
      const joined = /^(is|must|may|has|goes|comes?)\b/.test(rest) ? " " : ": ";
      throw new CliFailure(`--${template}${joined}${rest}`, "broker template show <id> lists what it takes", 2);
    }
    const field = /^auth\.(\w+)$/.exec(err.field ?? "")?.[1];
    if (!field) throw err;
    const flag = field === "type" ? "auth" : field.replaceAll("_", "-");
    const said = err.message.replace(/ \(400 [^)]*\)$/, "").replace(new RegExp(`^auth\\.${field}\\s*`), "");
    const hint =
      flag === "template" && /^[A-Za-z]:[\\/]/.test(flags.template ?? "")
        ? `${FIELD_HINTS.template}; Git Bash rewrote the leading /, set MSYS_NO_PATHCONV=1`
        : FIELD_HINTS[flag];
    throw new CliFailure(`--${flag} ${said}`, hint, 2);
  }
}
