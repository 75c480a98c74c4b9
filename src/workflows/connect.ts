// Connecting an account at a template's provider (OAuth 2.0 authorization code with PKCE S256, RFC 6749 §4.1
// and RFC 7636; plain OAuth, not OpenID Connect), its first half: what the page offers, and the start (a
// single-use state, stored hashed for 10 minutes, bound to the person's session, the vault, the template and
// the operations). connect-complete.ts is the second half. Never returns a secret: the state goes to the
// browser by design, the PKCE verifier stays in the store.

import { createHash } from "node:crypto";
import { InvalidRequest, PermissionDenied } from "../errors.ts";
import type { Domain, OpenVault } from "../identity/index.ts";
import { requireInVault, requireUnmanaged } from "../identity/index.ts";
import { randomBytes } from "../crypto/index.ts";
import { OPERATION_NAMES, operationsOf, type OperationName, type Template } from "../templates/index.ts";
import { CONNECT_STATE_TTL_MS, requirePlan, sha256, type ConnectDeps, type ConnectKeys } from "./connect-plan.ts";
import { keyDestinations } from "./proposals.ts";
import { viewService } from "./services.ts";

/** What the connect page shows: never a value, only where the person goes and what will be written. */
export interface ConnectOffer {
  readonly template: Template;
  readonly operations: readonly OperationName[];
  readonly host: string;
  readonly keys: ConnectKeys;
  /** The provider's sign-in origin (the page's form ends up there). */
  readonly providerOrigin: string;
  /** A service for the host exists and will be replaced. */
  readonly replacesService: boolean;
  /** Of the keys a connection writes (the refresh token's), those the vault holds already (their values will be replaced). */
  readonly replacesKeys: readonly string[];
  /**
   * Where the vault's other services send a replaced key today, as { key, host }: after connecting, those
   * hosts receive the refresh token instead. Starting then needs the person's confirmation.
   */
  readonly replacedKeyHosts: readonly { key: string; host: string }[];
}

/** What the connect page offers for `templateId` in the opened vault (a person who may write secrets there). */
export async function describeConnect(d: Domain, connect: ConnectDeps | undefined, open: OpenVault, templateId: string): Promise<ConnectOffer> {
  requireInVault(open, "write_secrets");
  const plan = requirePlan(connect, templateId);
  const held = new Set(await d.store.credentials.keys(open.vault.id));
  const replacesKeys = [plan.keys.refreshToken].filter((k) => held.has(k));
  return {
    template: plan.template,
    operations: operationsOf(plan.template),
    host: plan.host,
    keys: plan.keys,
    providerOrigin: new URL(plan.authorizeUrl).origin,
    replacesService: (await d.store.services.get(open.vault.id, plan.host)) !== undefined,
    replacesKeys,
    replacedKeyHosts: await replacedKeyHosts(d, open.vault.id, plan.host, replacesKeys),
  };
}

/**
 * Where the vault's services other than the one for `host` (which the connection replaces) send `keys`
 * today: the same destinations the new-host warning of a service or proposal reads (proposals.ts).
 */
async function replacedKeyHosts(d: Domain, vaultId: number, host: string, keys: readonly string[]): Promise<{ key: string; host: string }[]> {
  if (keys.length === 0) return [];
  const out: { key: string; host: string }[] = [];
  // Any service of the vault may send one of the keys: the whole vault is read, on purpose.
  for (const row of await d.store.services.allOfVault(vaultId)) {
    if (row.host === host) continue;
    for (const [key, to] of keyDestinations({ host: row.host, auth: viewService(row).auth })) {
      if (keys.includes(key) && !out.some((u) => u.key === key && u.host === to)) out.push({ key, host: to });
    }
  }
  return out;
}

/** The chosen operations in catalogue order; none chosen means read. Refuses one the template does not offer. */
export function chosenOperations(t: Template, names: readonly string[]): OperationName[] {
  const offered = operationsOf(t);
  const unknown = names.filter((n) => !(offered as string[]).includes(n));
  if (unknown.length) throw new InvalidRequest(`${t.name} offers no operation ${unknown[0]}; choose from ${offered.join(", ")}`, "operations");
  const chosen = OPERATION_NAMES.filter((n) => names.includes(n));
  return chosen.length ? chosen : ["read"];
}

/** The scopes the chosen operations ask for, each once, in catalogue order. */
export function scopesFor(t: Template, operations: readonly OperationName[]): string[] {
  return [...new Set(operations.flatMap((op) => t.connect?.scopes[op] ?? []))];
}

/**
 * Starts a connection: stores the flow and answers the provider's authorization URL and the state (which
 * the caller also keeps in the browser, so only the browser that started the flow can finish it). When the
 * refresh token's key is sent to other hosts today (ConnectOffer.replacedKeyHosts), the person must have
 * confirmed that those hosts receive the refresh token from now on (`confirmedKeyHosts`).
 */
export async function beginConnect(
  d: Domain,
  connect: ConnectDeps | undefined,
  open: OpenVault,
  templateId: string,
  operationNames: readonly string[],
  confirmedKeyHosts = false,
): Promise<{ url: string; state: string }> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open); // connecting writes a service and a credential
  const p = open.principal;
  if (p.kind !== "user") throw new PermissionDenied("only a person connects an account"); // requireInVault says so already
  const plan = requirePlan(connect, templateId);
  const operations = chosenOperations(plan.template, operationNames);
  if (!confirmedKeyHosts) {
    const held = (await d.store.credentials.keys(open.vault.id)).filter((k) => k === plan.keys.refreshToken);
    const uses = await replacedKeyHosts(d, open.vault.id, plan.host, held);
    if (uses.length) throw new InvalidRequest(replacedKeyHostsWarning(uses), "confirm_key_hosts");
  }
  const state = base64url(randomBytes(32));
  const codeVerifier = base64url(randomBytes(32)); // 43 characters (RFC 7636 §4.1)
  const now = d.now();
  await d.store.connectStates.prune(now);
  await d.store.connectStates.put({
    stateHash: sha256(state),
    codeVerifier,
    userId: p.userId,
    sessionPublicId: p.sessionPublicId,
    vaultId: open.vault.id,
    template: plan.template.id,
    operations,
    expiresAt: now + CONNECT_STATE_TTL_MS,
  });
  const url = new URL(plan.authorizeUrl);
  const scopes = scopesFor(plan.template, operations);
  const params: [string, string][] = [
    ["response_type", "code"],
    ["client_id", plan.app.clientId],
    ["redirect_uri", connect!.redirectUri],
    ...(scopes.length ? ([["scope", scopes.join(" ")]] as [string, string][]) : []),
    ["state", state],
    ["code_challenge", createHash("sha256").update(codeVerifier).digest("base64url")],
    ["code_challenge_method", "S256"],
  ];
  for (const [k, v] of params) url.searchParams.set(k, v);
  return { url: url.href, state };
}

/** Why a connection waits for confirmation: the hosts a replaced key goes to today. Names keys and hosts, never a value. */
export function replacedKeyHostsWarning(uses: readonly { key: string; host: string }[]): string {
  const each = uses.map((u) => `${u.key} to ${u.host}`).join(", ");
  return `this vault sends ${each} today: connecting replaces the value with your account's refresh token, which those hosts would then receive; confirm that you trust them with it`;
}

function base64url(b: Uint8Array): string {
  return Buffer.from(b).toString("base64url");
}
