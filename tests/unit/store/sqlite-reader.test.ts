// The SQLite read worker (src/store/sqlite-reader.ts): the large reads a file store routes to it answer
// exactly as the main connection does, see every write committed before them (WAL), never write, and a
// worker that hangs or dies fails its reads with DatabaseUnavailable and is replaced at the next read.
// Hangs and crashes in flight are played by stand-in threads, so nothing here waits on a clock.

import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { createStore, migrate, openStore, type ProposalRow, type Store } from "../../../src/store/index.ts";
import { createSqliteReader, spawnReadWorker, type ReadThread } from "../../../src/store/sqlite-reader.ts";
import type { ReadReply, ReadRequest } from "../../../src/store/sqlite-read-protocol.ts";
import { openSqliteFile } from "../../../src/store/sqlite.ts";
import { addUser, auditRow, bytes, newSession } from "./conformance-fixtures.ts";

const dirs: string[] = [];
const opened: Store[] = [];
afterAll(() => {
  for (const s of opened.splice(0)) s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/**
 * What `p` rejects with. Not `expect(p).rejects`: bun test waits for that promise without delivering a
 * Worker's messages (Bun 1.4.5), so a read the worker answers would hang there.
 */
async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error("resolved, not rejected"),
    (err: unknown) => err,
  );
}

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "broker-reader-"));
  dirs.push(d);
  return d;
}

async function openWithWorker(dataDir = tempDir(), onFault?: (reason: string) => void): Promise<Store> {
  const store = await openStore({ dataDir }, { readWorker: { ...(onFault && { onFault }) } });
  opened.push(store);
  return store;
}

const SERVICE = {
  description: "",
  authType: "bearer",
  authKey: "K",
  authHeader: null,
  authPrefix: null,
  authUsername: null,
  authParam: null,
  authTemplate: null,
  authConfig: null,
  enabled: true,
  rules: null,
  template: null,
  operations: null,
} as const;

function proposal(vaultId: number, tag: string): Omit<ProposalRow, "id" | "status" | "decidedAt" | "decidedBy" | "viaSession"> {
  return {
    vaultId,
    message: tag,
    userMessage: "",
    services: [{ action: "set", host: `${tag}.example.com`, description: "d", auth: { type: "bearer", token: "K" } }],
    credentials: [],
    createdBy: "agent:1",
    createdAt: 10,
    expiresAt: 1000,
    approvalTokenHash: `appr-${tag}`,
    approvalExpiresAt: 500,
  };
}

describe("routed reads", () => {
  test("answer as the main connection does, for every filter shape of a log page", async () => {
    const dir = tempDir();
    const store = await openWithWorker(dir);
    const plain = await openStore({ dataDir: dir }); // the in-thread path, on the same file
    opened.push(plain);
    const v = await store.vaults.create("main", 1);
    const other = await store.vaults.create("other", 1);
    for (const host of ["c.example.com", "a.example.com", "b.example.com"]) await store.services.put({ ...SERVICE, vaultId: v.id, host }, 5);
    await store.services.put({ ...SERVICE, vaultId: other.id, host: "z.example.com" }, 5);
    for (const tag of ["p1", "p2", "p3"]) await store.proposals.create(proposal(v.id, tag));
    await store.audit.insert(
      Array.from({ length: 300 }, (_, i) =>
        auditRow({
          at: i + 1,
          vaultId: i % 7 === 0 ? other.id : v.id,
          host: `h${i % 3}.example`,
          status: i % 5 === 0 ? 500 : 200,
          principal: `agent:${i % 4}`,
        }),
      ),
    );
    const filters = [{}, { host: "h1.example" }, { status: 500 }, { principal: "agent:2" }, { host: "h2.example", status: 200, principal: "agent:3" }];
    for (const f of filters) {
      for (const cursor of [{}, { before: 200 }, { after: 50 }]) {
        const q = { vaultId: v.id, limit: 40, ...f, ...cursor };
        const routed = await store.audit.list(q);
        expect(routed.length).toBeGreaterThan(0);
        expect(routed).toEqual(await plain.audit.list(q));
      }
    }
    expect(await store.proposals.list(v.id, null, 200)).toEqual(await plain.proposals.list(v.id, null, 200));
    expect(await store.proposals.list(v.id, "pending", 2)).toHaveLength(2);
    expect(await store.vaultCounts.of(v.id, 0)).toEqual({ ...(await plain.vaultCounts.of(v.id, 0)), services: 3, proposals: 3 });
    expect(await store.vaultCounts.pendingByVault(0)).toEqual(await plain.vaultCounts.pendingByVault(0));

    // Lists joined to other tables or filtered by state.
    const user = await addUser(store, "owner@example.com");
    await store.access.setMember(v.id, user.id, "admin", 1);
    await store.sessions.create(newSession("s1", { userId: user.id, expiresAt: 1000 }));
    await store.sessions.create(newSession("s2", { userId: user.id, expiresAt: 5 }));
    expect(await store.access.members(v.id)).toEqual(await plain.access.members(v.id));
    expect(await store.access.members(v.id)).toHaveLength(1);
    expect(await store.sessions.activeForUser(user.id, 10, 0, 10)).toEqual(await plain.sessions.activeForUser(user.id, 10, 0, 10));
    expect(await store.sessions.activeForUser(user.id, 10, 0, 10)).toHaveLength(1);
  });

  test("a read after a write sees it, every time: a plain write, a batch, a committed transaction", async () => {
    const store = await openWithWorker();
    const v = await store.vaults.create("main", 1);
    for (let i = 1; i <= 200; i++) {
      await store.audit.insert([auditRow({ at: i, vaultId: v.id })]);
      expect((await store.audit.list({ vaultId: v.id, limit: 1 }))[0]?.at).toBe(i);
    }
    // A batch of several INSERT statements (64 rows each) is whole once insert() resolves.
    await store.audit.insert(Array.from({ length: 150 }, (_, i) => auditRow({ at: 1000 + i, vaultId: v.id })));
    expect((await store.audit.list({ vaultId: v.id, after: 200, limit: 1000 })).map((r) => r.at)).toEqual(Array.from({ length: 150 }, (_, i) => 1000 + i));
    for (let i = 0; i < 50; i++) {
      const host = `s${i}.example.com`;
      await store.transaction((tx) => tx.services.put({ ...SERVICE, vaultId: v.id, host }, i));
      expect((await store.vaultCounts.of(v.id, 0)).services).toBe(i + 1);
      await store.proposals.create(proposal(v.id, `rw${i}`));
      expect((await store.proposals.list(v.id, "pending", 1))[0]?.message).toBe(`rw${i}`);
    }
  });

  test("a transaction still open is not seen; once committed it is (WAL snapshots, no ordering gap)", async () => {
    const store = await openWithWorker();
    const v = await store.vaults.create("main", 1);
    await store.audit.insert([auditRow({ at: 1, vaultId: v.id })]);
    const gate = Promise.withResolvers<void>();
    const inside = Promise.withResolvers<void>();
    const tx = store.transaction(async (t) => {
      await t.audit.insert([auditRow({ at: 2, vaultId: v.id })]);
      inside.resolve();
      await gate.promise;
    });
    await inside.promise;
    expect((await store.audit.list({ vaultId: v.id, limit: 10 })).map((r) => r.at)).toEqual([1]);
    gate.resolve();
    await tx;
    expect((await store.audit.list({ vaultId: v.id, limit: 10 })).map((r) => r.at)).toEqual([2, 1]);
  });

  test("values cross the thread as stored: blobs, nulls, big and negative numbers", async () => {
    const dir = tempDir();
    await openWithWorker(dir);
    const reader = createSqliteReader(join(dir, "broker.db"));
    try {
      await reader.ready;
      const row = await reader.get<Record<string, unknown>>("SELECT ? AS b, ? AS n, ? AS big, ? AS neg, ? AS s", [
        bytes(300, 7),
        null,
        2 ** 52,
        -5,
        "é\u0000x",
      ]);
      expect(row).toEqual({ b: bytes(300, 7), n: null, big: 2 ** 52, neg: -5, s: "é\u0000x" });
      expect(await reader.get("SELECT 1 AS one WHERE 0")).toBeUndefined();
      expect(await reader.all("SELECT 1 AS one WHERE 0")).toEqual([]);
    } finally {
      reader.close();
    }
  });

  test("the worker never writes: run() refuses and a writing statement fails on its read-only connection", async () => {
    const dir = tempDir();
    const store = await openWithWorker(dir);
    const reader = createSqliteReader(join(dir, "broker.db"));
    try {
      await reader.ready;
      expect(String(await failure(reader.run("DELETE FROM vaults")))).toContain("never writes");
      expect(await failure(reader.all("INSERT INTO vaults (name, created_at) VALUES ('x', 1) RETURNING id"))).toMatchObject({ code: "SQLITE_READONLY" });
      expect(String(await failure(reader.all("SELECT * FROM no_such_table")))).toContain("no such table");
      expect(await store.vaults.list()).toEqual([]);
    } finally {
      reader.close();
    }
  });
});

/** A stand-in worker: answers the open, then each request as `answer` says (undefined: never). */
function fakeThread(answer: (req: Extract<ReadRequest, { kind: "all" | "get" | "prune" | "audit" }>) => ReadReply | undefined) {
  const events = new EventTarget();
  const thread = {
    terminated: false,
    addEventListener: (type: string, listener: (ev: Event) => void) => events.addEventListener(type, listener),
    crash: (message: string) => events.dispatchEvent(Object.assign(new Event("error"), { message })),
    terminate: () => void (thread.terminated = true),
    postMessage(req: ReadRequest) {
      const reply = req.kind === "open" ? { kind: "opened" as const } : req.kind === "close" ? (Atomics.store(req.done, 0, 1), undefined) : answer(req);
      if (reply) queueMicrotask(() => events.dispatchEvent(new MessageEvent("message", { data: reply })));
    },
  };
  return thread satisfies ReadThread;
}

describe("a hung or dead worker", () => {
  test("a read not answered in time fails with DatabaseUnavailable; the next read runs on a fresh worker", async () => {
    const faults: string[] = [];
    const threads = [fakeThread(() => undefined), fakeThread((req) => ({ kind: "rows", id: (req as { id: number }).id, rows: [{ n: 1 }] }))];
    const spawned: ReturnType<typeof fakeThread>[] = [];
    const reader = createSqliteReader("/unused", { timeoutMs: 30, onFault: (r) => faults.push(r), spawn: () => spawned[spawned.push(threads.shift()!) - 1]! });
    await reader.ready;
    // The second is queued behind the hung one: it fails with it.
    const [first, second] = await Promise.all([failure(reader.all("SELECT 1")), failure(reader.all("SELECT 2"))]);
    expect(first).toBeInstanceOf(DatabaseUnavailable);
    expect(second).toBeInstanceOf(DatabaseUnavailable);
    expect(faults).toEqual(["a read got no answer within 30 ms"]);
    expect(spawned[0]!.terminated).toBe(true);
    expect(await reader.all("SELECT 1")).toEqual([{ n: 1 }]);
    expect(spawned).toHaveLength(2);
    reader.close();
  });

  test("through the store: every routed read of a hung worker is a 503-class DatabaseUnavailable; the rest stay in-thread", async () => {
    const db = openSqliteFile(tempDir());
    await migrate(db);
    const store = createStore(db, createSqliteReader("/unused", { timeoutMs: 30, spawn: () => fakeThread(() => undefined) }));
    try {
      const routed = await Promise.all(
        [
          store.audit.list({ vaultId: 1, limit: 10 }),
          store.proposals.list(1, null, 10),
          store.requestApprovals.list(1, 0, 10),
          store.agents.page({ kind: "all" }, "", 10),
          store.sessions.activeForUser(1, 0, 0, 10),
          store.sessions.activeScopedForVault(1, 0, 0, 10),
          store.access.members(1),
          store.vaultCounts.of(1, 0),
          store.vaultCounts.pendingByVault(0),
        ].map(failure),
      );
      for (const err of routed) expect(err).toBeInstanceOf(DatabaseUnavailable);
      expect((routed[0] as DatabaseUnavailable).status).toBe(503);
      // Writes, point reads and reads whose cost is building their rows stay on the main connection.
      expect(await store.vaults.list()).toEqual([]);
      expect(await store.services.allOfVault(1)).toEqual([]);
      expect(await store.credentials.list(1)).toEqual([]);
    } finally {
      store.close();
    }
  });

  test("a worker that crashes with reads in flight fails them at once; the next read starts another", async () => {
    const faults: string[] = [];
    const first = fakeThread(() => undefined);
    const spares = [first, fakeThread((req) => ({ kind: "row", id: (req as { id: number }).id, row: { ok: 1 } }))];
    const reader = createSqliteReader("/unused", { onFault: (r) => faults.push(r), spawn: () => spares.shift()! });
    await reader.ready;
    const inFlight = reader.get("SELECT 1");
    first.crash("out of memory");
    expect(await failure(inFlight)).toBeInstanceOf(DatabaseUnavailable);
    expect(faults).toEqual(["the read worker failed: out of memory"]);
    expect(await reader.get("SELECT 1")).toEqual({ ok: 1 });
    reader.close();
  });

  test("a real worker that exits is replaced at the next read", async () => {
    const dir = tempDir();
    await openWithWorker(dir);
    const workers: ReadThread[] = [];
    const fault = Promise.withResolvers<string>();
    const reader = createSqliteReader(join(dir, "broker.db"), {
      onFault: fault.resolve,
      spawn: () => workers[workers.push(spawnReadWorker()) - 1]!,
    });
    try {
      await reader.ready;
      expect(await reader.get("SELECT 1 AS one")).toEqual({ one: 1 });
      workers[0]!.terminate();
      expect(await fault.promise).toBe("the read worker exited");
      expect(await reader.get("SELECT 2 AS two")).toEqual({ two: 2 });
      expect(workers).toHaveLength(2);
    } finally {
      reader.close();
    }
  });

  test("a worker that cannot open the file fails `ready` (the server does not start) and each read", async () => {
    const reader = createSqliteReader(join(tempDir(), "missing", "broker.db"));
    const err = await failure(reader.ready);
    expect(err).toBeInstanceOf(DatabaseUnavailable);
    expect((err as DatabaseUnavailable).reason).toContain("cannot open");
    expect(await failure(reader.all("SELECT 1"))).toBeInstanceOf(DatabaseUnavailable);
    reader.close();
  });
});

describe("close", () => {
  test("fails reads in flight, refuses later ones, and leaves no -wal behind (the worker's connection closes first)", async () => {
    const dir = tempDir();
    const store = await openStore({ dataDir: dir }, { readWorker: {} });
    const v = await store.vaults.create("main", 1);
    await store.audit.insert([auditRow({ vaultId: v.id })]);
    const inFlight = failure(store.audit.list({ vaultId: v.id, limit: 10 }));
    store.close();
    expect(await inFlight).toBeInstanceOf(DatabaseUnavailable);
    expect(await failure(store.proposals.list(v.id, null, 10))).toBeInstanceOf(DatabaseUnavailable);
    expect(existsSync(join(dir, "broker.db-wal"))).toBe(false);
    store.close(); // twice is harmless, as `using` after an explicit close does
  });
});

describe("audit retention on the worker's own connection", () => {
  test("batches delete off the event loop exactly as the in-thread batch does: bounded, lowest ids first, down to the cap", async () => {
    const store = await openWithWorker();
    expect(store.offLoopPrune).toBeDefined();
    await store.transaction((tx) => tx.audit.insert(Array.from({ length: 2_500 }, (_, i) => auditRow({ at: i + 1 }))));
    const batches: { removed: number; more: boolean }[] = [];
    for (;;) {
      const b = await store.offLoopPrune!({ olderThan: 0, keepRows: 1_000 }, 400);
      batches.push({ removed: b.removed, more: b.more });
      if (!b.more) break;
    }
    expect(batches.map((b) => b.removed)).toEqual([400, 400, 400, 300]);
    const left = await store.db.get<{ n: number; lowest: number }>("SELECT COUNT(*) AS n, MIN(id) AS lowest FROM audit_logs");
    expect(left).toEqual({ n: 1_000, lowest: 1_501 });
    // Past the age limit too: the 200 oldest of those left go, nothing more.
    const aged = await store.offLoopPrune!({ olderThan: 1_701, keepRows: 1_000 }, 500);
    expect(aged.removed).toBe(200);
    // The main connection writes on while the worker's is open (its lock is held only within a batch).
    await store.transaction((tx) => tx.audit.insert([auditRow({ at: 9_999 })]));
    expect((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_logs"))?.n).toBe(801);
  });

  test("memory stores have no worker: retention runs through the connection", async () => {
    const store = createStore(
      await (async () => {
        const db = openSqliteFile(tempDir());
        await migrate(db);
        return db;
      })(),
    );
    opened.push(store);
    expect(store.offLoopPrune).toBeUndefined();
  });
});
