// On every backend: each list that can grow (a vault's services, agents, a user's and a vault's scoped
// sessions, proposals, held requests) reads one page with one fixed statement: pages follow one another
// at the boundary without a gap or a repeat, a cursor past the end is an empty page, only the list's own
// rows appear, and each statement is an index range in the page's order, stopped at LIMIT (no sort, no
// full scan: SQLite's EXPLAIN QUERY PLAN; PostgreSQL's EXPLAIN with sequential scans and sorts priced out,
// so a plan that still has one had no index to use). No timing.

import { beforeAll, describe, expect, test } from "bun:test";
import type { Sql, SqlValue, Store } from "../../../src/store/index.ts";
import { agentRepo } from "../../../src/store/agents.ts";
import { proposalRepo } from "../../../src/store/proposals.ts";
import { requestApprovalRepo } from "../../../src/store/request-approvals.ts";
import { serviceRepo } from "../../../src/store/services.ts";
import { sessionRepo } from "../../../src/store/sessions.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser, newSession } from "./conformance-fixtures.ts";

/** Pages of `size` read with `read(cursor)`, each from the last entry of the one before, until one comes back short. */
async function everyPage<T>(size: number, read: (cursor: T | undefined) => Promise<T[]>): Promise<T[][]> {
  const pages: T[][] = [];
  let cursor: T | undefined;
  for (;;) {
    const page = await read(cursor);
    pages.push(page);
    if (page.length < size) return pages;
    cursor = page.at(-1);
  }
}

forEachBackend((backend) => {
  let store: Store;
  /** Every statement the recording repositories ran, for the plan checks. */
  const ran: { sql: string; params: SqlValue[] }[] = [];
  let rec: Sql;
  const ids = { v: 0, w: 0, owner: 0, other: 0, bot: 0 };

  async function hold(vaultId: number, n: number, over: { principal?: string; expiresAt?: number } = {}) {
    return store.requestApprovals.create({
      publicId: `apr_${String(n).padStart(16, "0")}`,
      vaultId,
      principal: over.principal ?? "agent:1",
      viaSession: false,
      fingerprint: String(n).padStart(64, "0"),
      method: "POST",
      host: "api.example.com",
      target: "/",
      service: "api.example.com",
      headers: [],
      bodyPreview: null,
      bodyBytes: 0,
      bodySha256: "e".repeat(64),
      createdAt: 100,
      expiresAt: over.expiresAt ?? 1000,
      sealedNonce: null,
      sealedDescription: null,
    });
  }

  beforeAll(async () => {
    store = await backend.open();
    rec = {
      all: (sql, params = []) => (ran.push({ sql, params: [...params] }), store.db.all(sql, params)),
      get: (sql, params = []) => (ran.push({ sql, params: [...params] }), store.db.get(sql, params)),
      run: (sql, params) => store.db.run(sql, params),
    };
    ids.v = (await store.vaults.create("v", 1)).id;
    ids.w = (await store.vaults.create("w", 1)).id;
    ids.owner = (await addUser(store, "owner@example.com", "owner")).id;
    ids.other = (await addUser(store, "other@example.com")).id;
    const service = { description: "", authType: "bearer" as const, authKey: "K", authHeader: null, authPrefix: null, authUsername: null, enabled: true };
    for (const host of ["e.example.com", "a.example.com", "c.example.com", "b.example.com", "d.example.com"])
      await store.services.put({ ...service, vaultId: ids.v, host }, 1);
    await store.services.put({ ...service, vaultId: ids.w, host: "b2.example.com" }, 1);
    for (const name of ["echo", "alpha", "delta", "bravo", "charlie"]) await store.agents.create({ name, role: "member", createdBy: null, createdAt: 1 });
    const byName = async (n: string) => (await store.agents.byName(n))!.id;
    await store.access.setMember(ids.v, ids.other, "admin", 1);
    for (const n of ["alpha", "charlie", "echo"]) await store.access.setGrant(ids.v, await byName(n), "member", 1);
    await store.access.setGrant(ids.w, await byName("bravo"), "admin", 1);
    await store.access.setGrant(ids.w, await byName("delta"), "proxy", 1);
    ids.bot = await byName("bravo");
  });

  describe("a vault's services, in host order", () => {
    test("pages of two meet at the boundary; a cursor at or past the end is an empty page; another vault's never shows", async () => {
      const pages = await everyPage(2, async (after?: string) => (await store.services.page(ids.v, after ?? "", 2)).map((s) => s.host));
      expect(pages).toEqual([["a.example.com", "b.example.com"], ["c.example.com", "d.example.com"], ["e.example.com"]]);
      expect((await store.services.allOfVault(ids.v)).map((s) => s.host)).toEqual(pages.flat());
      expect(await store.services.page(ids.v, "e.example.com", 2)).toEqual([]);
      expect(await store.services.page(ids.v, "zzz", 2)).toEqual([]);
      expect((await store.services.page(ids.v, "", 5)).length).toBe(5); // exactly full: the caller's extra row says whether more follow
      expect((await store.services.page(ids.w, "", 10)).map((s) => s.host)).toEqual(["b2.example.com"]);
    });
  });

  describe("agents, in name order", () => {
    test("every agent, those granted in a vault, and those in vaults a person or an agent administers", async () => {
      const names = async (scope: Parameters<Store["agents"]["page"]>[0], after = "", limit = 10) =>
        (await store.agents.page(scope, after, limit)).map((a) => a.name);
      expect(await everyPage(2, (after?: string) => names({ kind: "all" }, after ?? "", 2))).toEqual([["alpha", "bravo"], ["charlie", "delta"], ["echo"]]);
      expect(await names({ kind: "granted_in", vaultId: ids.v })).toEqual(["alpha", "charlie", "echo"]);
      expect(await names({ kind: "granted_in", vaultId: ids.v }, "alpha", 1)).toEqual(["charlie"]);
      expect(await names({ kind: "administered_by_user", userId: ids.other })).toEqual(["alpha", "charlie", "echo"]);
      expect(await names({ kind: "administered_by_user", userId: ids.owner })).toEqual([]); // the owner's "all" is the domain's decision
      expect(await names({ kind: "administered_by_agent", agentId: ids.bot })).toEqual(["bravo", "delta"]);
      expect(await names({ kind: "all" }, "echo")).toEqual([]);
      const grants = await store.access.grantsOfAgentsNamed("alpha", "charlie");
      expect(grants.map((g) => [g.agentName, g.vaultName, g.role])).toEqual([
        ["alpha", "v", "member"],
        ["bravo", "w", "admin"],
        ["charlie", "v", "member"],
      ]);
    });
  });

  describe("sessions, in creation order", () => {
    test("a user's active sessions page by id, skipping revoked and expired ones; a vault's scoped sessions by minter", async () => {
      const u = ids.other;
      for (const [tag, over] of [
        ["s1", {}],
        ["s2", { expiresAt: 50 }],
        ["s3", {}],
        ["s4", {}],
        ["s5", {}],
      ] as const)
        await store.sessions.create(newSession(tag, { userId: u, ...over }));
      const revoked = await store.sessions.byPublicId("ses_s4");
      await store.sessions.revoke(revoked!.id, 20);
      const page = (after: number, limit: number) => store.sessions.activeForUser(u, 100, after, limit);
      const first = await page(0, 2);
      expect(first.map((s) => s.publicId)).toEqual(["ses_s1", "ses_s3"]);
      expect((await page(first.at(-1)!.id, 2)).map((s) => s.publicId)).toEqual(["ses_s5"]);
      expect(await page(Number.MAX_SAFE_INTEGER - 1, 2)).toEqual([]);

      const scoped = (tag: string, by: { userId?: number; agentId?: number }, vaultId = ids.v) =>
        store.sessions.create(
          newSession(tag, { kind: "scoped", vaultId, role: "proxy", expiresAt: 500, userId: by.userId ?? null, agentId: by.agentId ?? null }),
        );
      await scoped("k1", { userId: u });
      await scoped("k2", { agentId: ids.bot });
      await scoped("k3", { userId: ids.owner });
      await scoped("k4", { userId: u });
      await scoped("k5", { userId: u }, ids.w);
      const tags = (rows: { publicId: string }[]) => rows.map((r) => r.publicId);
      const all = await store.sessions.activeScopedForVault(ids.v, 100, 0, 10);
      expect(tags(all)).toEqual(["ses_k1", "ses_k2", "ses_k3", "ses_k4"]);
      expect(tags(await store.sessions.activeScopedForVault(ids.v, 100, all[1]!.id, 1))).toEqual(["ses_k3"]);
      expect(tags(await store.sessions.activeScopedForVault(ids.v, 100, 0, 10, { userId: u }))).toEqual(["ses_k1", "ses_k4"]);
      expect(tags(await store.sessions.activeScopedForVault(ids.v, 100, 0, 10, { agentId: ids.bot }))).toEqual(["ses_k2"]);
      expect(await store.sessions.activeScopedForVault(ids.v, 600, 0, 10)).toEqual([]); // expired
      expect([...(await store.sessions.countActiveForAgentsNamed("alpha", "echo", 100))]).toEqual([[ids.bot, 1]]);
    });
  });

  describe("proposals, newest first", () => {
    test("every proposal, one status, or the decided ones, older than the cursor", async () => {
      const made: number[] = [];
      const at = (i: number) => made[i]!;
      for (let i = 0; i < 6; i++) {
        const p = await store.proposals.create({
          vaultId: i === 5 ? ids.w : ids.v,
          message: `p${i}`,
          userMessage: "",
          services: [],
          credentials: [],
          createdBy: "agent:1",
          createdAt: 10,
          expiresAt: 1000,
          approvalTokenHash: `appr-page-${i}`,
          approvalExpiresAt: 500,
        });
        made.push(p.id);
      }
      await store.proposals.decide(made[1]!, "applied", ids.owner, 20);
      await store.proposals.decide(made[3]!, "rejected", ids.owner, 20);
      const idsOf = (rows: { id: number }[]) => rows.map((r) => r.id);
      const v = made.slice(0, 5).reverse();
      const pages = await everyPage(2, async (last?: number) => idsOf(await store.proposals.list(ids.v, null, 2, last)));
      expect(pages).toEqual([v.slice(0, 2), v.slice(2, 4), v.slice(4)]);
      expect(idsOf(await store.proposals.list(ids.v, "pending", 10))).toEqual([at(4), at(2), at(0)]);
      expect(idsOf(await store.proposals.list(ids.v, "pending", 10, at(4)))).toEqual([at(2), at(0)]);
      expect(idsOf(await store.proposals.list(ids.v, "decided", 10))).toEqual([at(3), at(1)]);
      expect(idsOf(await store.proposals.list(ids.v, "decided", 1, at(3)))).toEqual([at(1)]);
      expect(await store.proposals.list(ids.v, null, 10, at(0))).toEqual([]);
      expect(await store.proposals.list(ids.v, null, 10, 1)).toEqual([]);
    });
  });

  describe("held requests, awaiting a decision first", () => {
    test("the awaiting part oldest first, then the rest newest first, a page crossing from one to the other; one principal's", async () => {
      const rows: { id: number }[] = [];
      for (let n = 1; n <= 7; n++) rows.push(await hold(ids.v, n, { principal: n % 2 ? "agent:1" : "agent:2", expiresAt: n <= 2 ? 50 : 1000 }));
      await store.requestApprovals.decide(rows[3]!.id, "approved", ids.owner, 20); // n = 4
      await hold(ids.w, 99);
      const id = (n: number) => rows[n - 1]!.id;
      // Awaiting at 100: 3, 5, 6, 7 (1 and 2 expired, 4 decided); the rest newest first: 4, 2, 1.
      const order = [3, 5, 6, 7, 4, 2, 1].map(id);
      const list = (limit: number, after?: { part: "awaiting" | "rest"; id: number }, principal?: string) =>
        store.requestApprovals.list(ids.v, 100, limit, after, principal).then((r) => r.map((x) => x.id));
      expect(await list(10)).toEqual(order);
      expect(await list(3)).toEqual(order.slice(0, 3));
      expect(await list(3, { part: "awaiting", id: id(6) })).toEqual(order.slice(3, 6)); // crosses into the rest
      expect(await list(3, { part: "rest", id: id(2) })).toEqual([id(1)]);
      expect(await list(3, { part: "rest", id: id(1) })).toEqual([]);
      expect(await list(3, { part: "awaiting", id: Number.MAX_SAFE_INTEGER - 1 })).toEqual([4, 2, 1].map(id));
      expect(await list(10, undefined, "agent:2")).toEqual([6, 4, 2].map(id));
      expect(await list(1, { part: "awaiting", id: id(6) }, "agent:2")).toEqual([id(4)]);
    });
  });

  test("each page statement is an index range in its order, stopped at LIMIT: no sort, no full scan", async () => {
    ran.length = 0;
    const s = { services: serviceRepo(rec), agents: agentRepo(rec), sessions: sessionRepo(rec), proposals: proposalRepo(rec), held: requestApprovalRepo(rec) };
    await s.services.page(ids.v, "b", 10);
    for (const scope of [
      { kind: "all" },
      { kind: "granted_in", vaultId: ids.v },
      { kind: "administered_by_user", userId: ids.other },
      { kind: "administered_by_agent", agentId: ids.bot },
    ] as const)
      await s.agents.page(scope, "b", 10);
    await s.sessions.activeForUser(ids.other, 100, 1, 10);
    for (const by of [undefined, { userId: ids.other }, { agentId: ids.bot }]) await s.sessions.activeScopedForVault(ids.v, 100, 1, 10, by);
    for (const status of [null, "pending", "decided"] as const) await s.proposals.list(ids.v, status, 10, 1000);
    for (const who of [undefined, "agent:2"]) {
      await s.held.list(ids.v, 100, 10, { part: "awaiting", id: 1 }, who);
      await s.held.list(ids.v, 100, 10, { part: "rest", id: 1000 }, who);
    }
    const shapes = new Map(ran.map((r) => [r.sql, r.params]));
    expect(shapes.size).toBe(16);
    for (const [sql, params] of shapes) {
      const table = /FROM (\w+)/.exec(sql)![1]!;
      if (backend.name === "sqlite") {
        const plan = (await store.db.all<{ detail: string }>(`EXPLAIN QUERY PLAN ${sql}`, params)).map((r) => r.detail).join("\n");
        expect({ sql, plan, sorted: plan.includes("TEMP B-TREE") }).toEqual({ sql, plan, sorted: false });
        expect({ sql, plan, fullScan: new RegExp(`\\bSCAN (${table}|a)\\b`).test(plan) }).toEqual({ sql, plan, fullScan: false });
      } else {
        const plan = await store.db.transaction(async (tx) => {
          for (const off of ["enable_seqscan", "enable_sort", "enable_bitmapscan"]) await tx.run(`SET LOCAL ${off} = off`);
          const rows = await tx.all<Record<string, string>>(`EXPLAIN ${sql}`, params);
          return rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        expect({ sql, plan, sorted: /\bSort\b/.test(plan), seq: plan.includes("Seq Scan") }).toEqual({ sql, plan, sorted: false, seq: false });
        expect(plan).toMatch(new RegExp(`Index (Only )?Scan( Backward)? using \\w+ on ${table}`));
      }
    }
  });
});
