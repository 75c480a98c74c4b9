// What retention's checks cost (store/audit-chain-check.ts): before it signs the anchor it moves, retention reads
// every record it removes, recomputes its hash and walks the chain on to a signed checkpoint. Here a log of real
// chained records (VAULTS vaults, a signed checkpoint every CHECKPOINT_EVERY records of each) is pruned down to a
// cap in batches of the size the broker starts with, through the SQLite worker as the server runs it: rows removed
// per second and ms per batch, with the checks and signing, against the same batches unsigned (no checks), on the
// same fill in the same run, as a ratio. No assertions.
// `npx bun bench/audit-retention-checks.ts [records] [batch]` (defaults 200,000 and 1,000).

import { generateKeyPairSync, sign } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AUDIT_CHAIN_GENESIS, auditRecordHash, checkpointMessage, openStore, type AnchorSigning, type Store } from "../src/store/index.ts";

const RECORDS = Number(process.argv[2] ?? 200_000);
const BATCH = Number(process.argv[3] ?? 1_000);
const VAULTS = 10;
const CHECKPOINT_EVERY = 1_000;

const pair = generateKeyPairSync("ed25519");
const KEY_ID = "0011223344556677";
const SIGNING: AnchorSigning = { key: { keyId: KEY_ID, pkcs8: new Uint8Array(pair.privateKey.export({ format: "der", type: "pkcs8" })) }, at: Date.now() };

/** RECORDS chained records round-robin over VAULTS vaults, hashed as the writer hashes them, checkpoints signed. */
async function fill(store: Store): Promise<void> {
  const heads = new Map<number, { seq: number; hash: string }>();
  for (let v = 1; v <= VAULTS; v++) heads.set(v, { seq: 0, hash: AUDIT_CHAIN_GENESIS });
  for (let from = 0; from < RECORDS; from += 5_000) {
    await store.transaction(async (tx) => {
      const rows = [];
      for (let i = from; i < Math.min(RECORDS, from + 5_000); i++) {
        const vaultId = (i % VAULTS) + 1;
        const head = heads.get(vaultId)!;
        const r = {
          at: i,
          principal: "agent:1",
          vaultId,
          vault: `v${vaultId}`,
          ingress: "explicit",
          method: "GET",
          host: "api.example",
          path: `/items/${i}`,
          service: "api.example",
          credentialKeys: "TOKEN",
          credentialRefs: null,
          status: 200,
          bytesIn: 0,
          bytesOut: 2048,
          durationMs: 3,
          error: null,
          contained: false,
          approvedBy: null,
        };
        const seq = head.seq + 1;
        const hash = auditRecordHash({ ...r, seq, prev: head.hash });
        rows.push({ ...r, chainSeq: seq, chainPrev: head.hash, chainHash: hash });
        heads.set(vaultId, { seq, hash });
        if (seq === 1) await tx.auditChains.lockHead(vaultId);
        if (seq % CHECKPOINT_EVERY === 0) {
          const signed = [{ vaultId, seq, hash }];
          await tx.auditCheckpoints.insert(i, KEY_ID, signed, async (id) =>
            sign(null, checkpointMessage({ id, at: i, keyId: KEY_ID, heads: signed }), pair.privateKey).toString("base64url"),
          );
        }
      }
      await tx.audit.insert(rows);
      for (const [v, h] of heads) await tx.auditChains.setHead(v, h.seq, h.hash);
    });
  }
}

async function run(signed: boolean): Promise<{ rowsPerS: number; msPerBatch: number }> {
  const dir = mkdtempSync(join(tmpdir(), "broker-bench-retention-"));
  const store = await openStore({ dataDir: dir }, { readWorker: {} });
  try {
    await store.auditCheckpoints.insertSigningKey({
      keyId: KEY_ID,
      publicKeyPem: String(pair.publicKey.export({ format: "pem", type: "spki" })),
      privateNonce: new Uint8Array(12),
      privateCiphertext: new Uint8Array(48),
      createdAt: 0,
    });
    await fill(store);
    // Down to a tenth, by the row cap, as the broker's batches do it (the fill's last records are left: unsigned yet).
    const limits = { olderThan: 0, keepRows: Math.floor(RECORDS / 10), ...(signed && { signing: SIGNING }) };
    let removed = 0;
    let batches = 0;
    const t = performance.now();
    for (;;) {
      const b = await store.offLoopPrune!(limits, BATCH);
      if (b.unsignedAnchors) throw new Error(`unexpected unsigned anchors: ${JSON.stringify(b.unsignedAnchors)}`);
      removed += b.removed;
      batches++;
      if (!b.more || b.removed === 0) break;
    }
    const ms = performance.now() - t;
    return { rowsPerS: (removed / ms) * 1000, msPerBatch: ms / batches };
  } finally {
    store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const plain = await run(false);
const checked = await run(true);
console.log(`\naudit retention through the SQLite worker: ${RECORDS.toLocaleString("en")} chained records, ${VAULTS} vaults, batches of ${BATCH}\n`);
console.log("| retention | rows/s | ms/batch |\n|---|---:|---:|");
console.log(`| unsigned, no checks (baseline) | ${plain.rowsPerS.toFixed(0)} | ${plain.msPerBatch.toFixed(2)} |`);
console.log(`| signed anchors, records checked | ${checked.rowsPerS.toFixed(0)} | ${checked.msPerBatch.toFixed(2)} |`);
console.log(`\nchecked / baseline: ${(checked.rowsPerS / plain.rowsPerS).toFixed(2)}× the rows per second`);
