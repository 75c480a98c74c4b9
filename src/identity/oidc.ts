// Identity-provider sign-in rules (contract Authentication §10): starting a flow (state, nonce, PKCE),
// completing it (login, link or CLI hand-over), the CLI code exchange, and listing/unlinking identities.
// Every failure a caller can see is one generic OidcFailed, so nothing reveals whether an email is
// registered. States and CLI codes are kept only as SHA-256 hashes and are single use.

import { createHash } from "node:crypto";
import * as oauth from "oauth4webapi";
import { Conflict, NotFound, Unauthorized } from "../errors.ts";
import type { Secret } from "../secret.ts";
import type { IdentityRow, OidcPurpose, Repos, UserRow } from "../store/index.ts";
import { randomBytes } from "../crypto/index.ts";
import { isPasswordless, PASSWORDLESS_PARAMS } from "../crypto/index.ts";
import type { Domain } from "./context.ts";
import type { OidcClaims, OidcClient } from "./oidc-client.ts";
import type { Principal } from "./principal.ts";
import { mintUserSession, type SessionClient } from "./sessions.ts";
import { assertEmailDomainAllowed } from "./settings.ts";
import { requireUser } from "./users.ts";

export const OIDC_STATE_TTL_MS = 10 * 60 * 1000;
export const OIDC_CLI_CODE_TTL_MS = 2 * 60 * 1000;
const CLI_NONCE = /^[A-Za-z0-9_-]{43}$/;

/** The one failure every caller sees; the route shows "Sign-in with <name> failed". */
export class OidcFailed extends Unauthorized {
  constructor(name: string) {
    super(`sign-in with ${name} failed`);
  }
}

/** A flow to start; linking an identity starts from the person's own signed-in session (checked here). */
export type OidcStart =
  | { purpose: "login"; returnTo?: string }
  | { purpose: "link"; principal: Principal }
  | { purpose: "cli"; cliPort: number; cliNonce: string };

export type OidcOutcome =
  | { purpose: "login"; user: UserRow; token: Secret; returnTo: string } // SECRET: token never logged
  | { purpose: "link"; user: UserRow }
  | { purpose: "cli"; code: string; cliPort: number }; // SECRET: code never logged

/** A same-origin path: starts with "/", not "//" or "/\", no control characters. */
export function isSafeReturnTo(v: string): boolean {
  return v.length <= 2048 && v.startsWith("/") && !v.startsWith("//") && !v.startsWith("/\\") && !/[\u0000-\u001f\u007f\\]/.test(v);
}

export function isCliNonce(v: string): boolean {
  return CLI_NONCE.test(v);
}

/** Starts a flow and returns the provider URL to redirect to. */
export async function beginOidc(d: Domain, o: OidcClient, start: OidcStart): Promise<string> {
  // Only a person links an identity to their own account: never an agent, a scoped session or on another's behalf.
  const linking = start.purpose === "link" ? requireUser(start.principal).userId : null;
  const state = base64url(randomBytes(32));
  const nonce = oauth.generateRandomNonce();
  const codeVerifier = oauth.generateRandomCodeVerifier();
  const now = d.now();
  await d.store.identities.pruneStates(now);
  await d.store.identities.putState({
    stateHash: sha256(state),
    nonce,
    codeVerifier,
    purpose: start.purpose,
    userId: linking,
    returnTo: start.purpose === "login" ? (start.returnTo ?? null) : null,
    cliPort: start.purpose === "cli" ? start.cliPort : null,
    cliNonce: start.purpose === "cli" ? start.cliNonce : null,
    expiresAt: now + OIDC_STATE_TTL_MS,
  });
  return o.buildAuthorizationUrl({ state, nonce, codeChallenge: await oauth.calculatePKCECodeChallenge(codeVerifier) });
}

/**
 * Completes a flow from the callback URL. Throws OidcFailed for everything: provider error, unknown,
 * reused or expired state, failed code exchange or ID-token check, and every refused account rule.
 * `onReject` hears the internal reason (for a log line without codes, states or tokens).
 */
export async function completeOidc(d: Domain, o: OidcClient, callback: URL, onReject?: (reason: string) => void, client?: SessionClient): Promise<OidcOutcome> {
  const fail = (reason: string): never => {
    onReject?.(reason);
    throw new OidcFailed(o.name);
  };
  const state = callback.searchParams.get("state");
  if (!state) return fail("missing_state");
  const row = await d.store.identities.takeState(sha256(state)); // deleted on read: single use
  if (!row) return fail("unknown_state");
  if (row.expiresAt <= d.now()) return fail("expired_state");
  let claims: OidcClaims;
  try {
    claims = await o.redeem(callback, { state, nonce: row.nonce, codeVerifier: row.codeVerifier });
  } catch (err) {
    return fail(callback.searchParams.has("error") ? "provider_error" : `token_rejected:${errorCode(err)}`);
  }
  if (row.purpose === "link") return (await linkIdentity(d, claims, row.userId)) ?? fail("link_refused");
  const user = (await signInIdentity(d, claims)) ?? fail("login_refused");
  if (row.purpose === "cli") return { purpose: "cli", code: await mintCliCode(d, user.id, row.cliNonce ?? ""), cliPort: row.cliPort ?? 0 };
  const session = await mintUserSession(d.store, user.id, d.now(), client);
  return { purpose: "login", user, token: session.token, returnTo: row.returnTo ?? "/" };
}

/** What the CLI sends back: the one-time code and the nonce it chose (text, read by the contract). */
export interface CliExchange {
  code?: string;
  cli_nonce?: string;
}

/**
 * Exchanges a one-time CLI code (with the nonce the CLI chose) for a user session. A missing code or
 * nonce, or a code longer than any minted, fails as a wrong one does: the same 401, nothing told apart.
 */
export async function exchangeCliCode(d: Domain, o: OidcClient, input: CliExchange, client?: SessionClient): Promise<{ user: UserRow; token: Secret }> {
  const { code, cli_nonce: nonce } = input;
  if (code === undefined || nonce === undefined || code.length > 128) throw new OidcFailed(o.name);
  const row = await d.store.identities.takeCliCode(sha256(code));
  if (!row || row.expiresAt <= d.now() || !safeEqual(row.cliNonce, nonce)) throw new OidcFailed(o.name);
  const user = await d.store.users.byId(row.userId);
  if (!user) throw new OidcFailed(o.name);
  const session = await mintUserSession(d.store, user.id, d.now(), client);
  return { user, token: session.token };
}

export interface IdentityView {
  id: number;
  issuer: string;
  email: string;
  created_at: string;
}

export async function listIdentities(d: Domain, p: Principal): Promise<IdentityView[]> {
  const user = requireUser(p);
  return (await d.store.identities.forUser(user.userId)).map(viewIdentity);
}

/** Unlinks one identity; refused when it is the last way a provider-only user can sign in. */
export async function unlinkIdentity(d: Domain, p: Principal, id: number): Promise<void> {
  const user = requireUser(p);
  await d.store.transaction(async (tx) => {
    const mine = await tx.identities.forUser(user.userId);
    if (!mine.some((i) => i.id === id)) throw new NotFound("no such linked identity");
    const row = await tx.users.byId(user.userId);
    if (row && isPasswordless(row) && mine.length === 1) {
      throw new Conflict("this is your only way to sign in; set a password or link another provider first");
    }
    await tx.identities.remove(id, user.userId);
  });
}

function viewIdentity(i: IdentityRow): IdentityView {
  return { id: i.id, issuer: i.issuer, email: i.email, created_at: new Date(i.createdAt).toISOString() };
}

/**
 * The provider's address for a new account, only when it is plain ASCII of the usual shape (one `@`, a dotted
 * domain). Anything else is refused rather than folded: a look-alike such as U+212A (Kelvin sign) lower-cases to
 * "k" and would take someone else's address; `a@b@example.com` would slip past the allowed-domains rule.
 */
function signupEmail(raw: string | undefined): string | undefined {
  if (!raw || !/^[\x21-\x7e]{3,254}$/.test(raw) || !/^[^@]{1,64}@[^@]+\.[^@]+$/.test(raw)) return undefined;
  return raw.toLowerCase();
}

/** Finds the identity's user, or creates a member; undefined when a rule refuses (caller fails generically). */
async function signInIdentity(d: Domain, claims: OidcClaims): Promise<UserRow | undefined> {
  const known = await d.store.identities.bySubject(claims.issuer, claims.subject);
  if (known) return d.store.users.byId(known.userId);
  // Signup: only with an email the provider vouches for. email_verified absent counts as verified
  // (some providers, e.g. Entra ID, never send it and only issue addresses they own).
  const email = signupEmail(claims.email);
  if (!email || claims.emailVerified === false) return undefined;
  return d.store.transaction(async (tx) => {
    if ((await tx.users.count()) === 0) return undefined; // the first user registers with a password
    if (await tx.users.byEmail(email)) return undefined; // never link from an unauthenticated callback
    if (!(await isDomainAllowed(tx, email))) return undefined;
    const now = d.now();
    const user = await tx.users.create({
      email,
      // No password: an unusable random hash, and params that make password sign-in run the dummy hash.
      passwordHash: randomBytes(32),
      passwordSalt: randomBytes(16),
      passwordParams: PASSWORDLESS_PARAMS,
      role: "member",
      createdAt: now,
    });
    await tx.identities.create({ userId: user.id, issuer: claims.issuer, subject: claims.subject, email, createdAt: now });
    return user;
  });
}

async function linkIdentity(d: Domain, claims: OidcClaims, userId: number | null): Promise<OidcOutcome | undefined> {
  if (userId === null) return undefined;
  return d.store.transaction(async (tx) => {
    const user = await tx.users.byId(userId);
    if (!user) return undefined;
    const known = await tx.identities.bySubject(claims.issuer, claims.subject);
    if (known && known.userId !== userId) return undefined; // someone else's identity
    if (!known)
      await tx.identities.create({ userId, issuer: claims.issuer, subject: claims.subject, email: (claims.email ?? "").toLowerCase(), createdAt: d.now() });
    return { purpose: "link" as const, user };
  });
}

async function isDomainAllowed(tx: Repos, email: string): Promise<boolean> {
  try {
    await assertEmailDomainAllowed(tx, email);
    return true;
  } catch {
    return false;
  }
}

async function mintCliCode(d: Domain, userId: number, cliNonce: string): Promise<string> {
  const code = base64url(randomBytes(32));
  await d.store.identities.putCliCode({ codeHash: sha256(code), userId, cliNonce, expiresAt: d.now() + OIDC_CLI_CODE_TTL_MS });
  return code;
}

function sha256(v: string): string {
  return createHash("sha256").update(v).digest("hex");
}

function base64url(b: Uint8Array): string {
  return Buffer.from(b).toString("base64url");
}

function safeEqual(a: string, b: string): boolean {
  return a.length === b.length && sha256(a) === sha256(b);
}

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : err instanceof Error ? err.name : "error";
}
