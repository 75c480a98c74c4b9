// A service's auth in words: how the credential is made and sent, said once for each reader. People
// deciding a proposal read a sentence (the approval page and the console's proposals, the same
// one); tables read a short line (the CLI) or the keys and a note (the console's services); agents
// read what they must do themselves (/discover's `sent`). Key names and settings only, never a value.

import { isMintedAuthType } from "../policy/index.ts";
import type { AuthType, ProposedAuth } from "../store/index.ts";

/**
 * The API's auth object as every caller holds it (the domain's ServiceAuth, a stored proposal's, the
 * CLI's answers): the type, the key names and the plain settings. The store's shape, loosened where an
 * answer's fields are plain strings, so any of them fits.
 */
export type AuthShape = Omit<ProposedAuth, "client_auth" | "scopes"> & { readonly client_auth?: string; readonly scopes?: readonly string[] };

/** An https URL as host and path (no lone "/"), the way every description shows an endpoint. */
function shortUrl(url: string | undefined): string {
  if (!url || !URL.canParse(url)) return url || "?";
  const u = new URL(url);
  return `${u.host}${u.pathname === "/" ? "" : u.pathname}`;
}

/** Where a URL credential travels (names only): "sent as the ?key= query parameter"; undefined for the other types. */
export function describeUrlAuth(auth: Pick<AuthShape, "type" | "param" | "template">): string | undefined {
  if (auth.type === "query") return `sent as the ?${auth.param ?? ""}= query parameter`;
  if (auth.type === "path") return `sent in the path as ${auth.template ?? ""}, before the requested path`;
  return undefined;
}

/** How a minted credential is made and sent, in a sentence: the tail of describeAuth for the types the broker mints or signs. */
export function describeMintedAuth(f: AuthShape): string {
  switch (f.type) {
    case "oauth2_client_credentials":
      return `OAuth 2.0 access token from ${shortUrl(f.token_url)} (client ${f.client_id}, secret ${f.client_secret}${f.scopes?.length ? `, scopes ${f.scopes.join(" ")}` : ""}${f.audience ? `, audience ${f.audience}` : ""}), sent as Authorization: Bearer <token>`;
    case "oauth2_refresh":
      return `OAuth 2.0 access token refreshed at ${shortUrl(f.token_url)} with ${f.refresh_token} (client ${f.client_id}, secret ${f.client_secret}), sent as Authorization: Bearer <token>`;
    case "aws_sigv4":
      return `AWS Signature V4 with ${f.access_key_id} and ${f.secret_access_key}${f.session_token ? ` (session token ${f.session_token})` : ""}, service ${f.service ?? "from the host"}, region ${f.region ?? "from the host"}`;
    case "github_app":
      return `GitHub App ${f.app_id} installation ${f.installation_id} token, minted with ${f.private_key}${f.api_url ? ` at ${shortUrl(f.api_url)}` : ""}, sent as Authorization: Bearer <token>`;
    default:
      return f.type;
  }
}

/**
 * How the credential would be sent, in a sentence for the person deciding: "NEW_KEY in the x-api-key
 * header after "Key "", "KEY, sent as the ?key= query parameter". The approval page and the console's
 * proposals both say it this way.
 */
export function describeAuth(auth: AuthShape): string {
  switch (auth.type) {
    case "passthrough":
      return "none (passthrough)";
    case "bearer":
      return `${auth.token}, sent as Authorization: Bearer <value>`;
    case "basic":
      return `${auth.token}, sent as Authorization: Basic${auth.username ? ` (user ${auth.username}, the value as password)` : " (the value)"}`;
    case "header":
      return `${auth.token} in the ${auth.header} header${auth.prefix ? ` after "${auth.prefix}"` : ""}`;
    case "query":
    case "path":
      return `${auth.token}, ${describeUrlAuth(auth)}`;
    default:
      return describeMintedAuth(auth);
  }
}

/**
 * One line for the CLI's tables and confirmations: `bearer OPENAI_API_KEY`, `header X-Api-Key: Token <KEY>`,
 * `query ?key= from KEY`, `aws_sigv4 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY s3 eu-west-1`.
 */
export function authSummary(auth: AuthShape): string {
  switch (auth.type) {
    case "bearer":
      return `bearer ${auth.token}`;
    case "basic":
      return `basic ${auth.username ? `${auth.username}:` : ""}${auth.token}`;
    case "header":
      return `header ${auth.header}: ${auth.prefix ?? ""}<${auth.token}>`;
    case "query":
      return `query ?${auth.param}= from ${auth.token}`;
    case "path":
      return `path ${auth.template} from ${auth.token}`;
    case "passthrough":
      return "passthrough";
    case "oauth2_client_credentials":
      return `oauth2_client_credentials ${auth.client_id}/${auth.client_secret} at ${shortUrl(auth.token_url)}${auth.scopes?.length ? ` scopes ${auth.scopes.join(" ")}` : ""}`;
    case "oauth2_refresh":
      return `oauth2_refresh ${auth.refresh_token} (client ${auth.client_id}/${auth.client_secret}) at ${shortUrl(auth.token_url)}`;
    case "aws_sigv4":
      return `aws_sigv4 ${auth.access_key_id}/${auth.secret_access_key}${auth.session_token ? `+${auth.session_token}` : ""} ${auth.service ?? "<service from host>"} ${auth.region ?? "<region from host>"}`;
    case "github_app":
      return `github_app ${auth.app_id} installation ${auth.installation_id} key ${auth.private_key}${auth.api_url ? ` at ${shortUrl(auth.api_url)}` : ""}`;
    default:
      return (auth as { type: string }).type;
  }
}

/** Each type's name in a badge: "Bearer", "OAuth refresh", "AWS SigV4". */
export const AUTH_TYPE_LABELS: Readonly<Record<AuthType, string>> = {
  bearer: "Bearer",
  basic: "Basic",
  header: "Header",
  query: "Query",
  path: "Path",
  passthrough: "Passthrough",
  oauth2_client_credentials: "OAuth client",
  oauth2_refresh: "OAuth refresh",
  aws_sigv4: "AWS SigV4",
  github_app: "GitHub App",
};

/** Text, with the names a page sets as code marked: a header's name. */
export type Phrase = readonly (string | { readonly name: string })[];

/**
 * A table cell's parts: the credential keys the auth uses, then in words where they go ("as user
 * robot", "token refreshed at auth.example.com/token", "signs for s3 in eu-west-1"). Passthrough uses
 * no key and says so.
 */
export function authCell(auth: AuthShape): { readonly keys: readonly string[]; readonly detail: Phrase } {
  const keys = (...names: (string | undefined)[]) => names.filter((k): k is string => !!k);
  switch (auth.type) {
    case "passthrough":
      return { keys: [], detail: ["no credential; requests pass as sent"] };
    case "bearer":
      return { keys: keys(auth.token), detail: [] };
    case "basic":
      return { keys: keys(auth.token), detail: auth.username ? [`as user ${auth.username}`] : [] };
    case "header":
      return { keys: keys(auth.token), detail: ["in ", { name: auth.header ?? "" }, ...(auth.prefix ? [` after “${auth.prefix}”`] : [])] };
    case "query":
    case "path":
      return { keys: keys(auth.token), detail: [describeUrlAuth(auth)!] };
    case "oauth2_client_credentials":
      return {
        keys: keys(auth.client_id, auth.client_secret),
        detail: [
          `token from ${shortUrl(auth.token_url)}${auth.scopes?.length ? `, scopes ${auth.scopes.join(" ")}` : ""}${auth.audience ? `, audience ${auth.audience}` : ""}`,
        ],
      };
    case "oauth2_refresh":
      return { keys: keys(auth.refresh_token, auth.client_id, auth.client_secret), detail: [`token refreshed at ${shortUrl(auth.token_url)}`] };
    case "aws_sigv4":
      return {
        keys: keys(auth.access_key_id, auth.secret_access_key, auth.session_token),
        detail: [`signs for ${auth.service ?? "the host's service"} in ${auth.region ?? "the host's region"}`],
      };
    case "github_app":
      return {
        keys: keys(auth.private_key),
        detail: [`app ${auth.app_id}, installation ${auth.installation_id}${auth.api_url ? ` at ${shortUrl(auth.api_url)}` : ""}`],
      };
    default:
      return { keys: keys(auth.token), detail: [] };
  }
}

/**
 * What an agent must know to send its request, for /discover's `sent`: where a URL credential goes
 * (so the agent leaves it out), placeholder keys for SigV4, no Authorization header for a minted
 * token. Undefined where the agent need do nothing (a header the broker sets).
 */
export function describeAuthForAgent(auth: AuthShape): string | undefined {
  if (auth.type === "query" || auth.type === "path") return describeUrlAuth(auth);
  if (auth.type === "aws_sigv4")
    return "sign with any placeholder AWS keys (e.g. AWS_ACCESS_KEY_ID=placeholder); the broker drops that signature and signs each request itself";
  if (isMintedAuthType(auth.type)) return "the broker mints a short-lived token and sends it as Authorization: Bearer <token>; send no Authorization header";
  return undefined;
}

/** What a credential key named in a minted type's field is, for the person pasting its value (the types' key fields, in their order). */
const FIELD_WORDS: Record<string, string> = {
  client_id: "the OAuth client ID",
  client_secret: "the OAuth client secret",
  refresh_token: "the OAuth refresh token",
  access_key_id: "the AWS access key ID",
  secret_access_key: "the AWS secret access key",
  session_token: "the AWS session token",
  private_key: "the GitHub App private key",
};

/** "the GitHub App private key for api.github.com", for each proposed service whose minted auth names `key`. */
export function slotUses(services: readonly { readonly host: string; readonly auth: AuthShape }[], key: string): string[] {
  const named = (auth: AuthShape, field: string) => (auth as unknown as Record<string, unknown>)[field] === key;
  return services.flatMap((s) =>
    isMintedAuthType(s.auth.type) ? Object.entries(FIELD_WORDS).flatMap(([field, words]) => (named(s.auth, field) ? [`${words} for ${s.host}`] : [])) : [],
  );
}

/** Whether `key` is a GitHub App's private key: its value is a whole PEM file, line breaks and all. */
export function isPemSlot(services: readonly { readonly auth: { readonly type: string; readonly private_key?: unknown } }[], key: string): boolean {
  return services.some((s) => s.auth.type === "github_app" && s.auth.private_key === key);
}

/** Beside a private key's password field (which drops line breaks; the broker puts them back). */
export const PEM_HINT = "Paste the whole .pem file the app's settings page gave you, BEGIN and END lines included.";
