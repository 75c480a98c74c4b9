// A database outage, driven by a switch: every statement fails with DatabaseUnavailable while it is
// down. What was checked recently keeps serving for the grace period and no longer; what was never
// cached gets 503 (never 401 or 500); audit records wait and are written when the database returns.

import { describe, expect, test } from "bun:test";
import { createAuditLog, createPlanCache, type AuditEntry } from "../../../src/egress/index.ts";
import { DatabaseUnavailable, Unauthorized } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { Secret } from "../../../src/secret.ts";
import { createStore, migrate, type Db, type Store } from "../../../src/store/index.ts";
import { openSqliteMemory } from "../../../src/store/sqlite.ts";
import { importAesKey } from "../../../src/crypto/aead.ts";
import { createAuthenticator } from "../../../src/identity/index.ts";
import { storeCredential } from "../../../src/crypto/index.ts";
import { type Freshness } from "../../../src/store/index.ts";
import { mintUserSession } from "../../../src/identity/sessions.ts";
import { createVaultAccessCache } from "../../../src/identity/vault-access.ts";
import { openVault } from "../../../src/identity/vaults.ts";
import type { Domain } from "../../../src/identity/context.ts";
import type { Principal } from "../../../src/identity/principal.ts";

const GRACE = 60_000;

/** A store whose database can be switched off; `reads` counts statements that reached it. */
async function switchableStore(): Promise<{ store: Store; down(on: boolean): void; reads(): number }> {
  const db = openSqliteMemory();
  await migrate(db);
  let isDown = false;
  let reads = 0;
  const gate = <F extends (...a: never[]) => Promise<unknown>>(f: F): F =>
    (async (...a: never[]) => {
      if (isDown) throw new DatabaseUnavailable("ECONNREFUSED");
      reads++;
      return f(...a);
    }) as F;
  const wrapped: Db = { ...db, all: gate(db.all.bind(db)), get: gate(db.get.bind(db)), run: gate(db.run.bind(db)), transaction: gate(db.transaction.bind(db)) };
  return { store: createStore(wrapped), down: (on) => void (isDown = on), reads: () => reads };
}

/** Several instances with announcements lost: a cached read is trusted for one second only. */
const deaf: Freshness = { trustMs: (normal) => Math.min(normal, 1000), listening: false };

describe("sessions during an outage", () => {
  test("a session checked within the grace period keeps working; after it, 503; an unknown token gets 503, not 401", async () => {
    const { store, down } = await switchableStore();
    let clock = 1_000_000;
    const user = await store.users.create({
      email: "a@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: clock,
    });
    const { token } = await mintUserSession(store, user.id, clock);
    const auth = createAuthenticator(store, { now: () => clock, freshness: deaf, outageGraceMs: GRACE });
    expect((await auth.authenticate(token.reveal())).kind).toBe("user");

    down(true);
    clock += 5_000; // past the one-second trust: the store is asked, fails, and the recent check stands
    expect((await auth.authenticate(token.reveal())).kind).toBe("user");
    await expect(auth.authenticate("av_ses_never_seen_token_xxxxxxxxxxxxxxxxxxxx")).rejects.toBeInstanceOf(DatabaseUnavailable);
    clock += GRACE;
    await expect(auth.authenticate(token.reveal())).rejects.toBeInstanceOf(DatabaseUnavailable);

    down(false);
    expect((await auth.authenticate(token.reveal())).kind).toBe("user");
    await store.sessions.revoke((await store.sessions.byTokenHash(new Bun.CryptoHasher("sha256").update(token.reveal()).digest("hex")))!.id, clock);
    clock += 1_001; // deaf: re-validated after a second, and the revocation is seen
    await expect(auth.authenticate(token.reveal())).rejects.toBeInstanceOf(Unauthorized);
  });

  test("without a grace period a cached session is refused as soon as it must be re-checked", async () => {
    const { store, down } = await switchableStore();
    let clock = 1_000_000;
    const user = await store.users.create({
      email: "b@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: clock,
    });
    const { token } = await mintUserSession(store, user.id, clock);
    const auth = createAuthenticator(store, { now: () => clock, freshness: deaf, outageGraceMs: 0 });
    await auth.authenticate(token.reveal());
    down(true);
    clock += 1_001;
    await expect(auth.authenticate(token.reveal())).rejects.toBeInstanceOf(DatabaseUnavailable);
  });
});

describe("sessions on an asynchronous store", () => {
  test("requests in flight when an entry goes stale share one look-up", async () => {
    const { store, reads } = await switchableStore();
    let clock = 1_000_000;
    const user = await store.users.create({
      email: "c@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: clock,
    });
    const { token } = await mintUserSession(store, user.id, clock);
    const auth = createAuthenticator(store, { now: () => clock });
    await auth.authenticate(token.reveal());
    clock += 5_001;
    const before = reads();
    await Promise.all(Array.from({ length: 10 }, () => auth.authenticate(token.reveal())));
    expect(reads() - before).toBe(2); // the session row and its user, once
  });

  test("a look-up in flight when a revocation is announced is not cached", async () => {
    const { store } = await switchableStore();
    const clock = 1_000_000;
    const user = await store.users.create({
      email: "d@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: clock,
    });
    const { token, row } = await mintUserSession(store, user.id, clock);
    const auth = createAuthenticator(store, { now: () => clock });
    const inFlight = auth.authenticate(token.reveal()); // reads the row as it was before the revocation
    await store.sessions.revoke(row.id, clock);
    auth.forget([row.tokenHash]);
    await inFlight;
    await expect(auth.authenticate(token.reveal())).rejects.toBeInstanceOf(Unauthorized);
  });
});

describe("vault grants on an asynchronous store", () => {
  test("concurrent requests share one look-up, and one in flight when the cache is cleared is not kept", async () => {
    const { store, reads } = await switchableStore();
    const clock = 1_000_000;
    const vault = await store.vaults.create("alpha", clock);
    const user = await store.users.create({
      email: "e@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: clock,
    });
    await store.access.setMember(vault.id, user.id, "member", clock);
    const vaultAccess = createVaultAccessCache({ now: () => clock });
    const d = { store, vaultAccess, now: () => clock } as unknown as Domain;
    const p = {
      kind: "user",
      id: `user:${user.id}`,
      userId: user.id,
      email: "e@example.com",
      instanceRole: "member",
      sessionId: 1,
      sessionPublicId: "ses_1",
      expiresAt: null,
    } as Principal;
    const before = reads();
    await Promise.all(Array.from({ length: 10 }, () => openVault(d, p, "alpha", "read")));
    expect(reads() - before).toBe(2); // the vault and the membership, once

    // A read in flight when a change is announced (the cache cleared) is used once but not kept.
    let release!: (g: { vault: typeof vault; role: "member" }) => void;
    const slow = vaultAccess.load(9, "alpha", () => new Promise((r) => (release = r)));
    expect(vaultAccess.load(9, "alpha", async () => ({ vault, role: "admin" as const }))).toBe(slow);
    vaultAccess.clear();
    release({ vault, role: "member" });
    expect((await slow).role).toBe("member");
    expect(vaultAccess.get(9, "alpha")).toBeUndefined();
  });
});

describe("egress plans during an outage", () => {
  test("a vault's table keeps injecting within the grace period, is asked for again each second, and fails after it", async () => {
    const { store, down, reads } = await switchableStore();
    let clock = 1_000_000;
    const dataKey = await importAesKey(crypto.getRandomValues(new Uint8Array(32)));
    const vault = await store.vaults.create("alpha", clock);
    await storeCredential(store, dataKey, vault.id, "API_KEY", new Secret("sk-outage-1234567890"), clock);
    await store.services.put(
      {
        vaultId: vault.id,
        host: "api.example.com",
        description: "",
        authType: "bearer",
        authKey: "API_KEY",
        authHeader: null,
        authPrefix: null,
        authUsername: null,
        enabled: true,
      },
      clock,
    );
    const plans = createPlanCache(store, dataKey, () => ({}), { now: () => clock, freshness: deaf, outageGraceMs: GRACE });
    const first = await plans.plan(vault, "api.example.com", 443);
    expect(first.credentialKeys).toEqual(["API_KEY"]);

    down(true);
    clock += 2_000;
    const during = await plans.plan(vault, "api.example.com", 443);
    expect(during.injection?.value.reveal()).toBe("Bearer sk-outage-1234567890");
    // Within the same second the fallback is not retried against the store.
    down(false);
    const before = reads();
    await plans.plan(vault, "api.example.com", 443);
    expect(reads()).toBe(before);

    down(true);
    clock += GRACE;
    await expect(plans.plan(vault, "api.example.com", 443)).rejects.toBeInstanceOf(DatabaseUnavailable);
    down(false);
    expect((await plans.plan(vault, "api.example.com", 443)).credentialKeys).toEqual(["API_KEY"]);
  });
});

describe("audit records during an outage", () => {
  const entry = (i: number): AuditEntry => ({
    at: Date.now() + i,
    principal: "user:1",
    vaultId: 1,
    vault: "alpha",
    ingress: "proxy",
    method: "GET",
    host: "api.example.com",
    path: `/r/${i}`,
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: 0,
    bytesOut: 0,
    durationMs: 1,
    error: null,
    contained: false,
    approvedBy: null,
  });

  test("are kept in order and written when the database returns; overflow is counted in the log", async () => {
    const { store, down } = await switchableStore();
    const log = createMemoryLogger();
    const audit = createAuditLog(store, { now: Date.now, log, flushIntervalMs: 5, maxQueued: 50 });
    down(true);
    for (let i = 0; i < 60; i++) audit.record(entry(i));
    await audit.flush();
    expect(audit.queued).toBe(50);
    expect(log.lines.some((l) => l.includes('"audit_write_deferred"'))).toBe(true);
    expect(log.lines.find((l) => l.includes('"audit_records_dropped"'))).toContain('"count":10');

    down(false);
    await audit.flush();
    expect(audit.queued).toBe(0);
    const rows = await store.audit.list({ vaultId: 1, limit: 100 });
    expect(rows.map((r) => r.path).reverse()).toEqual(Array.from({ length: 50 }, (_, i) => `/r/${i}`));
    await audit.stop();
  });
});
