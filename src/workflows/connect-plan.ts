// Which templates a person can connect an account for, and how: the operator's app for the template
// (BROKER_CONNECT_<ID>_*), the endpoints (the app's overrides or the template's), the service's host and the
// credential keys written; the contract the composition fills (`redeem`), and start-up warnings. Pure.

import { createHash } from "node:crypto";
import { NotFound } from "../errors.ts";
import { connectEnvId, type ConnectApp } from "../config-connect.ts";
import type { Secret } from "../secret.ts";
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

/** The credential keys a connection writes: `<ID>_CLIENT_ID`, `<ID>_CLIENT_SECRET`, `<ID>_REFRESH_TOKEN`. */
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

function appFor(connect: ConnectDeps | undefined, t: Template): ConnectApp | undefined {
  return connect?.apps.find((a) => a.envId === connectEnvId(t.id));
}

/** The service's host: the template's first, which must be a name, not a pattern. */
function hostOf(t: Template): string | undefined {
  const first = t.hosts[0];
  if (first === undefined || first.includes("*")) return undefined;
  return parseHostPattern(first, { allowIp: false }).text;
}

export function planFor(connect: ConnectDeps | undefined, templateId: string): ConnectPlan | undefined {
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
export function connectConfigured(connect: ConnectDeps | undefined, templateId: string): boolean {
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

export function requirePlan(connect: ConnectDeps | undefined, templateId: string): ConnectPlan {
  const plan = planFor(connect, templateId);
  if (!plan) throw new NotFound("connecting an account is not set up for this template on this broker");
  return plan;
}

export function sha256(v: string): string {
  return createHash("sha256").update(v).digest("hex");
}
