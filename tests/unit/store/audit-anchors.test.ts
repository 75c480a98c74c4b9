// Retention signs each anchor it moves (store/audit-anchors.ts, docs/audit-chain.md "Heads and anchors"): on every
// backend, and on SQLite's worker thread as the server runs it. Each signature is checked here with node:crypto
// against the public key and the message built from the spec (not with the broker's verifier), and a batch run
// without a key leaves the anchor unsigned.

import { describe, expect, test } from "bun:test";
import { generateKeyPairSync, verify } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore, pruneAuditBatch, type AnchorKey, type Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const pair = generateKeyPairSync("ed25519");
const KEY: AnchorKey = { keyId: "00112233aabbccdd", pkcs8: new Uint8Array(pair.privateKey.export({ format: "der", type: "pkcs8" })) };
const AT = Date.UTC(2026, 10, 28, 12);

/** `n` chained rows for vault `vaultId` (seq 1..n, hash h<vault>-<seq>), and its chain row. */
async function chain(store: Store, vaultId: number, n: number): Promise<void> {
  for (let seq = 1; seq <= n; seq++)
    await store.db.run(
      `INSERT INTO audit_logs (at, principal, vault_id, vault, ingress, method, host, path, service, credential_keys, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by, chain_seq, chain_prev, chain_hash)
       VALUES (?, 'agent:1', ?, 'v', 'explicit', 'GET', 'api.example', '/', NULL, '', 200, 0, 0, 1, NULL, 0, NULL, ?, ?, ?)`,
      [seq, vaultId, seq, `h${vaultId}-${seq - 1}`, `h${vaultId}-${seq}`],
    );
  await store.db.run("INSERT INTO audit_chains (vault_id, head_seq, head_hash, anchor_seq, anchor_hash) VALUES (?, ?, ?, 0, ?)", [
    vaultId,
    n,
    `h${vaultId}-${n}`,
    "0".repeat(64),
  ]);
}

/** The anchor's signature holds for exactly these facts, by the spec's message. */
function signedFor(sig: string | null, vaultId: number, seq: number, hash: string): boolean {
  if (!sig) return false;
  const message = Buffer.from(JSON.stringify(["broker-audit-anchor-v1", vaultId, seq, hash, AT, KEY.keyId]));
  return verify(null, message, pair.publicKey, Buffer.from(sig, "base64url"));
}

async function expectSignedAnchors(store: Store): Promise<void> {
  for (const [vaultId, seq] of [
    [1, 4],
    [2, 3],
  ] as const) {
    const c = (await store.auditChains.get(vaultId))!;
    expect({ seq: c.anchorSeq, hash: c.anchorHash, at: c.anchorAt, keyId: c.anchorKeyId }).toEqual({
      seq,
      hash: `h${vaultId}-${seq}`,
      at: AT,
      keyId: KEY.keyId,
    });
    expect(signedFor(c.anchorSignature, vaultId, seq, c.anchorHash)).toBe(true);
    // Not for another vault, seq or hash.
    expect(signedFor(c.anchorSignature, vaultId + 10, seq, c.anchorHash)).toBe(false);
    expect(signedFor(c.anchorSignature, vaultId, seq + 1, c.anchorHash)).toBe(false);
  }
}

forEachBackend((backend) => {
  test("a batch signs the anchor it moves for each vault; without a key the anchor is stored unsigned", async () => {
    const store = await backend.open();
    await chain(store, 1, 6); // ids 1..6
    await chain(store, 2, 5); // ids 7..11
    // The 9 lowest ids go: vault 1's whole log but its last two, vault 2's first three.
    expect((await pruneAuditBatch(store.db, { olderThan: 0, keepRows: 2, signing: { key: KEY, at: AT } }, 7)).removed).toBe(7);
    const v1 = (await store.auditChains.get(1))!;
    expect(v1.anchorSeq).toBe(6);
    expect(signedFor(v1.anchorSignature, 1, 6, "h1-6")).toBe(true);
    await pruneAuditBatch(store.db, { olderThan: 0, keepRows: 2 }, 10);
    const v2 = (await store.auditChains.get(2))!;
    expect({ seq: v2.anchorSeq, at: v2.anchorAt, keyId: v2.anchorKeyId, signature: v2.anchorSignature }).toEqual({
      seq: 3,
      at: null,
      keyId: null,
      signature: null,
    });
  });
});

describe("SQLite's worker thread, as the server runs retention", () => {
  test("signs the anchors it moves with the key it is sent", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-anchors-"));
    const store = await openStore({ dataDir: dir }, { readWorker: {} });
    try {
      expect(store.offLoopPrune).toBeDefined();
      await chain(store, 1, 6);
      await chain(store, 2, 5);
      // Vault 1 up to seq 4 (ids 1..4), then vault 2 up to seq 3 (ids 7..9) once vault 1's rows before them are gone.
      expect((await store.offLoopPrune!({ olderThan: 0, keepRows: 7, signing: { key: KEY, at: AT } }, 4)).removed).toBe(4);
      await store.db.run("DELETE FROM audit_logs WHERE id IN (5, 6)"); // (not retention: only to reach vault 2's rows)
      expect((await store.offLoopPrune!({ olderThan: 0, keepRows: 2, signing: { key: KEY, at: AT } }, 3)).removed).toBe(3);
      await expectSignedAnchors(store);
    } finally {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
