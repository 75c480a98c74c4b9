// Which templates a person can connect an account for, and how: the operator's app for the template
// (BROKER_CONNECT_<ID>_*), the endpoints (the app's overrides or the template's), the service's host and the
// key names its auth uses; the contract the composition fills (`redeem`), and start-up warnings. Pure.
//
// The app's client id and secret are the operator's, for the whole instance: they are never stored in a
// vault (where every member could reveal them, and an admin could point a service at them). A connected
// account's service names them as `<ID>_CLIENT_ID` and `<ID>_CLIENT_SECRET` with the app's token endpoint,
// and the egress plan takes their values from the configuration when it mints (`operatorClient`); only the
// refresh token is a vault credential.

import { createHash } from "node:crypto";
import { NotFound } from "../errors.ts";
import { connectEnvId, type ClientAuthMethod, type ConnectApp } from "../config-connect.ts";
import { Secret } from "../secret.ts";
import { parseHostPattern } from "../policy/index.ts";
import { templateById, TEMPLATES, type Template } from "../templates/index.ts";

export const CONNECT_STATE_TTL_MS = 10 * 60 * 1000;
/** Where providers send the browser back; the redirect URI the operator registers is the public URL plus this. */
export const CONNECT_CALLBACK_PATH = "/connect/callback";

/** One authorization-code redemption at a token endpoint. SECRET: the client secret, the code and the verifier. */
export interface CodeRedemption {
  readonly tokenUrl: string;
  readonly clientId: string;
  readonly clientSecret: Secret;
  readonly clientAuth: "basic" | "post";
  readonly code: Secret;
  readonly codeVerifier: Secret;
  readonly redirectUri: string;
}

/** The refresh token (SECRET), or why there is none, in words that hold no value. */
export type Redeemed = { readonly refreshToken: Secret } | { readonly failure: string };

/** What connecting accounts needs beyond the domain: the operator's apps and a way to reach token endpoints. */
export interface ConnectDeps {
  /** BROKER_CONNECT_<ID>_*, one per template id. */
  readonly apps: readonly ConnectApp[];
  /** `<BROKER_PUBLIC_URL>/connect/callback`. */
  readonly redirectUri: string;
  readonly redeem: (r: CodeRedemption) => Promise<Redeemed>;
}

/**
 * The key names a connected account's service uses: `<ID>_REFRESH_TOKEN`, the one credential a connection
 * writes, and `<ID>_CLIENT_ID` and `<ID>_CLIENT_SECRET`, which name the operator's app (never a vault's value).
 */
export interface ConnectKeys {
  readonly clientId: string;
  readonly clientSecret: string;
  readonly refreshToken: string;
}

/** A template whose provider the operator set up, resolved: endpoints, the service's host and the keys. */
export interface ConnectPlan {
  readonly template: Template;
  readonly app: ConnectApp;
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  readonly host: string;
  readonly keys: ConnectKeys;
}

/** Only the apps are read: the plan cache and the console pass the configured apps alone. */
type Apps = Pick<ConnectDeps, "apps"> | undefined;

function appFor(connect: Apps, t: Template): ConnectApp | undefined {
  return connect?.apps.find((a) => a.envId === connectEnvId(t.id));
}

/** The service's host: the template's first, which must be a name, not a pattern. */
function hostOf(t: Template): string | undefined {
  const first = t.hosts[0];
  if (first === undefined || first.includes("*")) return undefined;
  return parseHostPattern(first, { allowIp: false }).text;
}

export function planFor(connect: Apps, templateId: string): ConnectPlan | undefined {
  const t = templateById(templateId);
  const app = t && appFor(connect, t);
  const host = t && hostOf(t);
  if (!t?.connect || !app || !host) return undefined;
  const id = app.envId;
  return {
    template: t,
    app,
    authorizeUrl: app.authorizeUrl ?? t.connect.authorizeUrl,
    tokenUrl: app.tokenUrl ?? t.connect.tokenUrl,
    host,
    keys: { clientId: `${id}_CLIENT_ID`, clientSecret: `${id}_CLIENT_SECRET`, refreshToken: `${id}_REFRESH_TOKEN` },
  };
}

/**
 * Whether a person can connect an account for template `templateId` on this broker: the template has a
 * connect flow, its first host is a name, and the operator registered an app for it (BROKER_CONNECT_<ID>_*).
 * The console shows a "Connect" link exactly when this holds.
 */
export function connectConfigured(connect: Apps, templateId: string): boolean {
  return planFor(connect, templateId) !== undefined;
}

/** Start-up warnings: BROKER_CONNECT_<ID>_* settings that name no template, or one without a connect flow. */
export function connectWarnings(apps: readonly ConnectApp[]): string[] {
  return apps.flatMap((app) => {
    const t = TEMPLATES.find((x) => connectEnvId(x.id) === app.envId);
    const vars = `BROKER_CONNECT_${app.envId}_*`;
    if (!t) return [`${vars}: no template ${app.envId.toLowerCase().replaceAll("_", "-")} in this release's catalogue; the settings are unused`];
    if (!t.connect) return [`${vars}: ${t.name} offers no account connection in this release; the settings are unused`];
    if (!hostOf(t)) return [`${vars}: ${t.name} serves ${t.hosts.join(", ")}, no single host to connect; the settings are unused`];
    return [];
  });
}

export function requirePlan(connect: Apps, templateId: string): ConnectPlan {
  const plan = planFor(connect, templateId);
  if (!plan) throw new NotFound("connecting an account is not set up for this template on this broker");
  return plan;
}

export function sha256(v: string): string {
  return createHash("sha256").update(v).digest("hex");
}

export function toClientAuth(method: ClientAuthMethod): "basic" | "post" {
  return method === "client_secret_post" ? "post" : "basic";
}

/** The operator's app credentials a connected account's service mints with. SECRET: both values. */
export interface OperatorClient {
  readonly clientId: Secret;
  readonly clientSecret: Secret;
  readonly clientAuth: "basic" | "post";
  /** The key names the service uses for them (no vault credential of these names is read). */
  readonly keys: readonly [string, string];
}

/** The fields of a service's auth `operatorClient` reads. */
interface OAuthFields {
  readonly type: string;
  readonly token_url?: string;
  readonly client_id?: string;
  readonly client_secret?: string;
}

/**
 * The operator's app (BROKER_CONNECT_<ID>_*) when `auth` is a connected account's: oauth2_refresh, naming
 * `<ID>_CLIENT_ID` and `<ID>_CLIENT_SECRET`, at exactly that app's token endpoint. Whoever made the service
 * (the connect flow, or an admin typing the same names), the app's secret only ever goes to the endpoint the
 * operator configured for it, which issued it; a service naming another token endpoint gets nothing from here.
 */
export function operatorClient(connect: Apps, auth: OAuthFields): OperatorClient | undefined {
  if (auth.type !== "oauth2_refresh" || !auth.token_url || !auth.client_id || !auth.client_secret) return undefined;
  for (const app of connect?.apps ?? []) {
    const t = TEMPLATES.find((x) => connectEnvId(x.id) === app.envId);
    const plan = t && planFor(connect, t.id);
    if (!plan || plan.keys.clientId !== auth.client_id || plan.keys.clientSecret !== auth.client_secret) continue;
    if (!sameUrl(plan.tokenUrl, auth.token_url)) continue;
    return {
      clientId: new Secret(app.clientId),
      clientSecret: app.clientSecret,
      clientAuth: toClientAuth(app.clientAuthMethod),
      keys: [plan.keys.clientId, plan.keys.clientSecret],
    };
  }
  return undefined;
}

function sameUrl(a: string, b: string): boolean {
  try {
    return new URL(a).href === new URL(b).href;
  } catch {
    return false;
  }
}
