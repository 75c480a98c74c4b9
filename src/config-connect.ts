// BROKER_CONNECT_<ID>_* settings: the OAuth apps an operator registered, one per catalogue template whose
// provider lets a person connect an account (authorization code with PKCE). <ID> is the template id upper-cased
// with '-' as '_' (github → GITHUB). Pure: read by config.ts, every problem reported; which ids name a
// template is the domain's to say (the catalogue is no leaf). Client secrets travel only inside a Secret.

import { readSecretFile } from "./config-secret-file.ts";
import { Secret } from "./secret.ts";

export type ClientAuthMethod = "client_secret_basic" | "client_secret_post";

/** One provider's OAuth app, as the operator registered it with the redirect URI `<BROKER_PUBLIC_URL>/connect/callback`. */
export interface ConnectApp {
  /** The template id as the variables spell it: GITHUB, GOOGLE_DRIVE. */
  readonly envId: string;
  readonly clientId: string;
  readonly clientSecret: Secret; // SECRET: never log
  /** Overrides of the template's endpoints (GitHub Enterprise, a test provider); undefined: the template's. */
  readonly authorizeUrl: string | undefined;
  readonly tokenUrl: string | undefined;
  /** How the broker authenticates at the token endpoint, as the app is registered there. */
  readonly clientAuthMethod: ClientAuthMethod;
}

type Env = Record<string, string | undefined>;

export const CONNECT_PREFIX = "BROKER_CONNECT_";
/** Longest first: `_CLIENT_SECRET_FILE` before `_CLIENT_SECRET`. */
const SUFFIXES = ["_CLIENT_SECRET_FILE", "_CLIENT_AUTH_METHOD", "_CLIENT_SECRET", "_AUTHORIZE_URL", "_CLIENT_ID", "_TOKEN_URL"] as const;
type Suffix = (typeof SUFFIXES)[number];
const ENV_ID = /^[A-Z0-9]+(_[A-Z0-9]+)*$/;
const LOOPBACK_NAMES = new Set(["127.0.0.1", "localhost", "[::1]"]);

/** The <ID> of a template's variables: `github` → `GITHUB`, `google-drive` → `GOOGLE_DRIVE`. */
export function connectEnvId(templateId: string): string {
  return templateId.toUpperCase().replaceAll("-", "_");
}

/** Every BROKER_CONNECT_<ID>_* app, in the order of their ids; a bad or incomplete one is a problem, not an app. */
export function readConnectApps(env: Env, problems: string[]): ConnectApp[] {
  const byId = new Map<string, Partial<Record<Suffix, string>>>();
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(CONNECT_PREFIX) || value === undefined || value.trim() === "") continue;
    const rest = name.slice(CONNECT_PREFIX.length);
    const suffix = SUFFIXES.find((s) => rest.endsWith(s) && rest.length > s.length);
    const id = suffix && rest.slice(0, -suffix.length);
    if (!suffix || !id || !ENV_ID.test(id)) {
      problems.push(
        `${name}: not a setting; expected ${CONNECT_PREFIX}<ID>_CLIENT_ID, _CLIENT_SECRET, _CLIENT_SECRET_FILE, _CLIENT_AUTH_METHOD, _AUTHORIZE_URL or _TOKEN_URL, <ID> a template id upper-cased with '-' as '_' (GITHUB)`,
      );
      continue;
    }
    byId.set(id, { ...byId.get(id), [suffix]: value });
  }
  return [...byId.keys()].sort().flatMap((id) => readApp(id, byId.get(id)!, problems) ?? []);
}

function readApp(envId: string, raw: Partial<Record<Suffix, string>>, problems: string[]): ConnectApp | undefined {
  const before = problems.length;
  const name = (suffix: Suffix) => `${CONNECT_PREFIX}${envId}${suffix}`;
  const clientId = raw._CLIENT_ID?.trim() ?? "";
  if (clientId === "") problems.push(`${name("_CLIENT_ID")}: required with the other ${CONNECT_PREFIX}${envId}_* settings`);
  else if (clientId.length > 512 || /[\0-\x20\x7f]/.test(clientId)) problems.push(`${name("_CLIENT_ID")}: must be at most 512 printable characters, no spaces`);
  const clientSecret = readClientSecret(raw, name, problems);
  const authorizeUrl = readUrl(name("_AUTHORIZE_URL"), raw._AUTHORIZE_URL, true, problems);
  const tokenUrl = readUrl(name("_TOKEN_URL"), raw._TOKEN_URL, false, problems);
  const method = raw._CLIENT_AUTH_METHOD?.trim() || "client_secret_basic";
  if (method !== "client_secret_basic" && method !== "client_secret_post")
    problems.push(`${name("_CLIENT_AUTH_METHOD")}: must be client_secret_basic or client_secret_post`);
  if (problems.length > before || clientSecret === undefined) return undefined;
  return Object.freeze({ envId, clientId, clientSecret, authorizeUrl, tokenUrl, clientAuthMethod: method as ClientAuthMethod });
}

function readClientSecret(raw: Partial<Record<Suffix, string>>, name: (s: Suffix) => string, problems: string[]): Secret | undefined {
  const inline = raw._CLIENT_SECRET;
  const file = raw._CLIENT_SECRET_FILE?.trim();
  if (inline && file) {
    problems.push(`${name("_CLIENT_SECRET")} and ${name("_CLIENT_SECRET_FILE")}: set exactly one, not both`);
    return undefined;
  }
  if (inline) return new Secret(inline);
  if (!file) {
    problems.push(`${name("_CLIENT_SECRET")}: required (or ${name("_CLIENT_SECRET_FILE")})`);
    return undefined;
  }
  return readSecretFile(name("_CLIENT_SECRET_FILE"), file, problems, (content) => content.trim());
}

/**
 * An endpoint override: https, without credentials or fragment. The authorization endpoint (which the person's
 * browser visits) may be http on 127.0.0.1 or localhost, as BROKER_OIDC_ISSUER may; the token endpoint never:
 * the broker reaches it through its upstream client, which speaks TLS only, and a service's token URL is https.
 */
function readUrl(name: string, raw: string | undefined, browserVisits: boolean, problems: string[]): string | undefined {
  const value = raw?.trim();
  if (!value) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  const loopbackHttp = browserVisits && url?.protocol === "http:" && LOOPBACK_NAMES.has(url.hostname);
  if (!url || (url.protocol !== "https:" && !loopbackHttp) || url.username || url.password || url.hash || value.length > 2048) {
    problems.push(
      browserVisits
        ? `${name}: must be an https URL without credentials or fragment (http only for 127.0.0.1 or localhost)`
        : `${name}: must be an https URL without credentials or fragment (a token endpoint is never reached over plain HTTP)`,
    );
    return undefined;
  }
  return url.href;
}
