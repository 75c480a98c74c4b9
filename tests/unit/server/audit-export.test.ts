// GET /v1/vaults/{vault}/audit/export and …/audit/verify (docs/audit-chain.md, Export and Verifying): the chain page
// by page in seq order with anchor and head, names beside it, unchained records on the first page; the broker's own
// verification with its checkpoints, kept while the head stays, and named breaks after the database was edited; the
// console's Logs page says "verified up to" or where the chain breaks. The readers of the vault's logs only.

import { beforeEach, describe, expect, test } from "bun:test";
import { startAuditCheckpointer } from "../../../src/app/audit-checkpointer.ts";
import { loadAuditSigningKey, verifyAuditChain, type ExportedAuditRecord } from "../../../src/crypto/index.ts";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import { createBrowser } from "./console-fixtures.ts";
import { addAgent, addUser, createHarness, createVault, mintScoped, register, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;
let vaults: Record<string, number>;

function entry(vault: string, i: number): AuditEntry {
  return {
    at: h.clock.now() + i,
    principal: "user:1",
    vaultId: vaults[vault]!,
    vault,
    ingress: "explicit",
    method: i % 2 ? "POST" : "GET",
    host: "api.example.com",
    path: `/v1/things/${i}`,
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: i,
    bytesOut: 10,
    durationMs: 3,
    error: null,
    contained: false,
    approvedBy: null,
  };
}

/** Writes records through the audit writer (which chains them), interleaving the vaults. */
async function write(writes: Record<string, number>): Promise<void> {
  const audit = createAuditLog(h.store, { now: h.clock.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  const most = Math.max(...Object.values(writes));
  for (let i = 0; i < most; i++) for (const [vault, n] of Object.entries(writes)) if (i < n) audit.record(entry(vault, i));
  await audit.flush();
}

async function checkpoint(): Promise<void> {
  const { signer } = await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now());
  const cp = startAuditCheckpointer(h.store, { signer, everyRecords: 1, everyMs: 1, pollMs: 3_600_000, now: h.clock.now, log: createMemoryLogger() });
  expect(await cp.tick()).toBeDefined();
  await cp.stop();
}

const exportOf = (vault: string, query = "", token = owner) => h.call("GET", `/v1/vaults/${vault}/audit/export${query}`, { token });
const verifyOf = (vault: string, token = owner) => h.call("GET", `/v1/vaults/${vault}/audit/verify`, { token });

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "main");
  await createVault(h, owner, "other");
  vaults = { main: (await h.store.vaults.byName("main"))!.id, other: (await h.store.vaults.byName("other"))!.id };
});

describe("GET /v1/vaults/{vault}/audit/export", () => {
  test("the vault's chain in seq order, page by page, with anchor, head and names; verifiable as it is", async () => {
    await write({ main: 7, other: 3 });
    const first = await exportOf("main", "?limit=3");
    expect(first.status).toBe(200);
    const chain = (await h.store.auditChains.get(vaults.main!))!;
    expect(first.body).toMatchObject({
      vault: "main",
      vault_id: vaults.main,
      anchor: { seq: 0, hash: "0".repeat(64) },
      head: { seq: 7, hash: chain.headHash },
      next_after_seq: 3,
      principal_names: { "user:1": "owner@example.com" },
      unchained: { before_chain: 0, after_chain: [] },
    });
    const records: ExportedAuditRecord[] = [...first.body.records];
    expect(records.map((r) => r.seq)).toEqual([1, 2, 3]);
    expect(Object.keys(records[0]!)).toEqual([
      "id",
      "seq",
      "prev",
      "hash",
      "at",
      "principal",
      "vault",
      "ingress",
      "method",
      "host",
      "path",
      "service",
      "credential_keys",
      "credential_refs",
      "status",
      "bytes_in",
      "bytes_out",
      "duration_ms",
      "error",
      "contained",
      "approved_by",
      "llm_model",
      "input_tokens",
      "output_tokens",
      "total_tokens",
      "cost_micros",
      "workload_issuer",
      "workload_subject",
    ]);
    expect(records[0]).toMatchObject({
      principal: "user:1",
      vault: "main",
      credential_keys: "API_KEY",
      credential_refs: null,
      contained: false,
      prev: "0".repeat(64),
    });
    let after = first.body.next_after_seq as number | null;
    while (after !== null) {
      const page = await exportOf("main", `?limit=3&after_seq=${after}`);
      expect(page.body.unchained).toBeNull(); // the first page's only
      records.push(...page.body.records);
      after = page.body.next_after_seq;
    }
    expect(records.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const v = await verifyAuditChain({ vaultId: vaults.main!, anchor: first.body.anchor, head: first.body.head, records });
    expect(v).toMatchObject({ ok: true, records: 7, verified: { seq: 7 } });
    // Another vault's chain is its own.
    expect((await exportOf("other")).body.records.map((r: ExportedAuditRecord) => [r.seq, r.vault])).toEqual([
      [1, "other"],
      [2, "other"],
      [3, "other"],
    ]);
  });

  test("an empty vault: genesis anchor and head, no records", async () => {
    const res = await exportOf("main");
    expect(res.body).toMatchObject({ anchor: { seq: 0 }, head: { seq: 0 }, records: [], next_after_seq: null });
  });

  test("records sharing a seq (an insertion) are never split between pages, and come in id order", async () => {
    await write({ main: 4 });
    await h.store.db.run(
      `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash)
       SELECT at, principal, vault_id, vault, ingress, method, host, '/forged', service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash FROM audit_logs WHERE vault_id = ? AND chain_seq = 2`,
      [vaults.main!],
    );
    const first = await exportOf("main", "?limit=2");
    expect(first.body.records.map((r: ExportedAuditRecord) => [r.seq, r.path])).toEqual([
      [1, "/v1/things/0"],
      [2, "/v1/things/1"],
      [2, "/forged"],
    ]);
    expect(first.body.next_after_seq).toBe(2);
    const v = await verifyAuditChain({
      vaultId: vaults.main!,
      anchor: first.body.anchor,
      records: [...first.body.records, ...(await exportOf("main", "?after_seq=2")).body.records],
    });
    expect(v.breaks.map((b) => [b.kind, b.seq])).toEqual([["inserted", 2]]);
  });

  test("after retention the anchor is the last removed record, and the rest still verifies", async () => {
    await write({ main: 6 });
    const ids = (await exportOf("main")).body.records.map((r: ExportedAuditRecord) => r.id);
    await h.store.transaction((tx) => tx.audit.deletePrunable(ids[0], ids[1], ids[1], 0));
    const res = await exportOf("main");
    expect(res.body.anchor.seq).toBe(2);
    expect(res.body.records[0].prev).toBe(res.body.anchor.hash);
    expect((await verifyAuditChain({ vaultId: vaults.main!, anchor: res.body.anchor, head: res.body.head, records: res.body.records })).ok).toBe(true);
    expect((await verifyOf("main")).body).toMatchObject({ ok: true, records: 4, anchor: { seq: 2 } });
  });

  test("limit 1 to 5000; after_seq a non-negative integer", async () => {
    for (const q of ["limit=0", "limit=5001", "limit=x", "after_seq=-1", "after_seq=1.5"]) {
      const bad = await exportOf("main", `?${q}`);
      expect({ q, status: bad.status }).toEqual({ q, status: 400 });
    }
    expect((await exportOf("main", "?limit=5000")).status).toBe(200);
  });

  test("the readers of the vault's logs and nobody else (export and verify alike)", async () => {
    await write({ main: 1 });
    const member = await addUser(h, owner, "main", "member@example.com", "member");
    const proxy = await addUser(h, owner, "main", "proxy@example.com", "proxy");
    const outsider = (await register(h, "outsider@example.com")).token;
    const agentMember = await addAgent(h, owner, "main", "member", "reader-bot");
    const agentProxy = await addAgent(h, owner, "main", "proxy", "proxy-bot");
    const scoped = (await mintScoped(h, { token: owner }, "main", { role: "member" })).body.token as string;
    const cases: [string, string | undefined, Record<string, string> | undefined, number][] = [
      ["owner", owner, undefined, 200],
      ["member", member, undefined, 200],
      ["proxy", proxy, undefined, 403],
      ["outsider", outsider, undefined, 404],
      ["agent member", agentMember.token, agentMember.headers, 200],
      ["agent proxy", agentProxy.token, agentProxy.headers, 403],
      ["scoped member", scoped, undefined, 200],
      ["nobody", undefined, undefined, 401],
    ];
    for (const what of ["export", "verify"]) {
      for (const [who, token, headers, status] of cases) {
        const res = await h.call("GET", `/v1/vaults/main/audit/${what}`, { ...(token && { token }), ...(headers && { headers }) });
        expect({ what, who, status: res.status }).toEqual({ what, who, status });
      }
    }
  });
});

describe("GET /v1/vaults/{vault}/audit/verify", () => {
  test("an intact chain with its checkpoints: verified up to its last record", async () => {
    await write({ main: 5, other: 2 });
    await checkpoint();
    await write({ main: 2 });
    const res = await verifyOf("main");
    expect(res.status).toBe(200);
    const last = (await exportOf("main")).body.records.at(-1) as ExportedAuditRecord;
    expect(res.body).toMatchObject({
      vault: "main",
      ok: true,
      records: 7,
      verified: { seq: 7, id: last.id, at: last.at, time: new Date(last.at).toISOString(), hash: last.hash },
      checkpoints: { checked: 1, unchecked: 0 },
      breaks: [],
      head: { seq: 7 },
      unchained_before_chain: 0,
    });
  });

  test("kept while the head stays; new records are verified from the last verified one; every 10 minutes all again", async () => {
    await write({ main: 5 });
    expect((await verifyOf("main")).body).toMatchObject({ ok: true, records: 5 });
    // An edit that moves no head is not seen by the kept result…
    await h.store.db.run("UPDATE audit_logs SET status = 500 WHERE vault_id = ? AND chain_seq = 2", [vaults.main!]);
    const kept = await verifyOf("main");
    expect(kept.body.ok).toBe(true);
    // …nor by the run over the new records alone…
    await write({ main: 2 });
    expect((await verifyOf("main")).body).toMatchObject({ ok: true, records: 7, verified: { seq: 7 } });
    // …but by the whole run, at most 10 minutes later.
    h.clock.advance(10 * 60_000);
    const again = await verifyOf("main");
    expect(again.body.ok).toBe(false);
    expect(again.body.verified).toBeNull();
    expect(again.body.breaks[0]).toMatchObject({ kind: "edited", seq: 2 });
    expect(again.body.breaks[0].message).toMatch(/^record seq 2 \(id \d+\): edited — its hash does not match its contents$/);
  });

  test("names what was done in the database: a deleted row, a row without chain fields, the tail after a checkpoint", async () => {
    await write({ main: 6 });
    await h.store.db.run("DELETE FROM audit_logs WHERE vault_id = ? AND chain_seq = 3", [vaults.main!]);
    let res = await verifyOf("main");
    expect(res.body.breaks.map((b: { kind: string; seq: number }) => [b.kind, b.seq])).toEqual([["missing", 3]]);

    await createVault(h, owner, "third");
    vaults.third = (await h.store.vaults.byName("third"))!.id;
    await write({ third: 4 });
    await h.store.db.run(
      `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, contained)
       VALUES (?, 'user:1', ?, 'third', 'explicit', 'GET', 'api.example.com', '/forged', NULL, '', 200, 0, 0, 1, 0)`,
      [h.clock.now(), vaults.third!],
    );
    res = await verifyOf("third");
    expect(res.body.breaks.map((b: { kind: string; seq: number }) => [b.kind, b.seq])).toEqual([["inserted", 5]]);
    expect(res.body.breaks[0].message).toMatch(
      /^record id \d+: inserted — it has no seq, prev or hash, but was written after the chain began \(after seq 4\)$/,
    );

    await createVault(h, owner, "fourth");
    vaults.fourth = (await h.store.vaults.byName("fourth"))!.id;
    await write({ fourth: 10 });
    await checkpoint();
    // The editor removes the last 3 and moves the head back to what is left.
    const kept = (await h.store.audit.chained(vaults.fourth!, 0, 7)).at(-1)!;
    await h.store.db.run("DELETE FROM audit_logs WHERE vault_id = ? AND chain_seq > 7", [vaults.fourth!]);
    await h.store.db.run("UPDATE audit_chains SET head_seq = 7, head_hash = ? WHERE vault_id = ?", [kept.chainHash!, vaults.fourth!]);
    res = await verifyOf("fourth");
    expect(res.body.breaks.map((b: { kind: string; seq: number }) => [b.kind, b.seq])).toEqual([["truncated", 8]]);
    expect(res.body.breaks[0].message).toMatch(
      /^records seq 8 to 10: missing — removed after checkpoint \d+ \(.+\), which signed seq 10 \(the chain ends at record seq 7/,
    );
  });
});

describe("the console's Logs page", () => {
  test("says up to when the log is verified, or where its chain breaks", async () => {
    const app = createApi({ domain: h.domain, log: createMemoryLogger() });
    const b = createBrowser(app, { session: owner });
    let page = await b.get("/vaults/main/logs");
    expect(page.status).toBe(200);
    expect(page.text).toContain('id="chain-status"');
    expect(page.text).toContain("Nothing to verify yet");
    await write({ main: 3 });
    await checkpoint();
    const last = (await h.store.audit.chained(vaults.main!, 0, 10)).at(-1)!;
    page = await b.get("/vaults/main/logs");
    expect(page.text).toContain(`Verified up to <time datetime="${new Date(last.at).toISOString()}">`);
    expect(page.text).toContain("(record 3, 3 records); 1 signed checkpoint checked.");
    await h.store.db.run("DELETE FROM audit_logs WHERE vault_id = ? AND chain_seq = 2", [vaults.main!]);
    await write({ main: 1 }); // the head moves: verified again (incrementally: the gap is before the last verified record)…
    h.clock.advance(10 * 60_000); // …and in full once the kept result is old
    page = await b.get("/vaults/main/logs");
    expect(page.text).toContain("Chain broken");
    expect(page.text).toMatch(/record seq 2: missing — deleted; seq 1 \(id \d+\) is followed by record seq 3/);
  });
});
