// On every backend: the reads behind incremental plans (issue 35, architecture.md D11 and D22). A
// host's service is found among the two stored texts that can match it; a vault's services come a
// page at a time with the sealed credential each names, in one statement; the vaults that have a
// service are listed one index step per vault. Each statement is an index search, never a scan of
// the table or a sort (SQLite's EXPLAIN QUERY PLAN; PostgreSQL's EXPLAIN with scans and sorts priced
// out). Ciphertext only: no value is decrypted here. No timing.

import { beforeAll, expect, test } from "bun:test";
import type { Sql, SqlValue, Store } from "../../../src/store/index.ts";
import { serviceRepo } from "../../../src/store/services.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const svc = (vaultId: number, host: string, authKey: string | null) => ({
  vaultId,
  host,
  description: "",
  authType: authKey ? ("bearer" as const) : ("passthrough" as const),
  authKey,
  authHeader: null,
  authPrefix: null,
  authUsername: null,
  enabled: true,
});

forEachBackend((backend) => {
  let store: Store;
  const ids = { v: 0, w: 0, empty: 0 };
  const ran: { sql: string; params: SqlValue[] }[] = [];
  let rec: Sql;

  beforeAll(async () => {
    store = await backend.open();
    rec = {
      all: (sql, params = []) => (ran.push({ sql, params: [...params] }), store.db.all(sql, params)),
      get: (sql, params = []) => (ran.push({ sql, params: [...params] }), store.db.get(sql, params)),
      run: (sql, params = []) => store.db.run(sql, params),
    };
    ids.v = (await store.vaults.create("v", 1)).id;
    ids.w = (await store.vaults.create("w", 1)).id;
    ids.empty = (await store.vaults.create("empty", 1)).id;
    const sealed = (n: number) => ({ nonce: new Uint8Array(12).fill(n), ciphertext: new Uint8Array(40).fill(n + 1) });
    await store.credentials.put({ vaultId: ids.v, key: "A", ...sealed(1) }, 1);
    await store.credentials.put({ vaultId: ids.w, key: "A", ...sealed(7) }, 1);
    for (const host of ["api.example.com", "*.example.com", "api.example.com:8443", "[2001:db8::1]", "x.api.example.com"])
      await store.services.put(svc(ids.v, host, "A"), 1);
    await store.services.put(svc(ids.v, "open.example.org", null), 1);
    await store.services.put(svc(ids.v, "missing.example.org", "NOT_STORED"), 1);
    await store.services.put(svc(ids.w, "api.example.com", "A"), 1);
  });

  test("forHost: the rows stored under the two texts, in this vault only", async () => {
    const hosts = async (exact: string, wildcard?: string) => (await store.services.forHost(ids.v, exact, wildcard)).map((r) => r.host).sort();
    expect(await hosts("api.example.com", "*.example.com")).toEqual(["*.example.com", "api.example.com"]);
    expect(await hosts("other.example.com", "*.example.com")).toEqual(["*.example.com"]);
    expect(await hosts("api.example.com:8443", "*.example.com:8443")).toEqual(["api.example.com:8443"]);
    expect(await hosts("[2001:db8::1]")).toEqual(["[2001:db8::1]"]);
    expect(await hosts("nothing.example.net", "*.example.net")).toEqual([]);
    expect((await store.services.forHost(ids.w, "api.example.com", "*.example.com")).map((r) => [r.vaultId, r.host])).toEqual([[ids.w, "api.example.com"]]);
  });

  test("pageWithCredentials: pages in host order without gap or repeat, each row with the ciphertext its key names", async () => {
    const seen: string[] = [];
    let after = "";
    for (;;) {
      const page = await store.services.pageWithCredentials(ids.v, after, 3);
      seen.push(...page.map((r) => r.host));
      for (const r of page) {
        if (r.authKey === "A") expect([r.credentialNonce, r.credentialCiphertext]).toEqual([new Uint8Array(12).fill(1), new Uint8Array(40).fill(2)]);
        else expect([r.credentialNonce, r.credentialCiphertext]).toEqual([null, null]);
      }
      if (page.length < 3) break;
      after = page.at(-1)!.host;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.toSorted()).toEqual(
      ["api.example.com", "*.example.com", "api.example.com:8443", "[2001:db8::1]", "x.api.example.com", "open.example.org", "missing.example.org"].sort(),
    );
    expect(await store.services.pageWithCredentials(ids.empty, "", 3)).toEqual([]);
  });

  test("vaultIds: every vault with a service, once", async () => {
    expect((await store.services.vaultIds()).sort((a, b) => a - b)).toEqual([ids.v, ids.w].sort((a, b) => a - b));
  });

  test("each statement is an index search: no full scan, no sort", async () => {
    ran.length = 0;
    const s = serviceRepo(rec);
    await s.forHost(ids.v, "api.example.com", "*.example.com");
    await s.pageWithCredentials(ids.v, "b", 10);
    await s.vaultIds();
    expect(ran).toHaveLength(3);
    for (const { sql, params } of ran) {
      if (backend.name === "sqlite") {
        const plan = (await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params)).map((r) => r.detail).join("\n");
        expect({ sql, plan, sorted: plan.includes("TEMP B-TREE"), scan: /\bSCAN (services|credentials)\b/.test(plan) }).toEqual({
          sql,
          plan,
          sorted: false,
          scan: false,
        });
      } else {
        const plan = await store.db.transaction(async (tx) => {
          for (const off of ["enable_seqscan", "enable_sort", "enable_bitmapscan"]) await tx.run(`SET LOCAL ${off} = off`);
          const rows = await tx.all<Record<string, string>>(`EXPLAIN ${sql}`, params);
          return rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        expect({ sql, plan, sorted: /\bSort\b/.test(plan), seq: plan.includes("Seq Scan") }).toEqual({ sql, plan, sorted: false, seq: false });
      }
    }
  });
});
