// Connecting an account, its second half: the provider's way back. The state is taken (single use) and
// checked (expiry, the session that started the flow still live, the same person, still allowed to write
// secrets in the vault), the code redeemed at the token endpoint through the broker's own upstream client and
// network guard (`redeem`, declared in connect-plan.ts, implemented by minting/, handed in by the composition),
// then the refresh token sealed as a credential and an oauth2_refresh service made from the template, in one
// transaction. The app's client id and secret stay the operator's: the service names them and the egress plan
// reads them from the configuration when it mints (connect-plan.ts operatorClient), so no vault holds them.
// Returns, logs and shows no token, code or verifier.

import { BrokerError, NotFound, PermissionDenied } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { Domain, OpenVault } from "../identity/index.ts";
import { liveUserSession, openVault, requireInVault, requireUnmanaged, vaultNameById } from "../identity/index.ts";
import { encryptCredential } from "../crypto/index.ts";
import { OPERATION_NAMES, rulesFor, templateById, type OperationName, type Template } from "../templates/index.ts";
import { toRow, type ServiceAuth } from "./services.ts";
import { planFor, sha256, toClientAuth, type ConnectDeps, type ConnectKeys, type ConnectPlan } from "./connect-plan.ts";

/** Why a connection did not complete; the page words each, the log names it. Never carries a value. */
export type ConnectFailure =
  | "bad_state" // missing, unknown, reused, or not started in this browser
  | "expired"
  | "denied" // the person said no at the provider
  | "provider_error"
  | "session_ended" // the session that started the flow was signed out, revoked or went idle
  | "other_person" // this browser is signed in as someone else than who started the flow
  | "not_allowed" // the person may no longer write secrets in the vault, or it is gone
  | "not_configured"
  | "exchange_failed"; // the token endpoint refused the code, issued no refresh token, or could not be reached

export class ConnectFailed extends BrokerError {
  readonly status: number;
  readonly code = "connect_failed";
  constructor(
    readonly reason: ConnectFailure,
    message: string,
    /** The provider's name, when the flow got far enough to know it. */
    readonly provider?: string,
  ) {
    super(message);
    this.status = reason === "other_person" || reason === "not_allowed" ? 403 : reason === "exchange_failed" ? 502 : 400;
  }
}

export interface Connected {
  readonly vault: string;
  readonly host: string;
  readonly template: Template;
  readonly operations: readonly OperationName[];
  readonly keys: ConnectKeys;
}

/** RFC 6749 §4.1.2.1's error codes: only these are repeated (as a reason), never the provider's own text. */
const AUTHORIZATION_ERRORS = new Set([
  "invalid_request",
  "unauthorized_client",
  "unsupported_response_type",
  "invalid_scope",
  "server_error",
  "temporarily_unavailable",
]);

/**
 * Completes a connection from the callback's query. `browserUserId` is the person this browser is signed in
 * as, when its session cookie came along (a cross-site return may leave it behind): it must be the one who
 * started the flow, whose session must still be live, and who must still be allowed to write secrets in the
 * vault. Throws ConnectFailed for every refusal; `onReject` hears the reason (for a log line without values).
 */
export async function completeConnect(
  d: Domain,
  connect: ConnectDeps | undefined,
  query: URLSearchParams,
  browserUserId: number | undefined,
  onReject?: (reason: ConnectFailure, detail?: string) => void,
): Promise<Connected> {
  let provider: string | undefined;
  const fail = (reason: ConnectFailure, message: string, detail?: string): never => {
    onReject?.(reason, detail);
    throw new ConnectFailed(reason, message, provider);
  };
  const state = query.get("state");
  if (!state || state.length > 512) return fail("bad_state", "this sign-in link is not valid (no flow of this browser matches it)");
  const row = await d.store.connectStates.take(sha256(state)); // deleted on read: single use
  if (!row) return fail("bad_state", "this sign-in link is not valid, or was already used");
  const t = templateById(row.template);
  provider = t?.name;
  if (row.expiresAt <= d.now()) return fail("expired", "the connection took longer than 10 minutes");
  const error = query.get("error");
  if (error === "access_denied") return fail("denied", `you declined access at ${provider ?? "the provider"}, so nothing was connected`);
  if (error !== null) {
    const known = AUTHORIZATION_ERRORS.has(error) ? error : undefined;
    return fail("provider_error", `${provider ?? "the provider"} refused the request${known ? ` (${known})` : ""}`, known ?? "other");
  }
  const code = query.get("code");
  if (!code || code.length > 4096) return fail("bad_state", `${provider ?? "the provider"} sent no authorization code back`);
  const principal = await liveUserSession(d.store, row.sessionPublicId, d.now());
  if (!principal || principal.userId !== row.userId)
    return fail("session_ended", "the session that started the connection has ended; sign in and connect again");
  if (browserUserId !== undefined && browserUserId !== row.userId)
    return fail("other_person", "this browser is signed in as someone else than who started the connection");
  const open = await openStartedVault(d, principal, row.vaultId).catch((err: unknown) => {
    if (err instanceof PermissionDenied || err instanceof NotFound) return undefined;
    throw err;
  });
  if (!open) return fail("not_allowed", "you may no longer change services in that vault, or it is gone");
  const plan = planFor(connect, row.template);
  if (!plan) return fail("not_configured", "connecting an account is no longer set up for this template");
  const operations = OPERATION_NAMES.filter((n) => row.operations.includes(n));
  const clientAuth = toClientAuth(plan.app.clientAuthMethod);
  const redeemed = await connect!.redeem({
    tokenUrl: plan.tokenUrl,
    clientId: plan.app.clientId,
    clientSecret: plan.app.clientSecret,
    clientAuth,
    code: new Secret(code),
    codeVerifier: new Secret(row.codeVerifier),
    redirectUri: connect!.redirectUri,
  });
  if ("failure" in redeemed) return fail("exchange_failed", `${plan.template.name} did not complete the connection: ${redeemed.failure}`, redeemed.failure);
  await storeConnection(d, open, plan, operations, clientAuth, redeemed.refreshToken);
  return { vault: open.vault.name, host: plan.host, template: plan.template, operations, keys: plan.keys };
}

async function openStartedVault(d: Domain, principal: OpenVault["principal"], vaultId: number): Promise<OpenVault | undefined> {
  const name = await vaultNameById(d, vaultId);
  return name === undefined ? undefined : openVault(d, principal, name, "write_secrets");
}

/**
 * The refresh token, sealed like every credential (replacing a value under its key), and the service, at once.
 * The service names the app's client id and secret by key, but they are never written to the vault.
 */
async function storeConnection(
  d: Domain,
  open: OpenVault,
  plan: ConnectPlan,
  operations: readonly OperationName[],
  clientAuth: "basic" | "post",
  refreshToken: Secret,
): Promise<void> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open); // made managed while the person was at the provider
  const vaultId = open.vault.id;
  const key = plan.keys.refreshToken;
  const sealed = { key, ...(await encryptCredential(d.dataKey, vaultId, key, refreshToken)) };
  const auth: ServiceAuth = {
    type: "oauth2_refresh",
    token_url: plan.tokenUrl,
    client_id: plan.keys.clientId,
    client_secret: plan.keys.clientSecret,
    refresh_token: plan.keys.refreshToken,
    client_auth: clientAuth,
  };
  const row = toRow(vaultId, plan.host, `${plan.template.name}, connected account`, auth, true, rulesFor(plan.template, operations), {
    template: plan.template.id,
    operations,
  });
  const now = d.now();
  await d.store.transaction(async (tx) => {
    await tx.credentials.put({ vaultId, ...sealed }, now);
    await tx.services.put(row, now);
  });
  d.onVaultChange?.(vaultId);
}
