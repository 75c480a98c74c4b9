// Cross-instance announcements: what the triggers say on a real PostgreSQL for each kind of write,
// and how the feed's heartbeat decides whether caches may be trusted (a fake bus stands in for
// LISTEN/NOTIFY there, so losing and regaining it is under the test's control).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { CHANGES_CHANNEL, createStore, migrate, openPostgres, type Db, type Store } from "../../../src/store/index.ts";
import { openSqliteMemory } from "../../../src/store/sqlite.ts";
import { ALWAYS_FRESH, parseChange, REVALIDATE_MS, startChangeFeed, type Change } from "../../../src/store/changes.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../../helpers/postgres.ts";

const until = async (check: () => boolean, ms = 3000) => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await Bun.sleep(10);
  }
};

describe("parseChange", () => {
  test("reads the trigger payloads and refuses anything else", () => {
    expect(parseChange('{"t":"vault","id":"12"}')).toEqual({ t: "vault", id: 12 });
    const hash = "a".repeat(64);
    expect(parseChange(`{"t":"session","id":"${hash}"}`)).toEqual({ t: "session", tokenHash: hash });
    expect(parseChange('{"t":"ca","id":"3"}')).toEqual({ t: "ca" });
    expect(parseChange('{"t":"settings","id":"rate_limits"}')).toEqual({ t: "settings" });
    expect(parseChange('{"t":"principal","id":"1"}')).toEqual({ t: "principal" });
    for (const bad of ["", "null", "[]", '{"t":"vault","id":"x"}', '{"t":"session","id":"short"}', '{"t":"drop tables"}'])
      expect(parseChange(bad)).toBeUndefined();
  });
});

/** An in-memory LISTEN/NOTIFY that the test can cut and restore. */
function fakeBus(): { db: Db; cut(): void; restore(): void; announce(payload: string): void } {
  const db = openSqliteMemory();
  let up = true;
  let listener: { onMessage(p: string): void; onListening(): void } | undefined;
  return {
    db: Object.assign(db, {
      async notify(_channel: string, payload: string) {
        if (!up) throw new Error("connection refused");
        queueMicrotask(() => listener?.onMessage(payload));
      },
      async listen(_channel: string, l: typeof listener) {
        listener = l;
        l!.onListening();
        return async () => void (listener = undefined);
      },
    }),
    cut: () => void (up = false),
    restore: () => void (up = true),
    announce: (payload) => listener?.onMessage(payload),
  };
}

describe("change feed", () => {
  test("SQLite has no feed: caches are trusted as before", async () => {
    const feed = await startChangeFeed(openSqliteMemory(), { apply() {}, resync() {} });
    expect(feed.listening).toBe(true);
    expect(feed.trustMs(5000)).toBe(5000);
    expect(ALWAYS_FRESH.trustMs(Infinity)).toBe(Infinity);
    await feed.stop();
  });

  test("trusts caches while its own heartbeat comes back, re-validates every second when it stops, and drops everything when it returns", async () => {
    const bus = fakeBus();
    const applied: Change[] = [];
    let resyncs = 0;
    const states: boolean[] = [];
    const feed = await startChangeFeed(bus.db, { apply: (c) => applied.push(c), resync: () => resyncs++ }, { heartbeatMs: 20, onState: (s) => states.push(s) });
    await until(() => feed.listening);
    expect(feed.trustMs(Infinity)).toBe(Infinity);
    const resyncsWhenUp = resyncs;

    bus.announce('{"t":"vault","id":"7"}');
    expect(applied).toEqual([{ t: "vault", id: 7 }]);

    bus.cut();
    await until(() => !feed.listening);
    expect(feed.trustMs(Infinity)).toBe(REVALIDATE_MS);
    expect(feed.trustMs(300)).toBe(300);

    bus.restore();
    await until(() => feed.listening);
    expect(resyncs).toBe(resyncsWhenUp + 1);
    expect(states).toEqual([true, false, true]);
    await feed.stop();
  });

  test("a subscription that stays deaf once the database answers again is replaced at once, not left to its own growing retry interval", async () => {
    // The database is back (NOTIFY works) but the LISTEN connection is still in its reconnection wait:
    // nothing is delivered to the old subscription. A new one hears again.
    const db = openSqliteMemory();
    let subscriptions = 0;
    let live: { onMessage(p: string): void; onListening(): void } | undefined;
    let deaf = false;
    Object.assign(db, {
      async notify(_channel: string, payload: string) {
        queueMicrotask(() => (deaf ? undefined : live?.onMessage(payload)));
      },
      async listen(_channel: string, l: NonNullable<typeof live>) {
        subscriptions++;
        deaf = false;
        live = l;
        l.onListening();
        return async () => void (live === l && (live = undefined));
      },
    });
    let resyncs = 0;
    const feed = await startChangeFeed(db, { apply() {}, resync: () => resyncs++ }, { heartbeatMs: 20 });
    await until(() => feed.listening);
    expect(subscriptions).toBe(1);
    const before = resyncs;
    deaf = true;
    await until(() => !feed.listening);
    // Within a few heartbeats of answering again, it has subscribed afresh and trusts its caches again, after dropping them.
    await until(() => feed.listening, 2000);
    expect(subscriptions).toBe(2);
    expect(resyncs).toBe(before + 1);
    await feed.stop();
  });

  test("an announcement it cannot read drops everything rather than nothing", async () => {
    const bus = fakeBus();
    let resyncs = 0;
    const feed = await startChangeFeed(bus.db, { apply() {}, resync: () => resyncs++ }, { heartbeatMs: 20 });
    await until(() => feed.listening);
    const before = resyncs;
    bus.announce('{"t":"vault","id":"not a number"}');
    expect(resyncs).toBe(before + 1);
    await feed.stop();
  });
});

describe.skipIf(pgMissing)("PostgreSQL announces committed changes", () => {
  let cluster: SharedPgCluster;
  let store: Store;
  let db: Db;
  const heard: string[] = [];
  let unlisten: () => Promise<void>;

  beforeAll(async () => {
    cluster = await sharedPgCluster();
    db = openPostgres(await cluster.createDatabase(), { max: 4 });
    await migrate(db);
    store = createStore(db);
    unlisten = await db.listen!(CHANGES_CHANNEL, { onMessage: (p) => heard.push(p), onListening() {} });
  }, 60_000);
  afterAll(async () => {
    await unlisten?.();
    store?.close();
    await cluster?.release();
  });

  /** Runs `write`, then returns the announcements it caused (parsed). */
  async function announced(write: () => Promise<unknown>): Promise<Change[]> {
    heard.length = 0;
    await write();
    await db.notify!(CHANGES_CHANNEL, "end-marker"); // delivered after anything the write caused
    await until(() => heard.includes("end-marker"));
    return heard.filter((p) => p !== "end-marker").map((p) => parseChange(p)!);
  }

  test("credentials, services, members and grants announce their vault; a vault's deletion announces it once per table", async () => {
    const now = Date.now();
    const vault = await store.vaults.create("alpha", now);
    const key = new Uint8Array(12);
    expect(await announced(() => store.credentials.put({ vaultId: vault.id, key: "K", nonce: key, ciphertext: key }, now))).toEqual([
      { t: "vault", id: vault.id },
    ]);
    expect(
      await announced(() =>
        store.services.put(
          {
            vaultId: vault.id,
            host: "api.example.com",
            description: "",
            authType: "bearer",
            authKey: "K",
            authHeader: null,
            authPrefix: null,
            authUsername: null,
            enabled: true,
          },
          now,
        ),
      ),
    ).toEqual([{ t: "vault", id: vault.id }]);
    // Still announced after migration 9 widened the auth types (PostgreSQL altered the table in place, trigger and all).
    expect(
      await announced(() =>
        store.services.put(
          {
            vaultId: vault.id,
            host: "maps.example.com",
            description: "",
            authType: "query",
            authKey: "K",
            authParam: "key",
            authHeader: null,
            authPrefix: null,
            authUsername: null,
            enabled: true,
          },
          now,
        ),
      ),
    ).toEqual([{ t: "vault", id: vault.id }]);
    const user = await store.users.create({
      email: "a@example.com",
      passwordHash: key,
      passwordSalt: key,
      passwordParams: "{}",
      role: "member",
      createdAt: now,
    });
    expect(await announced(() => store.access.setMember(vault.id, user.id, "member", now))).toEqual([{ t: "vault", id: vault.id }]);
    // The cascade touches credentials, services and members: PostgreSQL folds identical payloads of one transaction.
    expect(await announced(() => store.vaults.remove(vault.id))).toEqual([{ t: "vault", id: vault.id }]);
  });

  test("a revoked session announces its token hash, a touch announces nothing", async () => {
    const now = Date.now();
    const user = await store.users.create({
      email: "b@example.com",
      passwordHash: new Uint8Array(1),
      passwordSalt: new Uint8Array(1),
      passwordParams: "{}",
      role: "member",
      createdAt: now,
    });
    const hash = "c".repeat(64);
    const session = await store.sessions.create({
      kind: "user",
      userId: user.id,
      agentId: null,
      vaultId: null,
      role: null,
      expiresAt: null,
      publicId: "ses_x",
      tokenHash: hash,
      createdAt: now,
      lastSeenAt: now,
    });
    expect(await announced(() => store.sessions.touch(session.id, now + 1))).toEqual([]);
    expect(await announced(() => store.sessions.revoke(session.id, now + 2))).toEqual([{ t: "session", tokenHash: hash }]);
  });

  test("a new root CA and a changed setting are announced; a rolled-back write is not", async () => {
    const now = Date.now();
    expect(
      await announced(() =>
        store.ca.insert({ certPem: "pem", keyNonce: new Uint8Array(12), keyCiphertext: new Uint8Array(4), createdAt: now, notAfter: now + 1 }),
      ),
    ).toEqual([{ t: "ca" }]);
    expect(await announced(() => store.settings.put("rate_limits", { profile: "strict" }, now))).toEqual([{ t: "settings" }]);
    const rolledBack = await announced(() =>
      store
        .transaction(async (tx) => {
          await tx.settings.put("rate_limits", { profile: "loose" }, now);
          throw new Error("abandon");
        })
        .catch(() => {}),
    );
    expect(rolledBack).toEqual([]);
  });
});
