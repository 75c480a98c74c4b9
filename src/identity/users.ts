// Human accounts: registration (first user becomes owner), login, logout, change-password and
// session listing. Login failures look the same whether or not the email exists, and unknown
// emails pay the same Argon2id cost as known ones; every password check passes the login throttle first.
// Emails and passwords arrive read (the contract's schemas: an email trimmed and lower-cased, a
// password in its Secret); what is decided here is who may do what.

import { Conflict, NotFound, PermissionDenied, RateLimited, Unauthorized } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { Repos, SessionChannel, SessionRow, UserRow } from "../store/index.ts";
import type { Domain } from "./context.ts";
import { hashPassword, isPasswordless, verifyAgainstNothing, verifyPassword } from "../crypto/index.ts";
import type { Principal, UserPrincipal } from "./principal.ts";
import { isLive, mintUserSession, type SessionClient } from "./sessions.ts";
import { checkPageLimit, cutPage } from "./page.ts";
import { assertEmailDomainAllowed } from "./settings.ts";

const LOGIN_FAILED = "invalid email or password";

export interface PublicUser {
  id: number;
  email: string;
  role: "owner" | "member";
}

/** An email (trimmed, lower-cased) and a password, as registration and sign-in read them. */
export interface Credentials {
  email: string;
  password: Secret;
}

/** The current password (checked as a sign-in is) and the new one. */
export interface PasswordChange {
  current_password: Secret;
  new_password: Secret;
}

export function publicUser(u: UserRow): PublicUser {
  return { id: u.id, email: u.email, role: u.role };
}

/**
 * Creates a user and a first session; `inTx` lets invite acceptance add its own writes atomically.
 * `client` (how and from where) is recorded with the session for the person's sessions list.
 */
export async function registerUser(d: Domain, creds: Credentials, inTx?: (tx: Repos, user: UserRow) => Promise<void>, client?: SessionClient) {
  const hashed = await d.hashing.run(() => hashPassword(creds.password, d.passwordKdf));
  return d.store.transaction(async (tx) => {
    const now = d.now();
    let first = (await tx.users.count()) === 0;
    if (first) {
      // Under PostgreSQL's READ COMMITTED two first registrations would both count 0 and both become
      // owner: wait for any other one to finish, then count again (a new statement sees what it committed).
      await tx.keyring.lock();
      first = (await tx.users.count()) === 0;
    }
    if (!first) await assertEmailDomainAllowed(tx, creds.email);
    if (await tx.users.byEmail(creds.email)) throw new Conflict("an account with this email already exists; log in instead");
    const user = await tx.users.create({
      email: creds.email,
      passwordHash: hashed.hash,
      passwordSalt: hashed.salt,
      passwordParams: hashed.params,
      role: first ? "owner" : "member",
      createdAt: now,
    });
    await inTx?.(tx, user);
    const session = await mintUserSession(tx, user.id, now, client);
    return { user, token: session.token };
  });
}

/**
 * Checks email and password; throws the same Unauthorized for an unknown email and a wrong password.
 * The throttle is asked first, keyed on the email whether or not an account has it (so a 429 reveals
 * nothing), and a refused attempt never reaches Argon2id. `clientAddress` is the peer IP.
 */
export async function authenticateUser(d: Domain, creds: Credentials, clientAddress: string): Promise<UserRow> {
  const attempt = d.loginThrottle.admit(creds.email, clientAddress);
  if (!attempt.ok) throw new RateLimited(attempt.retryAfterSec, "too many failed sign-in attempts; wait before trying again");
  try {
    const user = await d.store.users.byEmail(creds.email);
    const ok = await d.hashing.run(() =>
      // A provider-only user has no password: the same dummy work as an unknown email, the same failure.
      user && !isPasswordless(user)
        ? verifyPassword(creds.password, { hash: user.passwordHash, salt: user.passwordSalt, params: user.passwordParams })
        : verifyAgainstNothing(creds.password, d.passwordKdf),
    );
    if (!user || !ok) {
      attempt.fail();
      throw new Unauthorized(LOGIN_FAILED);
    }
    attempt.succeed();
    return user;
  } finally {
    attempt.abandon(); // no-op once settled; frees the slot when hashing was refused or the store failed
  }
}

export async function loginUser(d: Domain, creds: Credentials, clientAddress: string, client?: SessionClient) {
  const user = await authenticateUser(d, creds, clientAddress);
  const session = await mintUserSession(d.store, user.id, d.now(), client);
  return { user, token: session.token };
}

export async function logout(d: Domain, p: Principal): Promise<void> {
  const row = await d.store.sessions.byPublicId(p.sessionPublicId);
  await d.store.sessions.revoke(p.sessionId, d.now());
  if (row) d.auth.forget([row.tokenHash]);
}

export async function changePassword(d: Domain, p: Principal, change: PasswordChange, clientAddress: string, client?: SessionClient): Promise<Secret> {
  const user = requireUser(p);
  const row = await authenticateUser(d, { email: user.email, password: change.current_password }, clientAddress);
  const hashed = await d.hashing.run(() => hashPassword(change.new_password, d.passwordKdf));
  const { token, revoked } = await d.store.transaction(async (tx) => {
    const now = d.now();
    await tx.users.setPassword(row.id, hashed.hash, hashed.salt, hashed.params);
    const revoked = await tx.sessions.revokeAllForUser(row.id, now);
    const session = await mintUserSession(tx, row.id, now, client);
    return { token: session.token, revoked };
  });
  d.auth.forget(revoked);
  return token;
}

export interface SessionView {
  id: string;
  kind: "user" | "scoped";
  vault: string | null;
  role: string | null;
  /** How it was made (null for sessions older than the broker recording it). */
  channel: SessionChannel | null;
  /** The creating client's User-Agent, as it sent it (cut short); never a token. */
  client: string | null;
  /** The address it was created from. */
  address: string | null;
  created_at: string;
  last_seen_at: string;
  expires_at: string | null;
  current: boolean;
}

/**
 * A page of the caller's live sessions in creation order, after the session whose cursor is `after`. One
 * idle past its limit is left out after the read, so a page may hold fewer than `limit`: follow next_cursor.
 */
export async function listOwnSessions(
  d: Domain,
  p: Principal,
  q: { limit: number; after?: number },
): Promise<{ sessions: SessionView[]; next_cursor: string | null }> {
  const user = requireUser(p);
  checkPageLimit(q.limit);
  const now = d.now();
  const page = cutPage(await d.store.sessions.activeForUser(user.userId, now, q.after ?? 0, q.limit + 1), q.limit, (r) => String(r.id));
  const rows = page.rows.filter((r) => isLive(r, r.id === p.sessionId ? now : r.lastSeenAt, now));
  const vaultNames = new Map<number, string | null>();
  for (const id of new Set(rows.map((r) => r.vaultId))) if (id !== null) vaultNames.set(id, (await d.store.vaults.byId(id))?.name ?? null);
  const sessions = rows.map((r) => viewSession(r, r.vaultId === null ? null : (vaultNames.get(r.vaultId) ?? null), r.id === p.sessionId));
  return { sessions, next_cursor: page.next_cursor };
}

export async function revokeOwnSession(d: Domain, p: Principal, publicId: string): Promise<void> {
  const user = requireUser(p);
  const row = await d.store.sessions.byPublicId(publicId);
  if (!row || row.userId !== user.userId || row.revokedAt !== null) throw new NotFound("no such session");
  await d.store.sessions.revoke(row.id, d.now());
  d.auth.forget([row.tokenHash]);
}

export function viewSession(r: SessionRow, vault: string | null, current: boolean): SessionView {
  return {
    id: r.publicId,
    kind: r.kind === "scoped" ? "scoped" : "user",
    vault,
    role: r.role,
    channel: r.channel,
    client: r.clientAgent,
    address: r.clientAddress,
    created_at: iso(r.createdAt),
    last_seen_at: iso(r.lastSeenAt),
    expires_at: r.expiresAt === null ? null : iso(r.expiresAt),
    current,
  };
}

export function requireUser(p: Principal): UserPrincipal {
  if (p.kind !== "user") throw new PermissionDenied("this needs a human user session (log in with `broker auth login`)");
  return p;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
