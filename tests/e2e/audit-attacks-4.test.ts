// Attacks on the audit chain, round 4: retention's checkpoint mark and anchors, the checkpointer's walk, the
// 'unsigned' history, unchained rows, honest load at small caps over several vaults. The attacker has write access
// to the database (not the data key or the signing key), or is an agent sending requests. Each test is a defence
// that holds; a comment says which hole this round found and what closed it.

import { describe, expect, test } from "bun:test";
import { signableHead } from "../../src/app/audit-checkpointer.ts";
import { createHeadHistory } from "../../src/app/audit-head-history.ts";
import { createAuditLog, type AuditEntry } from "../../src/egress/index.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { AUDIT_CHAIN_GENESIS } from "../../src/store/index.ts";
import { brokerVerify, checkpointed, exportVerify, headSeq, rewriteFrom, rows, send, until, useAuditLabs, type AuditLab } from "./audit-lab.ts";
import { startBroker } from "./proxy-fixture.ts";

const EVERY = 20;
const DAY = 86_400_000;

const { lab, upstream, cleanups } = useAuditLabs({ every: EVERY });

const ROW_COLUMNS =
  "(id, at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash)";

async function lowestId(l: AuditLab): Promise<number> {
  return Number((await l.store.db.get<{ id: number }>("SELECT MIN(id) AS id FROM audit_logs"))!.id);
}
async function highestId(l: AuditLab): Promise<number> {
  return Number((await l.store.db.get<{ id: number }>("SELECT MAX(id) AS id FROM audit_logs"))!.id);
}

/** A second vault in the lab's broker with the same bearer service, and a proxy session for it. */
async function secondVault(l: AuditLab, name: string): Promise<{ lab: AuditLab; proxy: (path: string) => Promise<Response> }> {
  const b = l.broker;
  const must = async (method: string, path: string, body: unknown, status: number) => {
    const r = await b.api(method, path, body, b.userToken);
    if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  await must("POST", "/v1/vaults", { name }, 201);
  await must("PUT", `/v1/vaults/${name}/credentials/API_KEY`, { value: `sk-${crypto.randomUUID()}` }, 200);
  await must("POST", `/v1/vaults/${name}/services`, { host: l.hp, auth: { type: "bearer", token: "API_KEY" } }, 201);
  const token = (await must("POST", "/v1/sessions", { vault: name, role: "proxy" }, 201)).token as string;
  const page = await must("GET", `/v1/vaults/${name}/audit/export?limit=1`, undefined, 200);
  return {
    lab: { broker: b, store: l.store, vault: name, vaultId: page.vault_id, hp: l.hp },
    proxy: (path) => fetch(`${b.apiUrl}/proxy/${l.hp}${path}`, { headers: { authorization: `Bearer ${token}` } }),
  };
}

describe("retention's wait for checkpoints", () => {
  // Found (medium): retention waits for a checkpoint before removing records none signs yet, and the checkpointer
  // signs only heads that moved, so two rows (a chain row for a vault id no vault has, and one record of it below the
  // lowest id) stopped retention for ever, silently. Closed: batches say when they wait (`waiting`), and the retention
  // loop waits no longer than twice the checkpoint interval and a grace (app/audit-retention.ts waitLimitMs): then
  // a batch removes them too (checked as ever) and `audit_retention_unsigned_removal` is logged.
  test("a fake chain of a vault id no vault has makes retention wait, then no longer than the limit", async () => {
    const l = await lab();
    await send(l, 2 * EVERY);
    await checkpointed(l, 2 * EVERY);
    const ghost = l.vaultId + 1000;
    await l.store.db.run(`INSERT INTO audit_chains (vault_id, head_seq, head_hash, anchor_seq, anchor_hash) VALUES (?, 0, ?, 0, ?)`, [
      ghost,
      AUDIT_CHAIN_GENESIS,
      AUDIT_CHAIN_GENESIS,
    ]);
    await l.store.db.run(
      `INSERT INTO audit_logs ${ROW_COLUMNS} VALUES (?, 0, 'agent:1', ?, 'x', 'explicit', 'GET', 'h', '/', NULL, '', NULL, 200, 0, 0, 0, NULL, 0, NULL, 1, ?, ?)`,
      [(await lowestId(l)) - 1, ghost, AUDIT_CHAIN_GENESIS, "f".repeat(64)],
    );
    const waiting = await l.broker.server.pruneAudit({ olderThan: Date.now() + DAY, keepRows: 5 }, 1000);
    expect({ removed: waiting.removed, waiting: waiting.waiting, more: waiting.more }).toEqual({ removed: 0, waiting: true, more: false });
    // What the loop does once it has waited longer than the limit.
    const after = await l.broker.server.pruneAudit({ olderThan: Date.now() + DAY, keepRows: 5, waitForCheckpoints: false }, 1000);
    expect(after.removed).toBeGreaterThan(2 * EVERY - 5);
    expect(after.unsignedAnchors).toEqual([{ vaultId: ghost, seq: 1, reason: expect.stringMatching(/: its hash does not match its contents$/) }]);
    expect((await l.store.auditChains.get(l.vaultId))!.anchorSignature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect((await brokerVerify(l)).ok).toBe(true);
    expect((await exportVerify(l)).ok).toBe(true);
  }, 120_000);

  // Holds: the mark raised by the attacker (audit_chains.checkpoint_seq) lets retention reach records no checkpoint
  // signed, but it still walks them from the signed anchor against every stored checkpoint: a rewrite below a
  // checkpoint gets an unsigned anchor, and both verifications name it.
  test("a raised checkpoint mark does not get a rewrite below a checkpoint signed by retention", async () => {
    const l = await lab();
    await send(l, 2 * EVERY);
    await checkpointed(l, 2 * EVERY);
    await send(l, 5);
    await rewriteFrom(l, 10, { status: 500, path: "/innocent" });
    await l.store.db.run("UPDATE audit_chains SET checkpoint_seq = 1000000000 WHERE vault_id = ?", [l.vaultId]);
    const batch = await l.broker.server.pruneAudit({ olderThan: Date.now() + DAY, keepRows: 2 }, 1000);
    expect(batch.unsignedAnchors?.[0]).toMatchObject({ vaultId: l.vaultId });
    expect((await l.store.auditChains.get(l.vaultId))!.anchorSignature).toBeNull();
    expect((await brokerVerify(l)).breaks[0]?.kind).toBe("anchor");
    expect((await exportVerify(l)).breaks[0]?.kind).toBe("anchor");
  }, 120_000);
});

describe("the anchor's hash is the one retention checked", () => {
  // Found (low): retention checked the records it removed but signed the hash HASH_AT read apart (no ORDER BY), which a
  // second row claiming the last removed seq could supply. Closed: it signs the hash its check reached.
  test("a second row at the last removed seq, read first by the index, does not get its hash signed", async () => {
    const l = await lab();
    await send(l, 2 * EVERY);
    await checkpointed(l, 2 * EVERY);
    const at20 = (await rows(l)).find((r) => r.chainSeq === EVERY)!;
    await l.store.db.run("DROP INDEX audit_logs_vault_chain");
    await l.store.db.run("CREATE INDEX audit_logs_vault_chain ON audit_logs (vault_id, chain_seq, id DESC)");
    const fakeId = (await highestId(l)) + 1;
    const fake = "f".repeat(64);
    await l.store.db.run(
      `INSERT INTO audit_logs ${ROW_COLUMNS} VALUES (?, ?, 'agent:1', ?, 'x', 'explicit', 'GET', 'h', '/', NULL, '', NULL, 200, 0, 0, 0, NULL, 0, NULL, ?, ?, ?)`,
      [fakeId, Date.now(), l.vaultId, EVERY, at20.chainPrev!, fake],
    );
    const batch = await l.broker.server.pruneAudit({ olderThan: 0, keepRows: fakeId - at20.id }, 1000);
    const a = (await l.store.auditChains.get(l.vaultId))!;
    expect({ removed: batch.removed, unsigned: batch.unsignedAnchors ?? [] }).toEqual({ removed: EVERY, unsigned: [] });
    expect({ seq: a.anchorSeq, hash: a.anchorHash, signed: a.anchorSignature !== null }).toEqual({ seq: EVERY, hash: at20.chainHash!, signed: true });
    // The fake row is kept at the anchor, and named.
    expect((await exportVerify(l)).breaks[0]).toMatchObject({ kind: "anchor", seq: EVERY });
  }, 120_000);
});

describe("unchained rows below the chain", () => {
  // Found (medium): a record without chain fields counted as "written before the chain began" when its id was below
  // the vault's lowest chained record, and the attacker picks the id. Closed: migration 25 notes the highest id written
  // before the chain began (none on a broker installed since), and every unchained record above it is `inserted`.
  test("a fake record without chain fields, below the first chained id or at an id retention freed, is named 'inserted'", async () => {
    const l = await lab();
    await send(l, EVERY);
    await checkpointed(l, EVERY);
    await l.store.db.run(
      `INSERT INTO audit_logs ${ROW_COLUMNS} VALUES (?, ?, 'agent:1', ?, ?, 'explicit', 'GET', ?, '/exfiltrate-nothing-to-see', ?, 'API_KEY', NULL, 200, 0, 99999, 5, NULL, 0, NULL, NULL, NULL, NULL)`,
      [(await lowestId(l)) - 1, Date.now() - 60_000, l.vaultId, l.vault, l.hp, l.hp],
    );
    const own = await brokerVerify(l);
    const cli = await exportVerify(l);
    expect({
      own: own.breaks[0]?.kind,
      cli: cli.breaks[0]?.kind,
      before: (own as unknown as { unchained_before_chain: number }).unchained_before_chain,
    }).toEqual({
      own: "inserted",
      cli: "inserted",
      before: 0,
    });
    // After retention moved the anchor, an id it freed serves the same.
    await l.broker.server.pruneAudit({ olderThan: 0, keepRows: 5 }, 1000);
    const anchor = (await l.store.auditChains.get(l.vaultId))!;
    expect(anchor.anchorSeq).toBeGreaterThan(0);
    await l.store.db.run(
      `INSERT INTO audit_logs ${ROW_COLUMNS} VALUES (?, ?, 'agent:1', ?, ?, 'explicit', 'DELETE', ?, '/after-retention', ?, 'API_KEY', NULL, 200, 0, 0, 5, NULL, 0, NULL, NULL, NULL, NULL)`,
      [(await lowestId(l)) - 1, Date.now(), l.vaultId, l.vault, l.hp, l.hp],
    );
    const logs = await l.broker.auditLogs();
    expect(logs.some((r: { path: string }) => r.path === "/after-retention")).toBe(true); // listed like any record
    expect((await brokerVerify(l)).breaks.map((b) => b.kind)).toContain("inserted");
    expect((await exportVerify(l)).breaks.map((b) => b.kind)).toContain("inserted");
  }, 120_000);
});

describe("the checkpointer's walk", () => {
  // Found (high for availability; honest operation): the checkpointer walked at most 50,000 records from the last
  // point signed and refused a head further on for ever (its start never moved), so retention stopped and the records
  // became 'unsigned'. Closed: a look walks at most 10,000 records and signs the point reached; the next look goes on
  // at once until the head is signed.
  test("60,000 honest records between checkpoints are signed in steps, none refused; one look's cost is bounded", async () => {
    const l = await lab({ env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "60000" } });
    await send(l, 3);
    const writer = createAuditLog(l.store, { now: Date.now, log: createMemoryLogger("error"), maxBatch: 2000, maxQueued: 200_000 });
    const now = Date.now();
    const entry: AuditEntry = {
      at: now,
      principal: "agent:1",
      vaultId: l.vaultId,
      vault: l.vault,
      ingress: "explicit",
      method: "GET",
      host: l.hp,
      path: "/bulk",
      service: l.hp,
      credentialKeys: "API_KEY",
      credentialRefs: null,
      status: 200,
      bytesIn: 0,
      bytesOut: 2,
      durationMs: 1,
      error: null,
      contained: false,
      approvedBy: null,
    };
    for (let i = 0; i < 60_000; i++) writer.record({ ...entry, path: `/bulk/${i}` });
    await writer.flush();
    await writer.stop();
    expect(await headSeq(l)).toBe(60_003);
    await checkpointed(l, 60_003);
    expect(l.broker.logLines.filter((line) => line.includes("audit_head_unsigned"))).toEqual([]);
    const steps = await l.store.auditCheckpoints.listForVault(l.vaultId, 0, 100);
    expect(steps.length).toBeGreaterThanOrEqual(6);
    expect((await brokerVerify(l)).ok).toBe(true);
    // What one look costs on the event loop (it runs inside the checkpoint's transaction): at most 10,000 records,
    // here from the chain's start (a key that signed none of the stored checkpoints).
    const key = { keyId: "0000000000000000", pkcs8: new Uint8Array() };
    const read = (q: string, p: readonly unknown[]) => l.store.db.all(q, [...(p as never[])]) as Promise<Record<string, unknown>[]>;
    const head = (await l.store.auditChains.get(l.vaultId))!;
    const t0 = performance.now();
    const r = await signableHead(read, key, { vaultId: l.vaultId, seq: head.headSeq, hash: head.headHash, checkpointSeq: 0 }, undefined);
    console.log(`one look from the chain's start: ${(performance.now() - t0).toFixed(0)} ms (${"sign" in r ? `signs seq ${r.sign.seq}` : r.reason})`);
    expect(r).toMatchObject({ sign: { seq: 10_000 } });
  }, 120_000);
});

describe("the checkpointer's starting point", () => {
  // Found (low): the checkpointer read only the newest stored checkpoint and dropped it when forged, so one forged row
  // sent the walk back to the chain's start (after a restart). Closed: it takes the newest of the last 20 whose
  // signature holds.
  test("a forged newest checkpoint row does not send the walk back to the chain's start", async () => {
    const l = await lab();
    await send(l, EVERY);
    await checkpointed(l, EVERY);
    await send(l, EVERY);
    await checkpointed(l, 2 * EVERY); // its look checked checkpoint 20's signature in this thread
    await send(l, 5);
    const head = (await l.store.auditChains.get(l.vaultId))!;
    const read = (q: string, p: readonly unknown[]) => l.store.db.all(q, [...(p as never[])]) as Promise<Record<string, unknown>[]>;
    // The real key id; its key objects are already imported in this thread (the broker's checkpointer checked stored
    // checkpoints with them), so the private half is not needed here: anchorKeyObjects caches by key id.
    const key = { keyId: (await l.store.auditCheckpoints.signingKey())!.keyId, pkcs8: new Uint8Array() };
    const moved = { vaultId: l.vaultId, seq: head.headSeq, hash: head.headHash, checkpointSeq: 2 * EVERY };
    await l.store.db.run("UPDATE audit_logs SET status = 599 WHERE vault_id = ? AND chain_seq = 3", [l.vaultId]);
    // Without memory (after a restart): from checkpoint 40, records 41..45 lead to the head.
    expect(await signableHead(read, key, moved, undefined)).toEqual({ sign: { seq: head.headSeq, hash: head.headHash } });
    await l.store.db.run("INSERT INTO audit_checkpoints (id, at, key_id, heads, signature) VALUES (1000000, ?, ?, ?, ?)", [
      Date.now(),
      key.keyId,
      JSON.stringify([[l.vaultId, head.headSeq, head.headHash]]),
      "A".repeat(86),
    ]);
    await l.store.db.run("INSERT INTO audit_checkpoint_vaults (vault_id, checkpoint_id, seq, hash) VALUES (?, 1000000, ?, ?)", [
      l.vaultId,
      head.headSeq,
      head.headHash,
    ]);
    // One forged row later, checkpoint 40 (still stored, still valid) is where the walk starts: record 3 is not read.
    expect(await signableHead(read, key, moved, undefined)).toEqual({ sign: { seq: head.headSeq, hash: head.headHash } });
  }, 120_000);
});

describe("'unsigned' in honest operation: the head history's sample spacing", () => {
  // Found (medium, false alarm): the head history folded a seq seen later into an older sample under its older time,
  // so with intervals above ~640 s honest records were 'unsigned' before their checkpoint was due; and the broker's
  // verify cache kept that view after the checkpoint came. Closed: a sample is dated by its latest observation, and
  // the cache is keyed by the vault's newest checkpoint too.
  test("with an 1800 s interval an honest record is not 'unsigned' before its checkpoint is due", async () => {
    const T = 1800_000;
    let clock = Date.now();
    const up = upstream();
    const broker = await startBroker({
      caPem: up.pki.caPem,
      now: () => clock,
      env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "1000000", BROKER_AUDIT_CHECKPOINT_SECONDS: String(T / 1000) },
    });
    cleanups.push(() => broker.stop());
    broker.dns.set("upstream.test", ["127.0.0.1"]);
    const hp = `upstream.test:${up.port}`;
    await broker.setCredential("API_KEY", `sk-${crypto.randomUUID()}`);
    await broker.addService(hp, { type: "bearer", token: "API_KEY" });
    const page = await broker.api("GET", `/v1/vaults/${broker.vault}/audit/export?limit=1`, undefined, broker.userToken);
    const l: AuditLab = { broker, store: broker.server.store, vault: broker.vault, vaultId: page.body.vault_id, hp };
    const started = clock;
    clock = started + T - 20_000; // a record 20 s before the first checkpoint is due (the sample begins here)
    await send(l, 1);
    clock = started + T; // the checkpoint (due: an interval since the checkpointer started)
    await checkpointed(l, 1);
    const C = clock;
    clock = C + 5_000; // a record 5 s after it: written into the sample of T-20 s
    await send(l, 1);
    clock = C - 20_000 + T + 11_000; // past that sample + interval + 10 s, before the next checkpoint (C + T)
    const own = await brokerVerify(l);
    const cli = await exportVerify(l);
    expect({ own: own.breaks.map((b) => b.kind), cli: cli.breaks.map((b) => b.kind) }).toEqual({ own: [], cli: [] });
    clock = C + T + 1; // the checkpoint that signs it was not late
    await checkpointed(l, 2);
    expect((await exportVerify(l)).ok).toBe(true);
    expect((await brokerVerify(l)).breaks.map((b) => b.kind)).toEqual([]);
  }, 120_000);

  // Found (low): samples were dropped only when a vault was verified, so the history grew with uptime. Closed: they
  // are dropped as they come.
  test("a million observations, never read, keep only a few samples", () => {
    const h = createHeadHistory({ everyMs: 1000, graceMs: 10_000 });
    Bun.gc(true);
    const before = process.memoryUsage().heapUsed;
    for (let i = 1; i <= 1_000_000; i++) h.observe(1, i, i * 1000);
    Bun.gc(true);
    const grown = process.memoryUsage().heapUsed - before;
    expect(grown).toBeLessThan(2_000_000); // ~11.6 days of one vault at one request a second: a handful of samples
    expect(h.signedThrough(1, 1_000_000_000)).toBe(999_989);
  });
});

describe("honest load: retention at a small cap, checkpoints every 50 records, two vaults", () => {
  // Holds: concurrent requests in two vaults, a retention batch (keep 100 rows, 50 a batch) every 15 ms and
  // verifications (the broker's and the CLI's, both vaults) while it all runs: no break, no unsigned anchor or head.
  test("no false alarm under concurrent load with retention and checkpoints", async () => {
    const l = await lab({ env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "50" } });
    const v2 = await secondVault(l, "second");
    let running = true;
    const found: string[] = [];
    const pruner = (async () => {
      let removed = 0;
      while (running) {
        const b = await l.broker.server.pruneAudit({ olderThan: 0, keepRows: 100 }, 50);
        removed += b.removed;
        if (b.unsignedAnchors?.length) found.push(`unsigned anchor ${JSON.stringify(b.unsignedAnchors)}`);
        await Bun.sleep(15);
      }
      return removed;
    })();
    const checker = (async () => {
      while (running) {
        for (const x of [l, v2.lab]) {
          const own = await brokerVerify(x);
          const cli = await exportVerify(x);
          for (const b of [...own.breaks, ...cli.breaks]) found.push(`${x.vault}: ${b.kind}: ${b.message}`);
        }
        await Bun.sleep(100);
      }
    })();
    const load = async (proxy: (p: string) => Promise<Response>, tag: string) => {
      for (let i = 0; i < 60; i++) {
        await Bun.sleep(100);
        const batch = await Promise.all(
          Array.from({ length: 8 }, async (_, j) => {
            const r = await proxy(`/${tag}/${i}/${j}`);
            await r.arrayBuffer();
            return r.status;
          }),
        );
        expect(batch.every((s) => s === 200)).toBe(true);
      }
    };
    await Promise.all([load((p) => l.broker.proxy(l.hp, p), "a"), load(v2.proxy, "b"), load((p) => l.broker.proxy(l.hp, p), "c")]);
    await until("both vaults written", async () => (await headSeq(l)) >= 960 && (await headSeq(v2.lab)) >= 480);
    await checkpointed(l, await headSeq(l));
    await checkpointed(v2.lab, await headSeq(v2.lab));
    await Bun.sleep(500); // a few more retention batches over what is now signed
    running = false;
    const removed = await pruner;
    await checker;
    for (const x of [l, v2.lab]) {
      const own = await brokerVerify(x);
      const cli = await exportVerify(x);
      for (const b of [...own.breaks, ...cli.breaks]) found.push(`after, ${x.vault}: ${b.kind}: ${b.message}`);
    }
    expect(removed).toBeGreaterThan(1000);
    expect(found).toEqual([]);
    expect(l.broker.logLines.filter((line) => /audit_(anchor|head)_unsigned|audit_checkpoint_failed|audit_retention_failed/.test(line))).toEqual([]);
  }, 120_000);
});
