// Retention signs each anchor it moves (store/audit-anchors.ts, docs/audit-chain.md "Heads and anchors"), on every
// backend and on SQLite's worker thread as the server runs it, but only over records that check out: the ones it
// removes continue the current signed anchor and lead, with the ones kept after them, to a head a valid checkpoint
// signed (store/audit-chain-check.ts). Signatures are checked here with node:crypto against the spec's message, not
// with the broker's verifier. Records are real chain records (hashed as the writer hashes them).

import { afterAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync, sign, verify } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  AUDIT_CHAIN_GENESIS,
  auditRecordHash,
  checkpointMessage,
  openStore,
  pruneAuditBatch,
  type AnchorKey,
  type PruneBatch,
  type Store,
} from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const pair = generateKeyPairSync("ed25519");
const KEY: AnchorKey = { keyId: "00112233aabbccdd", pkcs8: new Uint8Array(pair.privateKey.export({ format: "der", type: "pkcs8" })) };
const AT = Date.UTC(2026, 10, 28, 12);
const SIGNING = { key: KEY, at: AT };

/** `n` chained records of `vaultId` as the writer makes them (at = seq), its chain row, and a checkpoint at `signedUpTo`. */
async function chain(store: Store, vaultId: number, n: number, signedUpTo = n): Promise<void> {
  let prev = AUDIT_CHAIN_GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const r = { vaultId, seq, prev, at: seq, principal: "agent:1", vault: "v", ingress: "explicit", method: "GET", host: "api.example", path: `/${seq}` };
    const fields = {
      ...r,
      service: null,
      credentialKeys: "K",
      credentialRefs: null,
      status: 200,
      bytesIn: 0,
      bytesOut: 2,
      durationMs: 1,
      error: null,
      contained: false,
      approvedBy: null,
    };
    const hash = auditRecordHash(fields);
    await store.db.run(
      `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash)
       VALUES (?, 'agent:1', ?, 'v', 'explicit', 'GET', 'api.example', ?, NULL, 'K', NULL, 200, 0, 2, 1, NULL, 0, NULL, ?, ?, ?)`,
      [seq, vaultId, `/${seq}`, seq, prev, hash],
    );
    prev = hash;
    if (seq === 1) await store.auditChains.lockHead(vaultId);
    await store.auditChains.setHead(vaultId, seq, hash);
    if (seq === signedUpTo) {
      const heads = [{ vaultId, seq, hash }];
      await store.auditCheckpoints.insert(AT, KEY.keyId, heads, async (id) =>
        sign(null, checkpointMessage({ id, at: AT, keyId: KEY.keyId, heads }), pair.privateKey).toString("base64url"),
      );
    }
  }
}

/** Records 1..n given another path, each hash recomputed and linked from the genesis (an editor who knows the encoding). */
async function remake(store: Store, n: number): Promise<void> {
  let prev = AUDIT_CHAIN_GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const path = `/made-up/${seq}`;
    const hash = auditRecordHash({
      vaultId: 1,
      seq,
      prev,
      at: seq,
      principal: "agent:1",
      vault: "v",
      ingress: "explicit",
      method: "GET",
      host: "api.example",
      path,
      service: null,
      credentialKeys: "K",
      credentialRefs: null,
      status: 200,
      bytesIn: 0,
      bytesOut: 2,
      durationMs: 1,
      error: null,
      contained: false,
      approvedBy: null,
    });
    await store.db.run("UPDATE audit_logs SET path = ?, chain_prev = ?, chain_hash = ? WHERE vault_id = 1 AND chain_seq = ?", [path, prev, hash, seq]);
    prev = hash;
  }
}

async function withKeyRow(store: Store): Promise<void> {
  await store.auditCheckpoints.insertSigningKey({
    keyId: KEY.keyId,
    publicKeyPem: String(pair.publicKey.export({ format: "pem", type: "spki" })),
    privateNonce: new Uint8Array(12),
    privateCiphertext: new Uint8Array(48),
    createdAt: AT,
  });
}

/** The anchor's signature holds for exactly these facts, by the spec's message. */
function signedFor(sig: string | null, vaultId: number, seq: number, hash: string): boolean {
  if (!sig) return false;
  const message = Buffer.from(JSON.stringify(["broker-audit-anchor-v1", vaultId, seq, hash, AT, KEY.keyId]));
  return verify(null, message, pair.publicKey, Buffer.from(sig, "base64url"));
}

type Prune = (limits: Parameters<typeof pruneAuditBatch>[1], limit: number) => Promise<PruneBatch>;

/** The checks, through `prune` (a backend's batch, or the worker's). */
function anchorSuite(open: () => Promise<{ store: Store; prune: Prune }>) {
  test("records that check out: the anchor is signed, for exactly its vault, seq and hash", async () => {
    const { store, prune } = await open();
    await withKeyRow(store);
    await chain(store, 1, 6); // ids 1..6
    await chain(store, 2, 5); // ids 7..11
    const r = await prune({ olderThan: 0, keepRows: 3, signing: SIGNING }, 8);
    expect({ removed: r.removed, unsigned: r.unsignedAnchors }).toEqual({ removed: 8, unsigned: undefined });
    for (const [vaultId, seq] of [
      [1, 6],
      [2, 2],
    ] as const) {
      const c = (await store.auditChains.get(vaultId))!;
      expect({ seq: c.anchorSeq, at: c.anchorAt, keyId: c.anchorKeyId }).toEqual({ seq, at: AT, keyId: KEY.keyId });
      expect(signedFor(c.anchorSignature, vaultId, seq, c.anchorHash)).toBe(true);
      expect(signedFor(c.anchorSignature, vaultId + 10, seq, c.anchorHash)).toBe(false);
      expect(signedFor(c.anchorSignature, vaultId, seq + 1, c.anchorHash)).toBe(false);
    }
    // The next batch continues from the signed anchor.
    expect((await prune({ olderThan: 0, keepRows: 1, signing: SIGNING }, 8)).unsignedAnchors).toBeUndefined();
    expect(signedFor((await store.auditChains.get(2))!.anchorSignature, 2, 4, (await store.auditChains.get(2))!.anchorHash)).toBe(true);
  });

  test("records changed before retention reaches them: the anchor moves unsigned, and the batch says why", async () => {
    const { store, prune } = await open();
    await withKeyRow(store);
    await chain(store, 1, 8);
    // Made older so retention takes it early (the age is part of the hash).
    await store.db.run("UPDATE audit_logs SET at = 0 WHERE chain_seq <= 3");
    const r = await prune({ olderThan: 1, keepRows: 1_000, signing: SIGNING }, 10);
    expect(r.removed).toBe(3);
    expect(r.unsignedAnchors).toEqual([{ vaultId: 1, seq: 3, reason: "record seq 1 (id 1): its hash does not match its contents" }]);
    expect((await store.auditChains.get(1))!.anchorSignature).toBeNull();
  });

  test("a record forged below the oldest (any seq and hash it likes) is not signed as the anchor", async () => {
    const { store, prune } = await open();
    await withKeyRow(store);
    await chain(store, 1, 8);
    const head = (await store.auditChains.get(1))!;
    await store.db.run(
      `INSERT INTO audit_logs (id, at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash)
       VALUES (0, 0, 'agent:1', 1, 'v', 'explicit', 'GET', 'x', '/', NULL, '', 200, 0, 0, 1, NULL, 0, NULL, ?, ?, ?)`,
      [head.headSeq, AUDIT_CHAIN_GENESIS, head.headHash],
    );
    const r = await prune({ olderThan: 1, keepRows: 1_000, signing: SIGNING }, 10);
    expect(r.removed).toBe(1);
    expect(r.unsignedAnchors?.[0]?.reason).toBe("records seq 1 to 7 are missing");
    expect((await store.auditChains.get(1))!.anchorSignature).toBeNull();
  });

  test("a chain made up over the oldest records (hashes recomputed) that crosses a checkpoint is not signed; one that stops short no longer leads to what is kept", async () => {
    const { store, prune } = await open();
    await withKeyRow(store);
    await chain(store, 1, 8, 5); // checkpoint at seq 5
    await remake(store, 6);
    const r = await prune({ olderThan: 0, keepRows: 2, signing: SIGNING }, 10);
    expect(r.unsignedAnchors?.[0]?.reason).toMatch(/^checkpoint \d+ signed another hash for seq 5$/);
    // Stopping short of the checkpoint, the removal checks out, but the record kept after it does not follow the anchor.
    const other = await open();
    await withKeyRow(other.store);
    await chain(other.store, 1, 8, 5);
    await remake(other.store, 3);
    const short = await other.prune({ olderThan: 0, keepRows: 5, signing: SIGNING }, 10);
    expect({ removed: short.removed, unsigned: short.unsignedAnchors }).toEqual({ removed: 3, unsigned: undefined });
    const kept = (await other.store.audit.chained(1, 3, 1))[0]!;
    expect(kept.chainSeq).toBe(4);
    expect(kept.chainPrev).not.toBe((await other.store.auditChains.get(1))!.anchorHash); // every verification names it
  });

  test("records no checkpoint signs yet stay until one does; without a key the anchor is stored unsigned", async () => {
    const { store, prune } = await open();
    await withKeyRow(store);
    await chain(store, 1, 8, 5); // checkpoint at seq 5
    const r = await prune({ olderThan: 0, keepRows: 0, signing: SIGNING }, 10);
    expect({ removed: r.removed, more: r.more, unsigned: r.unsignedAnchors }).toEqual({ removed: 5, more: false, unsigned: undefined });
    expect((await store.auditChains.get(1))!.anchorSeq).toBe(5);
    await prune({ olderThan: 0, keepRows: 0 }, 10);
    const c = (await store.auditChains.get(1))!;
    expect({ seq: c.anchorSeq, at: c.anchorAt, signature: c.anchorSignature }).toEqual({ seq: 8, at: null, signature: null });
  });
}

forEachBackend((backend) => {
  anchorSuite(async () => {
    const store = await backend.open();
    return { store, prune: (limits, limit) => pruneAuditBatch(store.db, limits, limit) };
  });
});

describe("SQLite's worker thread, as the server runs retention", () => {
  const dirs: string[] = [];
  const stores: Store[] = [];
  anchorSuite(async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-anchors-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir }, { readWorker: {} });
    stores.push(store);
    return { store, prune: (limits, limit) => store.offLoopPrune!(limits, limit) };
  });
  afterAll(() => {
    for (const s of stores) s.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
});
