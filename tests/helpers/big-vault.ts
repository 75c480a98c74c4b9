// A store that shows what the plan cache reads: every statement is counted with the rows it returned,
// every service and credential repository call by name, and the database can be switched off (each
// statement then fails with DatabaseUnavailable). Seeded with one large vault (a credential per ten
// services, `svc-<i>.big.example`) and a quiet vault of one service, for the incremental-plan tests.

import { DatabaseUnavailable } from "../../src/errors.ts";
import { importAesKey } from "../../src/crypto/aead.ts";
import { storeCredential } from "../../src/crypto/index.ts";
import { Secret } from "../../src/secret.ts";
import { createStore, migrate, type Db, type ServiceRow, type SqlValue, type Store } from "../../src/store/index.ts";
import { openSqliteMemory } from "../../src/store/sqlite.ts";

export interface ObservedStore {
  readonly store: Store;
  readonly dataKey: CryptoKey;
  /** `services.forHost`, `credentials.get`, … in the order called since the last reset. */
  readonly calls: string[];
  /** Rows returned by statements since the last reset, in all and by the largest one. */
  rows(): { total: number; largest: number };
  reset(): void;
  down(on: boolean): void;
}

export async function observedStore(): Promise<ObservedStore> {
  const db = openSqliteMemory();
  await migrate(db);
  let isDown = false;
  let total = 0;
  let largest = 0;
  const calls: string[] = [];
  const count = (n: number) => ((total += n), (largest = Math.max(largest, n)));
  const gate = <T>(f: () => Promise<T>): Promise<T> => (isDown ? Promise.reject(new DatabaseUnavailable("ECONNREFUSED")) : f());
  const wrapped: Db = {
    ...db,
    all: <T>(sql: string, params?: readonly SqlValue[]) => gate(() => db.all<T>(sql, params)).then((rows) => (count(rows.length), rows)),
    get: <T>(sql: string, params?: readonly SqlValue[]) => gate(() => db.get<T>(sql, params)).then((row) => (count(row ? 1 : 0), row)),
    run: (sql, params) => gate(() => db.run(sql, params)),
    transaction: (fn) => gate(() => db.transaction(fn)),
  };
  const base = createStore(wrapped);
  const observe = <R extends object>(name: string, repo: R): R =>
    new Proxy(repo, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (typeof value !== "function") return value;
        return (...args: unknown[]) => (calls.push(`${name}.${String(prop)}`), value.apply(target, args));
      },
    });
  const store: Store = { ...base, services: observe("services", base.services), credentials: observe("credentials", base.credentials) };
  const dataKey = await importAesKey(crypto.getRandomValues(new Uint8Array(32)));
  return {
    store,
    dataKey,
    calls,
    rows: () => ({ total, largest }),
    reset() {
      calls.length = 0;
      total = 0;
      largest = 0;
    },
    down: (on) => void (isDown = on),
  };
}

export const bearer = (vaultId: number, host: string, authKey: string): Omit<ServiceRow, "updatedAt"> => ({
  vaultId,
  host,
  description: "",
  authType: "bearer",
  authKey,
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
});

/** SECRET: the value of the big vault's credential `K<k>` as seeded. */
export const bigValue = (k: number) => `sk-big-${k}-${"x".repeat(24)}`;

/** `services` services in vault "big" (credential K<i/10> each) and one in vault "quiet" (QUIET_KEY). */
export async function seedVaults(o: ObservedStore, services: number, quietValue: string) {
  const { store, dataKey } = o;
  const now = 1_000_000;
  const big = await store.vaults.create("big", now);
  const quiet = await store.vaults.create("quiet", now);
  for (let k = 0; k < Math.ceil(services / 10); k++) await storeCredential(store, dataKey, big.id, `K${k}`, new Secret(bigValue(k)), now);
  await store.transaction(async (tx) => {
    for (let i = 0; i < services; i++) await tx.services.put(bearer(big.id, `svc-${i}.big.example`, `K${Math.floor(i / 10)}`), now);
  });
  await storeCredential(store, dataKey, quiet.id, "QUIET_KEY", new Secret(quietValue), now);
  await store.services.put(bearer(quiet.id, "api.quiet.example", "QUIET_KEY"), now);
  return { big: { id: big.id, name: big.name }, quiet: { id: quiet.id, name: quiet.name } };
}

/** How many pages of services the needles' store half has read since the last reset. */
export const pagesRead = (o: ObservedStore) => o.calls.filter((c) => c === "services.pageWithCredentials").length;

/**
 * Turns of the event loop (never time) until `done()` holds, the background reads running meanwhile;
 * returns the most pages read between two turns (1: the reader lets the loop go after every page).
 */
export async function turnsUntil(o: ObservedStore, done: () => boolean, maxTurns = 1_000_000): Promise<number> {
  let most = 0;
  for (let turn = 0, last = pagesRead(o); !done(); turn++) {
    if (turn === maxTurns) throw new Error(`not done after ${maxTurns} turns of the event loop`);
    await new Promise((r) => setImmediate(r));
    const now = pagesRead(o);
    most = Math.max(most, now - last);
    last = now;
  }
  return most;
}
