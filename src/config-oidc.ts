// BROKER_OIDC_* settings, read by config.ts (the only reader of the environment). The feature is
// off unless BROKER_OIDC_ISSUER is set; once it is, every missing or invalid piece is a problem.
// The client secret (inline or from its file) travels only inside a Secret.

import { readSecretFile } from "./config-secret-file.ts";
import { Secret } from "./secret.ts";

export interface OidcConfig {
  /** Issuer identifier exactly as configured (trailing slash kept: it must match the discovery document). */
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: Secret; // SECRET: never log
  /** Label on the "Sign in with <name>" button and in error pages. */
  readonly name: string;
  readonly scopes: string;
  /** How the broker authenticates to the token endpoint: as the client was registered at the provider. */
  readonly clientAuthMethod: "client_secret_basic" | "client_secret_post";
}

type Env = Record<string, string | undefined>;

const LOOPBACK_NAMES = new Set(["127.0.0.1", "localhost", "[::1]"]);

export function readOidcConfig(env: Env, problems: string[]): OidcConfig | undefined {
  const rawIssuer = env.BROKER_OIDC_ISSUER?.trim();
  if (!rawIssuer) return undefined;
  const before = problems.length;
  const issuer = readIssuer(rawIssuer, problems);
  const clientId = env.BROKER_OIDC_CLIENT_ID?.trim() ?? "";
  if (clientId === "") problems.push("BROKER_OIDC_CLIENT_ID: required when BROKER_OIDC_ISSUER is set");
  const clientSecret = readClientSecret(env, problems);
  const name = env.BROKER_OIDC_NAME?.trim() || "your identity provider";
  if (name.length > 64) problems.push("BROKER_OIDC_NAME: must be at most 64 characters");
  const scopes = (env.BROKER_OIDC_SCOPES?.trim() || "openid email profile").split(/\s+/).join(" ");
  if (!scopes.split(" ").includes("openid")) problems.push("BROKER_OIDC_SCOPES: must include openid");
  const method = env.BROKER_OIDC_CLIENT_AUTH_METHOD?.trim() || "client_secret_basic";
  if (method !== "client_secret_basic" && method !== "client_secret_post")
    problems.push("BROKER_OIDC_CLIENT_AUTH_METHOD: must be client_secret_basic or client_secret_post");
  if (problems.length > before || clientSecret === undefined) return undefined;
  return Object.freeze({ issuer, clientId, clientSecret, name, scopes, clientAuthMethod: method as OidcConfig["clientAuthMethod"] });
}

function readIssuer(raw: string, problems: string[]): string {
  try {
    const url = new URL(raw);
    const loopback = LOOPBACK_NAMES.has(url.hostname);
    const okScheme = url.protocol === "https:" || (url.protocol === "http:" && loopback);
    if (okScheme && !url.search && !url.hash && !url.username && !url.password) return raw;
  } catch {
    // reported below
  }
  problems.push("BROKER_OIDC_ISSUER: must be an https URL without query or fragment (http only for 127.0.0.1 or localhost)");
  return raw;
}

function readClientSecret(env: Env, problems: string[]): Secret | undefined {
  const inline = env.BROKER_OIDC_CLIENT_SECRET;
  const file = env.BROKER_OIDC_CLIENT_SECRET_FILE?.trim();
  if (inline && file) {
    problems.push("BROKER_OIDC_CLIENT_SECRET and BROKER_OIDC_CLIENT_SECRET_FILE: set exactly one, not both");
    return undefined;
  }
  if (inline) return new Secret(inline);
  if (!file) {
    problems.push("BROKER_OIDC_CLIENT_SECRET: required when BROKER_OIDC_ISSUER is set (or BROKER_OIDC_CLIENT_SECRET_FILE)");
    return undefined;
  }
  return readSecretFile("BROKER_OIDC_CLIENT_SECRET_FILE", file, problems, (content) => content.trim());
}
