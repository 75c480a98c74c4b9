// The flags of the auth types whose credential the broker mints or signs itself (oauth2_client_credentials,
// oauth2_refresh, aws_sigv4, github_app): which each type needs and allows, what a missing or refused one
// is for, their help examples, and the approve-time check that a GitHub App's PEM key was not cut off at
// its first line. Key flags name credential KEYs, never values. The types in words are words/'s.

import type { Secret } from "../../secret.ts";
import { isPemSlot } from "../../words/index.ts";
import { CliFailure } from "./fail.ts";

export type MintedServiceAuth =
  | {
      type: "oauth2_client_credentials";
      token_url: string;
      client_id: string;
      client_secret: string;
      client_auth?: string;
      scopes?: string[];
      audience?: string;
    }
  | { type: "oauth2_refresh"; token_url: string; client_id: string; client_secret: string; refresh_token: string; client_auth?: string }
  | { type: "aws_sigv4"; access_key_id: string; secret_access_key: string; session_token?: string; region?: string; service?: string }
  | { type: "github_app"; app_id: string; installation_id: string; private_key: string; api_url?: string };

/** citty args for the minted types' flags, spread into `service add`; --token-url sets token_url. */
export const MINTED_AUTH_ARGS = {
  "token-url": { type: "string", valueHint: "url", description: "OAuth: the token endpoint, https://…" },
  "client-id": { type: "string", valueHint: "KEY", description: "OAuth: credential KEY holding the client id" },
  "client-secret": { type: "string", valueHint: "KEY", description: "OAuth: credential KEY holding the client secret" },
  "refresh-token": { type: "string", valueHint: "KEY", description: "oauth2_refresh: credential KEY holding the refresh token" },
  "client-auth": { type: "string", valueHint: "basic|post", description: "OAuth: basic (default) or post: how the client authenticates at the token endpoint" },
  scopes: { type: "string", valueHint: "scopes", description: 'oauth2_client_credentials: scopes, e.g. "read write"' },
  audience: { type: "string", valueHint: "audience", description: "oauth2_client_credentials: the audience some providers require" },
  "access-key-id": { type: "string", valueHint: "KEY", description: "aws_sigv4: credential KEY holding the access key id" },
  "secret-access-key": { type: "string", valueHint: "KEY", description: "aws_sigv4: credential KEY holding the secret access key (signs only)" },
  "session-token": { type: "string", valueHint: "KEY", description: "aws_sigv4: credential KEY holding a session token (temporary credentials)" },
  region: { type: "string", valueHint: "region", description: "aws_sigv4: e.g. us-east-1 (default: from the host)" },
  service: { type: "string", valueHint: "service", description: "aws_sigv4: e.g. s3 (default: from the host)" },
  "app-id": { type: "string", valueHint: "id", description: "github_app: the app's id, e.g. 123456" },
  "installation-id": { type: "string", valueHint: "id", description: "github_app: the installation's id" },
  "private-key": { type: "string", valueHint: "KEY", description: "github_app: credential KEY holding the app's PEM private key" },
  "api-url": { type: "string", valueHint: "url", description: "github_app: API root for GitHub Enterprise Server, https://host/api/v3" },
} as const;

export type MintedFlag = keyof typeof MINTED_AUTH_ARGS;
export type MintedFlags = { readonly [F in MintedFlag]?: string };

export const MINTED_FLAGS = Object.keys(MINTED_AUTH_ARGS) as MintedFlag[];

export const MINTED_RULES: Record<MintedServiceAuth["type"], { needs: MintedFlag[]; allows: MintedFlag[] }> = {
  oauth2_client_credentials: { needs: ["token-url", "client-id", "client-secret"], allows: ["scopes", "audience", "client-auth"] },
  oauth2_refresh: { needs: ["token-url", "client-id", "client-secret", "refresh-token"], allows: ["client-auth"] },
  aws_sigv4: { needs: ["access-key-id", "secret-access-key"], allows: ["session-token", "region", "service"] },
  github_app: { needs: ["app-id", "installation-id", "private-key"], allows: ["api-url"] },
};

/** The flags that name credential KEYs (the rest are plain settings). */
export const MINTED_KEY_FLAGS: readonly MintedFlag[] = [
  "client-id",
  "client-secret",
  "refresh-token",
  "access-key-id",
  "secret-access-key",
  "session-token",
  "private-key",
];

const OAUTH_KEYS = "--client-id and --client-secret name the credential KEYs holding the OAuth client's id and secret (see `broker credential list`)";
const AWS_KEYS = "--access-key-id and --secret-access-key name the credential KEYs holding the AWS access key (see `broker credential list`)";

/** What each flag is for, when one is missing. */
export const MINTED_NEEDS_HINT: Partial<Record<MintedFlag, string>> = {
  "token-url": "--token-url is the provider's token endpoint, e.g. --token-url https://auth.example.com/oauth/token",
  "client-id": OAUTH_KEYS,
  "client-secret": OAUTH_KEYS,
  "refresh-token": "--refresh-token names the credential KEY holding the refresh token; the broker replaces it when the provider rotates it",
  "access-key-id": AWS_KEYS,
  "secret-access-key": AWS_KEYS,
  "app-id": "--app-id is the GitHub App's id from its settings page, e.g. --app-id 123456",
  "installation-id": "--installation-id is the number at the end of the installation's settings URL, e.g. --installation-id 45678901",
  "private-key": "--private-key names the credential KEY holding the app's PEM key: store it with `broker credential set KEY < app.pem`",
};

/** Next steps for a refused field, by flag. */
export const MINTED_FIELD_HINTS: Partial<Record<string, string>> = {
  "token-url": "give the token endpoint's full https:// URL, e.g. --token-url https://auth.example.com/oauth/token",
  "api-url": "give the API root's full https:// URL, e.g. --api-url https://ghe.example.com/api/v3",
  "client-auth": "--client-auth basic (the default: HTTP Basic) or --client-auth post (in the request body)",
  scopes: 'give scope names separated by spaces or commas, e.g. --scopes "read write"',
  region: "e.g. --region us-east-1, or leave it out to read it from the host",
  service: "e.g. --service s3, or leave it out to read it from the host",
  "installation-id": "the number at the end of the installation's settings URL",
  ...Object.fromEntries(MINTED_KEY_FLAGS.map((f) => [f, "`broker credential list` shows the vault's keys"])),
};

export const MINTED_EXAMPLES = `  broker service add api.example.com --auth oauth2_client_credentials --token-url https://auth.example.com/oauth/token \\
      --client-id EXAMPLE_CLIENT_ID --client-secret EXAMPLE_CLIENT_SECRET --scopes "read:orders write:orders"
  broker service add api.crm.example --auth oauth2_refresh --token-url https://auth.crm.example/oauth/token \\
      --client-id CRM_CLIENT_ID --client-secret CRM_CLIENT_SECRET --refresh-token CRM_REFRESH_TOKEN
  broker service add s3.eu-west-1.amazonaws.com --auth aws_sigv4 --access-key-id AWS_ACCESS_KEY_ID \\
      --secret-access-key AWS_SECRET_ACCESS_KEY --region eu-west-1 --service s3
  broker service add api.github.com --auth github_app --app-id 123456 --installation-id 45678901 \\
      --private-key GITHUB_APP_KEY`;

export const MINTED_NOTES = `The last four types have the broker make or sign the credential itself from stored keys (the key flags
name credential KEYs, never values): oauth2_client_credentials and oauth2_refresh get an access token from
--token-url (the client authenticates with HTTP Basic, or in the body with --client-auth post) and send
it as Authorization: Bearer; aws_sigv4 signs each request (--region and --service default to what the
host says, as in s3.eu-west-1.amazonaws.com); github_app mints installation tokens with the app's PEM key
(store it with \`broker credential set GITHUB_APP_KEY < app.pem\`; --api-url for GitHub Enterprise Server).`;

type ProposedServices = readonly { auth: { type: string; private_key?: string } }[];

/** `proposal approve`'s prompt for a slot; a GitHub App key says it is one. */
export function slotPrompt(services: ProposedServices, key: string, exists: boolean): string {
  return `Value for ${key}${isPemSlot(services, key) ? " (the GitHub App's PEM private key)" : ""}${exists ? " (empty keeps the stored value)" : ""} (input hidden): `;
}

/**
 * A PEM key has line breaks, and a prompt or a piped line ends at the first: a value for a GitHub App
 * key that begins a PEM block without ending it was cut short, and is refused rather than stored broken.
 */
export function checkWholePem(services: ProposedServices, key: string, value: Secret, id: number): void {
  const text = value.reveal();
  if (!isPemSlot(services, key) || !text.startsWith("-----BEGIN") || text.includes("-----END")) return;
  throw new CliFailure(
    `${key} got only the first line of a PEM key: nothing was approved`,
    `store the key from its file first, \`broker credential set ${key} < app.pem\`, then run \`broker proposal approve ${id}\` and leave ${key} empty to keep it`,
  );
}
