// The SQLite backend: private file modes from creation, PRAGMAs, and how its one connection keeps
// other statements out of an open transaction. Behaviour shared with PostgreSQL (cascades, rollback)
// is in conformance*.test.ts, run on both backends.

import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { openMemoryStore, openStore, type Store } from "../../../src/store/index.ts";

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "broker-sqlite-"));
  dirs.push(d);
  return d;
};
const modeOf = (p: string) => statSync(p).mode & 0o777;
const STORE_MODULE = resolve(import.meta.dir, "../../../src/store/index.ts");

describe("file permissions", () => {
  test("under umask 000, a new data dir is 0700 and broker.db, -wal and -shm are 0600", async () => {
    const dataDir = join(tempDir(), "nested", "data");
    // The child reports modes while the store is open: SQLite removes -wal and -shm on a clean close.
    const script = `
      const { statSync, existsSync } = require("node:fs");
      const { openStore } = await import(${JSON.stringify(STORE_MODULE)});
      const dir = ${JSON.stringify(dataDir)};
      const store = await openStore({ dataDir: dir });
      await store.vaults.create("v1", 1);
      await store.transaction((tx) => tx.vaults.create("v2", 1));
      const out = {};
      for (const f of ["", "/broker.db", "/broker.db-wal", "/broker.db-shm"])
        out[f || "dir"] = existsSync(dir + f) ? (statSync(dir + f).mode & 0o777).toString(8) : "missing";
      store.close();
      console.log(JSON.stringify(out));`;
    const proc = Bun.spawn(["sh", "-c", 'umask 000 && exec "$0" -e "$1"', process.execPath, script], { stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    expect(JSON.parse(stdout)).toEqual({ dir: "700", "/broker.db": "600", "/broker.db-wal": "600", "/broker.db-shm": "600" });
    expect(modeOf(dataDir)).toBe(0o700);
    expect(modeOf(join(dataDir, "broker.db"))).toBe(0o600);
  });

  test("an existing 0755 data dir and a 0644 database file are tightened", async () => {
    const dataDir = join(tempDir(), "existing");
    mkdirSync(dataDir, { mode: 0o755 });
    chmodSync(dataDir, 0o755);
    writeFileSync(join(dataDir, "broker.db"), "");
    chmodSync(join(dataDir, "broker.db"), 0o644);
    const store = await openStore({ dataDir: dataDir });
    try {
      expect(modeOf(dataDir)).toBe(0o700);
      expect(modeOf(join(dataDir, "broker.db"))).toBe(0o600);
      for (const f of ["broker.db-wal", "broker.db-shm"]) {
        expect(existsSync(join(dataDir, f))).toBe(true);
        expect(modeOf(join(dataDir, f))).toBe(0o600);
      }
    } finally {
      store.close();
    }
  });

  test("a data dir path that is a file is refused", async () => {
    const file = join(tempDir(), "not-a-dir");
    writeFileSync(file, "x");
    await expect(openStore({ dataDir: file })).rejects.toThrow("not a directory");
  });
});

describe("pragmas", () => {
  test("a file store runs in WAL mode with foreign keys on", async () => {
    using store = await openStore({ dataDir: tempDir() });
    expect(await store.db.get<{ journal_mode: string }>("PRAGMA journal_mode")).toEqual({ journal_mode: "wal" });
    expect(await store.db.get<{ foreign_keys: number }>("PRAGMA foreign_keys")).toEqual({ foreign_keys: 1 });
    expect(await store.db.get<{ secure_delete: number }>("PRAGMA secure_delete")).toEqual({ secure_delete: 1 });
  });

  test("the memory store enforces foreign keys too", async () => {
    using store = await openMemoryStore();
    expect(await store.db.get<{ foreign_keys: number }>("PRAGMA foreign_keys")).toEqual({ foreign_keys: 1 });
    await expect(store.credentials.put({ vaultId: 999, key: "K", nonce: new Uint8Array(12), ciphertext: new Uint8Array(17) }, 1)).rejects.toThrow();
  });
});

describe("transactions", () => {
  const names = async (store: Store) => (await store.vaults.list()).map((v) => v.name).sort();
  const gate = () => {
    let open!: () => void;
    const p = new Promise<void>((r) => (open = r));
    return { p, open };
  };

  test("a statement issued while a transaction is open waits for it and is not rolled back with it", async () => {
    using store = await openMemoryStore();
    const entered = gate();
    const finish = gate();
    const tx = store.transaction(async (t) => {
      await t.vaults.create("inside", 1);
      entered.open();
      await finish.p;
      throw new Error("roll back");
    });
    await entered.p;
    const events: string[] = [];
    const outside = store.vaults.create("outside", 1).then(() => events.push("outside"));
    const txDone = tx.catch(() => events.push("tx"));
    await Bun.sleep(10);
    expect(events).toEqual([]); // still waiting
    finish.open();
    await Promise.all([outside, txDone]);
    expect(events).toEqual(["tx", "outside"]);
    expect(await names(store)).toEqual(["outside"]);
  });

  test("a statement issued in the same tick as a transaction starts is not swallowed by its rollback", async () => {
    using store = await openMemoryStore();
    const finish = gate();
    const tx = store.transaction(async (t) => {
      await t.vaults.create("inside", 1);
      await finish.p;
      throw new Error("roll back");
    });
    const outside = store.vaults.create("outside", 1);
    setTimeout(finish.open, 10);
    const [txResult, outsideResult] = await Promise.allSettled([tx, outside]);
    expect(txResult.status).toBe("rejected");
    expect(outsideResult.status).toBe("fulfilled");
    // The write was reported as done, so it must still be there.
    expect(await names(store)).toEqual(["outside"]);
  });

  test("two transactions started together run one after the other", async () => {
    using store = await openMemoryStore();
    const finish = gate();
    const first = store.transaction(async (t) => {
      await t.vaults.create("first", 1);
      await finish.p;
      throw new Error("roll back first");
    });
    const second = store.transaction(async (t) => (await t.vaults.create("second", 1)).name);
    setTimeout(finish.open, 10);
    const [a, b] = await Promise.allSettled([first, second]);
    expect(a.status).toBe("rejected");
    expect(b).toEqual({ status: "fulfilled", value: "second" });
    expect(await names(store)).toEqual(["second"]);
  });
});
