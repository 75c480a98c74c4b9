// One store test suite, run on every backend: forEachBackend wraps a suite in describe("sqlite")
// and describe("postgres"). PostgreSQL gets a fresh database per open() on the process's shared
// throwaway cluster (dropped after the suite); it is skipped only where pgMissing (never under CI=true).

import { afterAll, beforeAll, describe } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createStore, migrate, openMemoryStore, openPostgres, type Db, type Store } from "../../src/store/index.ts";
import { openSqliteFile } from "../../src/store/sqlite.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "./postgres.ts";

export type BackendName = "sqlite" | "postgres";

export interface Backend {
  readonly name: BackendName;
  /** A fresh, migrated, empty store of its own. Closed after the file's tests. */
  open(): Promise<Store>;
  /**
   * A fresh empty (unmigrated) database; every call of the returned function opens one more
   * separate connection (pool) to it, as a second broker instance would. Closed after the file's tests.
   */
  freshDatabase(): Promise<() => Db>;
}

/** Enough pooled connections for the race tests to run truly in parallel on PostgreSQL. */
const POOL_SIZE = 8;

export function forEachBackend(suite: (backend: Backend) => void): void {
  describe("sqlite", () => {
    const { track, closeAll } = createTracker();
    const dirs: string[] = [];
    afterAll(() => {
      closeAll();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });
    suite({
      name: "sqlite",
      open: async () => track(await openMemoryStore()),
      async freshDatabase() {
        const dir = mkdtempSync(join(tmpdir(), "broker-store-"));
        dirs.push(dir);
        return () => track(openSqliteFile(dir));
      },
    });
  });

  describe.skipIf(pgMissing)("postgres", () => {
    const { track, closeAll } = createTracker();
    let cluster: SharedPgCluster | undefined;
    beforeAll(async () => {
      cluster = await sharedPgCluster();
    }, 60_000);
    afterAll(async () => {
      closeAll();
      await cluster?.release();
    });
    const freshDatabase = async () => {
      if (!cluster) throw new Error("the PostgreSQL cluster did not start (see beforeAll)");
      const url = await cluster.createDatabase();
      return () => track(openPostgres(url, { max: POOL_SIZE }));
    };
    suite({
      name: "postgres",
      freshDatabase,
      async open() {
        const db = (await freshDatabase())();
        await migrate(db);
        return createStore(db);
      },
    });
  });
}

function createTracker() {
  const open: { close(): void }[] = [];
  return {
    track<T extends { close(): void }>(handle: T): T {
      open.push(handle);
      return handle;
    },
    closeAll() {
      for (const h of open.splice(0)) h.close();
    },
  };
}
