// Every list that can grow is paged in the API: `limit` (1–500, default 100) and the cursor of the
// previous answer's `next_cursor` (`after`, or `before` for proposals, read newest first). Pages meet at
// the boundary, the last one says so with next_cursor null (an exactly full page too), a cursor past the
// end is an empty last page, and a malformed limit or cursor is 400 in the one envelope, naming it. The
// list's own field keeps its name. The vault's stored credential is never in an answer or a log line.

import { beforeAll, describe, expect, test } from "bun:test";
import {
  addAgent,
  createHarness,
  createVault,
  expectNoLeak,
  expectNoTokensInLogs,
  type Harness,
  login,
  mintScoped,
  register,
  sentinel,
  setCredential,
} from "./fixtures.ts";

let h: Harness;
let owner: string;
let stored: string;
const X_VAULT = { "x-vault": "v" };

beforeAll(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v");
  stored = sentinel("pages");
  await setCredential(h, { token: owner }, "v", "API_KEY", stored);
  for (const host of ["e.example.com", "a.example.com", "c.example.com", "b.example.com", "d.example.com"]) {
    const res = await h.call("POST", "/v1/vaults/v/services", { token: owner, body: { host, auth: { type: "bearer", token: "API_KEY" } } });
    expect(res.status).toBe(201);
  }
});

/** GETs `path` page by page (`limit` each, the cursor as `param`), answering each page's entries of `field`. */
async function pages(path: string, field: string, param: "after" | "before", limit: number, headers?: Record<string, string>) {
  const out: unknown[][] = [];
  let cursor: string | null = null;
  const sep = path.includes("?") ? "&" : "?";
  do {
    const res = await h.call("GET", `${path}${sep}limit=${limit}${cursor ? `&${param}=${encodeURIComponent(cursor)}` : ""}`, { token: owner, headers });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([field, "next_cursor"].sort());
    out.push(res.body[field]);
    cursor = res.body.next_cursor;
  } while (cursor !== null && out.length < 20);
  return out;
}

async function expect400(path: string, field: string, headers?: Record<string, string>) {
  const res = await h.call("GET", path, { token: owner, headers });
  expect({ path, status: res.status, error: res.body?.error, field: res.body?.field }).toEqual({ path, status: 400, error: "invalid_request", field });
  expect(res.headers.get("x-broker-error")).toBe("invalid_request");
}

describe("GET /v1/vaults/{vault}/services", () => {
  test("pages of two in host order; the last page has no cursor", async () => {
    const hosts = (await pages("/v1/vaults/v/services", "services", "after", 2)).map((p) => p.map((s) => (s as { host: string }).host));
    expect(hosts).toEqual([["a.example.com", "b.example.com"], ["c.example.com", "d.example.com"], ["e.example.com"]]);
  });

  test("no limit: the default page (every one here), next_cursor null; an exactly full page is the last; a cursor past the end is an empty last page", async () => {
    const all = await h.call("GET", "/v1/vaults/v/services", { token: owner });
    expect({ n: all.body.services.length, next: all.body.next_cursor }).toEqual({ n: 5, next: null });
    const full = await h.call("GET", "/v1/vaults/v/services?limit=5", { token: owner });
    expect({ n: full.body.services.length, next: full.body.next_cursor }).toEqual({ n: 5, next: null });
    const four = await h.call("GET", "/v1/vaults/v/services?limit=4", { token: owner });
    expect(four.body.next_cursor).toBe("d.example.com");
    const past = await h.call("GET", "/v1/vaults/v/services?after=zzz.example.com", { token: owner });
    expect(past.body).toEqual({ services: [], next_cursor: null });
    const empty = await h.call("GET", "/v1/vaults/v/services?after=", { token: owner }); // empty: the first page, as the log's query
    expect(empty.body.services.length).toBe(5);
  });

  test("a limit outside 1–500, or a cursor that cannot be one, is 400 naming it", async () => {
    for (const bad of ["0", "501", "-1", "1.5", "abc", "9999999"]) await expect400(`/v1/vaults/v/services?limit=${bad}`, "limit");
    for (const bad of ["a%20b", "%00", "x".repeat(301), "%C3%A9"]) await expect400(`/v1/vaults/v/services?after=${bad}`, "after");
  });
});

describe("agents, sessions, proposals and held requests", () => {
  test("GET /v1/agents pages by name", async () => {
    for (const name of ["carol", "alice", "bob"]) await addAgent(h, owner, "v", "proxy", name);
    const names = (await pages("/v1/agents", "agents", "after", 2)).map((p) => p.map((a) => (a as { name: string }).name));
    expect(names).toEqual([["alice", "bob"], ["carol"]]);
    await expect400("/v1/agents?after=has%20space", "after");
  });

  test("GET /v1/auth/sessions and GET /v1/sessions page oldest first", async () => {
    for (let i = 0; i < 2; i++) expect((await login(h, "owner@example.com")).status).toBe(200);
    const own = await pages("/v1/auth/sessions", "sessions", "after", 2);
    expect(own.map((p) => p.length)).toEqual([2, 1]);
    const ids = own.flat().map((s) => (s as { id: string }).id);
    expect(new Set(ids).size).toBe(3);
    await expect400("/v1/auth/sessions?after=ses_x", "after");

    for (let i = 0; i < 3; i++) expect((await mintScoped(h, { token: owner }, "v")).status).toBe(201);
    const scoped = await pages("/v1/sessions?vault=v", "sessions", "after", 2);
    expect(scoped.map((p) => p.length)).toEqual([2, 1]);
    await expect400("/v1/sessions?vault=v&limit=0", "limit");
  });

  test("GET /v1/proposals pages newest first with `before`", async () => {
    const made: number[] = [];
    for (const host of ["p1.example.com", "p2.example.com", "p3.example.com"]) {
      const res = await h.call("POST", "/v1/proposals", {
        token: owner,
        headers: X_VAULT,
        body: { services: [{ action: "set", host, description: "d", auth: { type: "passthrough" } }] },
      });
      expect(res.status).toBe(201);
      made.push(res.body.id);
    }
    const got = (await pages("/v1/proposals", "proposals", "before", 2, X_VAULT)).map((p) => p.map((x) => (x as { id: number }).id));
    expect(got).toEqual([[made[2]!, made[1]!], [made[0]!]]);
    const pending = await h.call("GET", `/v1/proposals?status=pending&limit=1&before=${made[2]}`, { token: owner, headers: X_VAULT });
    expect({ ids: pending.body.proposals.map((p: { id: number }) => p.id), next: pending.body.next_cursor }).toEqual({ ids: [made[1]], next: String(made[1]) });
    await expect400("/v1/proposals?before=newest", "before", X_VAULT);
  });

  test("GET /v1/vaults/{vault}/request-approvals pages those awaiting a decision first, then the rest", async () => {
    const vault = (await h.store.vaults.byName("v"))!;
    const now = h.clock.now();
    const rows = [];
    for (let n = 1; n <= 3; n++) {
      rows.push(
        await h.store.requestApprovals.create({
          publicId: `apr_pagetest${String(n).padStart(8, "0")}`,
          vaultId: vault.id,
          principal: "agent:1",
          viaSession: false,
          fingerprint: String(n).padStart(64, "0"),
          method: "POST",
          host: "a.example.com",
          target: `/refund/${n}`,
          service: "a.example.com",
          headers: [],
          bodyPreview: null,
          bodyBytes: 0,
          bodySha256: "e".repeat(64),
          createdAt: now,
          expiresAt: n === 1 ? now - 1 : now + 60_000,
          sealedNonce: null,
          sealedDescription: null,
        }),
      );
    }
    const first = await h.call("GET", "/v1/vaults/v/request-approvals?limit=2", { token: owner });
    expect(first.body.request_approvals.map((r: { id: string; state: string }) => [r.id, r.state])).toEqual([
      [rows[1]!.publicId, "pending"],
      [rows[2]!.publicId, "pending"],
    ]);
    expect(first.body.next_cursor).toBe(`a${rows[2]!.id}`);
    const rest = await h.call("GET", `/v1/vaults/v/request-approvals?limit=2&after=${first.body.next_cursor}`, { token: owner });
    expect(rest.body.request_approvals.map((r: { id: string; state: string }) => [r.id, r.state])).toEqual([[rows[0]!.publicId, "expired"]]);
    expect(rest.body.next_cursor).toBeNull();
    for (const bad of ["x1", "a", "r-1", "12"]) await expect400(`/v1/vaults/v/request-approvals?after=${bad}`, "after");
  });
});

test("the stored credential is in no answer and no log line; no token in a log line", () => {
  expectNoLeak(h, stored);
  expectNoTokensInLogs(h);
});
