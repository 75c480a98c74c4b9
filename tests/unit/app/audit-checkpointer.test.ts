// The audit checkpointer (docs/audit-chain.md, Checkpoints): a checkpoint once N records were written since the
// last one (counted from the chains' heads, whoever wrote them), or once T has passed with a head moved; none
// while nothing is written; each signs exactly the heads that moved, as the chains hold them, and verifies with
// the public key (node:crypto); a last one at shutdown; old ones go with retention; on PostgreSQL an instance
// finding another's turn under way does nothing. Records are written by the real audit writer.

import { describe, expect, test } from "bun:test";
import { verify as nodeVerify } from "node:crypto";
import {
  announceCheckpoint,
  createCheckpointMemory,
  recordsSince,
  startAuditCheckpointer,
  type AuditCheckpointer,
  type CheckpointMemory,
} from "../../../src/app/audit-checkpointer.ts";
import { auditRecordHash, checkpointMessage, loadAuditSigningKey, unlockKeyring, verifyCheckpoint, type AuditSigner } from "../../../src/crypto/index.ts";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import type { BrokerEvent } from "../../../src/identity/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { CHECKPOINT_LOCK, openMemoryStore, takeCheckpointTurn, type AuditCheckpointRow, type Store } from "../../../src/store/index.ts";
import { createClock, type Clock } from "../../helpers/api.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const SECOND = 1000;

function entry(vaultId: number, at: number): AuditEntry {
  return {
    at,
    principal: "agent:1",
    vaultId,
    vault: `v${vaultId}`,
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
  };
}

interface World {
  store: Store;
  clock: Clock;
  signer: AuditSigner;
  write(vaultId: number, n: number): Promise<void>;
  checkpointer(over?: { everyRecords?: number; everyMs?: number; pollMs?: number; keepMs?: number }): AuditCheckpointer;
  made: AuditCheckpointRow[];
}

async function world(store?: Store): Promise<World> {
  const s = store ?? (await openMemoryStore());
  const clock = createClock();
  const { dataKey } = await unlockKeyring(s, undefined, { now: clock.now });
  const { signer } = await loadAuditSigningKey(s, dataKey, clock.now());
  const audit = createAuditLog(s, { now: clock.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  const made: AuditCheckpointRow[] = [];
  const running: AuditCheckpointer[] = [];
  return {
    store: s,
    clock,
    signer,
    made,
    async write(vaultId, n) {
      for (let i = 0; i < n; i++) audit.record(entry(vaultId, clock.now()));
      await audit.flush();
    },
    checkpointer(over = {}) {
      const c = startAuditCheckpointer(s, {
        signer,
        everyRecords: over.everyRecords ?? 1000,
        everyMs: over.everyMs ?? 300 * SECOND,
        pollMs: over.pollMs ?? 3_600_000, // the loop stays out of the way: tests call tick()
        ...(over.keepMs !== undefined && { keepMs: over.keepMs }),
        now: clock.now,
        log: createMemoryLogger(),
        onCheckpoint: (c) => made.push(c),
      });
      running.push(c);
      return c;
    },
  };
}

/** The chain's head of each vault, as the writer left it. */
async function heads(store: Store): Promise<{ vaultId: number; seq: number; hash: string }[]> {
  return (await store.auditChains.list()).map((c) => ({ vaultId: c.vaultId, seq: c.headSeq, hash: c.headHash }));
}

function independentlyVerified(pem: string, c: AuditCheckpointRow): boolean {
  return nodeVerify(null, Buffer.from(checkpointMessage(c)), pem, Buffer.from(c.signature, "base64url"));
}

describe("when a checkpoint is made", () => {
  test("after N records (any vaults, counted since the last checkpoint), not before", async () => {
    const w = await world();
    const cp = w.checkpointer({ everyRecords: 5 });
    await w.write(1, 3);
    await w.write(2, 1);
    expect(await cp.tick()).toBeUndefined(); // 4 records
    await w.write(2, 1);
    const first = await cp.tick(); // 5
    expect(first).toBeDefined();
    expect(first!.heads).toEqual(await heads(w.store));
    expect(first!.heads.map((h) => [h.vaultId, h.seq])).toEqual([
      [1, 3],
      [2, 2],
    ]);
    // Counting starts again from the checkpoint: 4 more are not enough, the 5th is.
    await w.write(1, 4);
    expect(await cp.tick()).toBeUndefined();
    await w.write(3, 1);
    const second = await cp.tick();
    // Only the vaults that moved are signed again, at their new heads.
    expect(second!.heads.map((h) => [h.vaultId, h.seq])).toEqual([
      [1, 7],
      [3, 1],
    ]);
    expect(second!.id).toBeGreaterThan(first!.id);
    for (const c of [first!, second!]) {
      expect(independentlyVerified(w.signer.publicKeyPem, c)).toBe(true);
      expect(await verifyCheckpoint(w.signer.publicKeyPem, c)).toBe(true);
    }
    expect(w.made.map((c) => c.id)).toEqual([first!.id, second!.id]);
    await cp.stop();
  });

  test("after T with a head moved; the time counts from the last checkpoint (or the start before the first)", async () => {
    const w = await world();
    const cp = w.checkpointer({ everyMs: 300 * SECOND });
    await w.write(1, 1);
    expect(await cp.tick()).toBeUndefined();
    w.clock.advance(299 * SECOND);
    expect(await cp.tick()).toBeUndefined();
    w.clock.advance(SECOND);
    const first = await cp.tick();
    expect(first?.heads).toEqual(await heads(w.store));
    expect(first?.at).toBe(w.clock.now());
    await w.write(1, 2);
    w.clock.advance(299 * SECOND);
    expect(await cp.tick()).toBeUndefined();
    w.clock.advance(SECOND);
    expect((await cp.tick())?.heads.map((h) => h.seq)).toEqual([3]);
    await cp.stop();
  });

  test("a head whose records do not follow from what the broker signed is left unsigned, and said so; the others are signed", async () => {
    const w = await world();
    const memory = createCheckpointMemory();
    const log = createMemoryLogger();
    const start = (m?: CheckpointMemory) =>
      startAuditCheckpointer(w.store, {
        signer: w.signer,
        everyRecords: 5,
        everyMs: 300 * SECOND,
        pollMs: 3_600_000,
        now: w.clock.now,
        log,
        ...(m && { memory: m }),
      });
    const cp = start(memory);
    await w.write(1, 5);
    const first = await cp.tick();
    expect(first?.heads.map((h) => [h.vaultId, h.seq])).toEqual([[1, 5]]);
    // Someone with the database rewrites record 3 (and every hash after it, and the head) and deletes the checkpoint.
    let prev = "";
    for (const r of await w.store.audit.chained(1, 0, 100)) {
      const row = r.chainSeq === 3 ? { ...r, status: 500 } : r;
      const p = r.chainSeq! < 3 ? r.chainPrev! : prev;
      const hash = r.chainSeq! < 3 ? r.chainHash! : auditRecordHash({ ...row, vaultId: 1, seq: r.chainSeq!, prev: p });
      await w.store.db.run("UPDATE audit_logs SET status = ?, chain_prev = ?, chain_hash = ? WHERE id = ?", [row.status, p, hash, r.id]);
      prev = hash;
    }
    await w.store.db.run("UPDATE audit_chains SET head_hash = ? WHERE vault_id = 1", [prev]);
    await w.store.db.run("DELETE FROM audit_checkpoints");
    await w.write(1, 5);
    await w.write(2, 5);
    // The next checkpoint signs vault 2, not vault 1's forged head: the memory of checkpoint `first` says so.
    const next = await cp.tick();
    expect(next?.heads.map((h) => h.vaultId)).toEqual([2]);
    expect(log.lines.filter((l) => l.includes("audit_head_unsigned")).map((l) => JSON.parse(l).reason)).toEqual([
      `its records do not follow from what the broker signed: from checkpoint ${first!.id}, which this broker made (seq 5): record seq 6 (id 6) does not link to the record before it`,
    ]);
    // Another instance (no memory) still has the stored checkpoints: with those deleted too, it starts from the chain's start.
    const other = start();
    await w.write(1, 5);
    expect((await other.tick())?.heads.map((h) => h.vaultId)).toEqual([1]); // the rewrite is whole from the genesis: nothing left to tell
    await cp.stop();
    await other.stop();
  });

  test("nothing written: no checkpoint, however long it has been", async () => {
    const w = await world();
    const cp = w.checkpointer({ everyMs: SECOND, everyRecords: 1 });
    for (let i = 0; i < 5; i++) {
      w.clock.advance(3_600 * SECOND);
      expect(await cp.tick()).toBeUndefined();
    }
    await w.write(1, 1);
    expect(await cp.tick()).toBeDefined();
    // And nothing since: none again.
    w.clock.advance(3_600 * SECOND);
    expect(await cp.tick()).toBeUndefined();
    expect(await cp.tick(true)).toBeUndefined(); // not even when forced
    expect((await w.store.auditCheckpoints.list(0, 100)).length).toBe(1);
    await cp.stop();
  });

  test("the loop runs on its own: records written are signed within a poll once due", async () => {
    const w = await world();
    const cp = w.checkpointer({ everyRecords: 3, pollMs: 10 });
    await w.write(1, 3);
    const deadline = Date.now() + 5_000;
    while (w.made.length === 0 && Date.now() < deadline) await Bun.sleep(10);
    expect(w.made.length).toBe(1);
    expect(w.made[0]!.heads).toEqual(await heads(w.store));
    await cp.stop();
  });

  test("graceful shutdown signs whatever moved (stored, not announced); without anything moved it signs nothing", async () => {
    const w = await world();
    const cp = w.checkpointer();
    await w.write(1, 2);
    await cp.stop({ final: true });
    const stored = await w.store.auditCheckpoints.list(0, 10);
    expect(stored.map((c) => c.heads)).toEqual([await heads(w.store)]);
    expect(w.made).toEqual([]); // webhook delivery has stopped by then
    const again = w.checkpointer();
    await again.stop({ final: true });
    expect((await w.store.auditCheckpoints.list(0, 10)).length).toBe(1);
  });

  test("checkpoints older than the retention age go, with their vault rows", async () => {
    const w = await world();
    const cp = w.checkpointer({ everyRecords: 1, keepMs: 10 * SECOND });
    await w.write(1, 1);
    const old = (await cp.tick())!;
    w.clock.advance(11 * SECOND);
    await w.write(1, 1);
    const fresh = (await cp.tick())!;
    expect((await w.store.auditCheckpoints.list(0, 10)).map((c) => c.id)).toEqual([fresh.id]);
    expect((await w.store.auditCheckpoints.listForVault(1, 0, 10)).map((c) => c.id)).toEqual([fresh.id]);
    expect(old.id).toBeLessThan(fresh.id);
    await cp.stop();
  });

  test("recordsSince counts each moved head's records; a head behind its mark (begun again) counts whole", () => {
    expect(
      recordsSince([
        { vaultId: 1, seq: 10, hash: "", checkpointSeq: 4 },
        { vaultId: 2, seq: 3, hash: "", checkpointSeq: 0 },
        { vaultId: 3, seq: 2, hash: "", checkpointSeq: 9 },
      ]),
    ).toBe(6 + 3 + 2);
  });
});

describe("webhooks", () => {
  test("each covered vault with webhooks is told of the checkpoint: its own head, every head signed, a signature that verifies", async () => {
    const w = await world();
    const v1 = await w.store.vaults.create("alpha", w.clock.now());
    const v2 = await w.store.vaults.create("beta", w.clock.now());
    const v3 = await w.store.vaults.create("gamma", w.clock.now()); // no webhook
    for (const v of [v1, v2])
      await w.store.webhooks.create({
        vaultId: v.id,
        url: `https://hooks.example.com/${v.name}`,
        format: "json",
        secretNonce: new Uint8Array(12),
        secretCiphertext: new Uint8Array(32),
        createdBy: null,
        createdAt: w.clock.now(),
      });
    await w.write(v1.id, 2);
    await w.write(v2.id, 1);
    await w.write(v3.id, 1);
    const c = (await w.checkpointer({ everyRecords: 1 }).tick())!;
    const told: [number, BrokerEvent][] = [];
    await announceCheckpoint(w.store, { notify: (vaultId, event) => told.push([vaultId, event]) }, "https://broker.example.com", c);
    expect(told.map(([id]) => id)).toEqual([v1.id, v2.id]);
    for (const [vaultId, event] of told) {
      if (event.event !== "audit.checkpoint") throw new Error("not a checkpoint event");
      const vault = vaultId === v1.id ? v1 : v2;
      expect(event.vault).toBe(vault.name);
      expect(event.checkpoint.heads).toEqual(c.heads.filter((h) => h.vaultId === vaultId).map((h) => ({ vault_id: h.vaultId, seq: h.seq, hash: h.hash })));
      expect(event.checkpoint.signed_heads.map((h) => h.vault_id)).toEqual([v1.id, v2.id, v3.id]);
      expect(event.public_key_url).toBe("https://broker.example.com/v1/audit/public-key");
      // What a receiver does: rebuild the message from the event alone and check it with the published PEM.
      const message = JSON.stringify([
        "broker-audit-checkpoint-v1",
        event.checkpoint.id,
        event.checkpoint.at,
        event.checkpoint.key_id,
        event.checkpoint.signed_heads.map((h) => [h.vault_id, h.seq, h.hash]),
      ]);
      expect(nodeVerify(null, Buffer.from(message), w.signer.publicKeyPem, Buffer.from(event.checkpoint.signature, "base64url"))).toBe(true);
      // Hashes and numbers only: no name of another vault.
      expect(JSON.stringify(event)).not.toContain(vault === v1 ? "beta" : "alpha");
    }
  });
});

forEachBackend((backend) => {
  test("instances take turns: one finding another's checkpoint under way does nothing, and nothing is signed twice", async () => {
    const store = await backend.open();
    const w = await world(store);
    await w.write(1, 2);
    const plan = {
      keyId: w.signer.keyId,
      now: w.clock.now,
      due: () => true,
      sign: async () => "unused",
    };
    if (backend.name === "postgres") {
      // Another instance's turn: a transaction holding the lock (the pool gives the turn a connection of its own).
      const during = await store.db.transaction(async (tx) => {
        await tx.get("SELECT pg_advisory_xact_lock(?)", [CHECKPOINT_LOCK]);
        return takeCheckpointTurn(store.db, plan);
      });
      expect(during).toEqual({ busy: true, pruned: 0 });
      expect(await store.auditCheckpoints.list(0, 10)).toEqual([]);
    }
    // Two checkpointers (two instances) both due at once: one signs the heads, the other finds nothing moved.
    const a = w.checkpointer({ everyRecords: 1 });
    const b = w.checkpointer({ everyRecords: 1 });
    const made = (await Promise.all([a.tick(), b.tick()])).filter(Boolean);
    expect(made.length).toBe(1);
    expect((await store.auditCheckpoints.list(0, 10)).length).toBe(1);
    expect(await verifyCheckpoint(w.signer.publicKeyPem, made[0]!)).toBe(true);
    await Promise.all([a.stop(), b.stop()]);
  });
});
