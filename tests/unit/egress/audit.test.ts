// The audit log: batched writes off the request path, retention by age and by row count, and the
// read API (filters, newest-first cursor, oldest-first follow).

import { expect, test } from "bun:test";
import { auditEntry, createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { openMemoryStore } from "../../../src/store/index.ts";
import { createClock, createTestApi } from "../../helpers/api.ts";

function entry(at: number, over: Partial<AuditEntry> = {}): AuditEntry {
  return {
    at,
    principal: "agent:1",
    vaultId: 1,
    vault: "main",
    ingress: "explicit",
    method: "GET",
    host: "api.example.com",
    path: "/v1/things",
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: 0,
    bytesOut: 10,
    durationMs: 3,
    error: null,
    contained: false,
    approvedBy: null,
    ...over,
  };
}

test("records are written in batches, not one statement per request", async () => {
  const store = await openMemoryStore();
  const clock = createClock();
  let transactions = 0;
  const original = store.transaction;
  store.transaction = (fn) => (transactions++, original(fn));
  const audit = createAuditLog(store, { now: clock.now, log: createMemoryLogger(), flushIntervalMs: 10_000 });
  for (let i = 0; i < 1200; i++) audit.record(entry(clock.now()));
  expect((await store.audit.list({ vaultId: 1, limit: 10 })).length).toBe(0); // nothing yet: off the request path
  await audit.flush();
  expect((await store.audit.list({ vaultId: 1, limit: 2000 })).length).toBe(1200);
  expect(transactions).toBe(3); // batches of 500
});

test("retention prunes by age and by row count", async () => {
  const store = await openMemoryStore();
  const clock = createClock();
  const day = 86_400_000;
  await store.audit.insert([entry(clock.now() - 40 * day), entry(clock.now() - 31 * day), ...Array.from({ length: 10 }, () => entry(clock.now()))]);
  const removed = await store.audit.prune(clock.now() - 30 * day, 5);
  expect(removed).toBe(7); // 2 too old, then 5 beyond the newest 5
  const left = await store.audit.list({ vaultId: 1, limit: 100 });
  expect(left.length).toBe(5);
  expect(left.every((r) => r.at === clock.now())).toBe(true);
});

test("the logs API filters, pages newest first and follows oldest first", async () => {
  const h = await createTestApi();
  const reg = await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } });
  const token = reg.body.token as string;
  expect((await h.call("POST", "/v1/vaults", { token, body: { name: "main" } })).status).toBe(201);
  const vaultId = (await h.store.vaults.byName("main"))!.id;
  const rows = Array.from({ length: 7 }, (_, i) =>
    entry(h.clock.now() + i, { vaultId, host: i % 2 ? "a.example.com" : "b.example.com", status: i === 3 ? 502 : 200 }),
  );
  await h.store.audit.insert(rows);
  const first = await h.call("GET", "/v1/vaults/main/logs?limit=3", { token });
  expect(first.status).toBe(200);
  expect(first.body.logs.map((l: { id: number }) => l.id)).toEqual([7, 6, 5]);
  expect(first.body.next_cursor).toBe("5");
  const next = await h.call("GET", `/v1/vaults/main/logs?limit=3&before=${first.body.next_cursor}`, { token });
  expect(next.body.logs.map((l: { id: number }) => l.id)).toEqual([4, 3, 2]);
  const follow = await h.call("GET", "/v1/vaults/main/logs?after=5", { token });
  expect(follow.body.logs.map((l: { id: number }) => l.id)).toEqual([6, 7]);
  const byHost = await h.call("GET", "/v1/vaults/main/logs?host=a.example.com", { token });
  expect(byHost.body.logs.every((l: { host: string }) => l.host === "a.example.com")).toBe(true);
  const failed = await h.call("GET", "/v1/vaults/main/logs?status=502", { token });
  expect(failed.body.logs.map((l: { id: number }) => l.id)).toEqual([4]);
  expect((await h.call("GET", "/v1/vaults/main/logs?limit=abc", { token })).status).toBe(400);
});

test("proxy-role principals cannot read the audit log", async () => {
  const h = await createTestApi();
  const owner = (await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } })).body.token as string;
  await h.call("POST", "/v1/vaults", { token: owner, body: { name: "main" } });
  const scoped = (await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main", role: "proxy" } })).body.token as string;
  expect((await h.call("GET", "/v1/vaults/main/logs", { token: scoped })).status).toBe(403);
});

test("credential references (issue 36) reach the logs API as credential_refs, beside credential_keys", async () => {
  const h = await createTestApi();
  const reg = await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } });
  const token = reg.body.token as string;
  expect((await h.call("POST", "/v1/vaults", { token, body: { name: "main" } })).status).toBe(201);
  const vault = (await h.store.vaults.byName("main"))!;
  const refs = ["prod-vault:kv/stripe#api_key (version 3)", "aws:arn:aws:secretsmanager:eu-west-1:1:secret:a,b"];
  const request = { principal: "agent:1", contained: false, vault, ingress: "explicit", method: "GET", host: "api.example.com", port: 443, target: "/v1" };
  const outcome = { status: 200, bytesIn: 0, bytesOut: 1, error: null, service: "api.example.com" };
  await h.store.audit.insert([
    auditEntry(request, h.clock.now(), h.clock.now(), { ...outcome, credentialKeys: ["STRIPE", "AWS"], credentialRefs: refs }),
    auditEntry(request, h.clock.now(), h.clock.now(), { ...outcome, credentialKeys: ["API_KEY"] }),
    entry(h.clock.now(), { vaultId: vault.id }), // a row made before references: no field at all
    entry(h.clock.now(), { vaultId: vault.id, credentialRefs: "[not json" }), // hand-edited: read as none, not a failed page
  ]);
  const page = await h.call("GET", "/v1/vaults/main/logs?after=0", { token });
  expect(page.status).toBe(200);
  expect(page.body.logs.map((l: { credential_keys: string[]; credential_refs: string[] }) => [l.credential_keys, l.credential_refs])).toEqual([
    [["STRIPE", "AWS"], refs],
    [["API_KEY"], []],
    [["API_KEY"], []],
    [["API_KEY"], []],
  ]);
});
