// Attacks on the audit chain's verifier and canonical encoding (src/crypto/audit-verify.ts, audit-chain.ts,
// docs/audit-chain.md) that need no broker: checkpoints replayed from another vault or re-aimed at this one, field
// values chosen to look like the encoding's own separators, types an edited export file could change.

import { beforeAll, describe, expect, test } from "bun:test";
import { signedAnchor } from "../../helpers/audit-anchor.ts";
import {
  AUDIT_CHAIN_GENESIS,
  auditRecordHash,
  canonicalAuditRecord,
  checkpointKeyId,
  checkpointMessage,
  verifyAuditChain,
  type ChainedRecord,
  type ExportedAuditRecord,
  type ExportedCheckpoint,
} from "../../../src/crypto/index.ts";

const VAULT = 7;
const OTHER = 9;
const T0 = Date.UTC(2026, 0, 1);

function hashOf(vaultId: number, r: Omit<ExportedAuditRecord, "hash" | "id">): string {
  return auditRecordHash({
    vaultId,
    seq: r.seq,
    prev: r.prev,
    at: r.at,
    principal: r.principal,
    vault: r.vault,
    ingress: r.ingress,
    method: r.method,
    host: r.host,
    path: r.path,
    service: r.service,
    credentialKeys: r.credential_keys,
    credentialRefs: r.credential_refs,
    status: r.status,
    bytesIn: r.bytes_in,
    bytesOut: r.bytes_out,
    durationMs: r.duration_ms,
    error: r.error,
    contained: r.contained,
    approvedBy: r.approved_by,
  });
}

function chain(vaultId: number, n: number, firstId = 1): ExportedAuditRecord[] {
  const out: ExportedAuditRecord[] = [];
  let prev = AUDIT_CHAIN_GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const base = {
      seq,
      prev,
      at: T0 + seq,
      principal: "agent:1",
      vault: vaultId === VAULT ? "main" : "other",
      ingress: "explicit",
      method: "GET",
      host: "api.example.com",
      path: `/v1/${seq}`,
      service: "api.example.com",
      credential_keys: "API_KEY",
      credential_refs: null,
      status: 200,
      bytes_in: 0,
      bytes_out: 10,
      duration_ms: 3,
      error: null,
      contained: false,
      approved_by: null,
    };
    const r = { id: firstId + seq - 1, ...base, hash: hashOf(vaultId, base) };
    out.push(r);
    prev = r.hash;
  }
  return out;
}

let keys: CryptoKeyPair;
let pem: string;

beforeAll(async () => {
  keys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const spki = Buffer.from(await crypto.subtle.exportKey("spki", keys.publicKey)).toString("base64");
  pem = `-----BEGIN PUBLIC KEY-----\n${spki.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----\n`;
});

async function sign(id: number, heads: { vault_id: number; seq: number; hash: string }[]): Promise<ExportedCheckpoint> {
  const keyId = checkpointKeyId(pem);
  const at = T0 + id * 1000;
  const message = checkpointMessage({ id, at, keyId, heads: heads.map((h) => ({ vaultId: h.vault_id, seq: h.seq, hash: h.hash })) });
  const signature = Buffer.from(await crypto.subtle.sign({ name: "Ed25519" }, keys.privateKey, new Uint8Array(message))).toString("base64url");
  return { id, at, key_id: keyId, heads, signed_heads: heads, signature };
}

const genesis = { seq: 0, hash: AUDIT_CHAIN_GENESIS };

describe("checkpoints replayed or re-aimed", () => {
  test("a genuine checkpoint of another vault is not relied on for this one, and breaks nothing", async () => {
    const mine = chain(VAULT, 5);
    const theirs = chain(OTHER, 8);
    const foreign = await sign(3, [{ vault_id: OTHER, seq: 8, hash: theirs[7]!.hash }]);
    const r = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: mine, checkpoints: [foreign], publicKey: { pem } });
    expect({ ok: r.ok, checked: r.checkpoints }).toEqual({ ok: true, checked: 0 });
  });

  test("another vault's checkpoint re-aimed at this vault (its head shown as this vault's), or a head moved between heads and signed_heads: forged", async () => {
    const mine = chain(VAULT, 8);
    const theirs = chain(OTHER, 8);
    const foreign = await sign(3, [{ vault_id: OTHER, seq: 8, hash: theirs[7]!.hash }]);
    // The record at seq 8 was deleted and a "checkpoint" claims the chain ended at 7 for this vault.
    const reAimed: ExportedCheckpoint = { ...foreign, heads: [{ vault_id: VAULT, seq: 7, hash: mine[6]!.hash }] };
    const r = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: mine.slice(0, 7), checkpoints: [reAimed], publicKey: { pem } });
    expect(r.breaks.map((b) => b.kind)).toEqual(["forged_checkpoint"]);
    // A checkpoint signing both vaults, with this vault's `heads` lowered to hide a truncation.
    const both = await sign(4, [
      { vault_id: VAULT, seq: 8, hash: mine[7]!.hash },
      { vault_id: OTHER, seq: 8, hash: theirs[7]!.hash },
    ]);
    const lowered: ExportedCheckpoint = { ...both, heads: [{ vault_id: VAULT, seq: 7, hash: mine[6]!.hash }] };
    const t = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: mine.slice(0, 7), checkpoints: [lowered], publicKey: { pem } });
    expect(t.breaks.map((b) => b.kind)).toEqual(["forged_checkpoint"]);
    // Dropping this vault from `heads` (the signature still covers it) does not hide it either: truncated.
    const hidden: ExportedCheckpoint = { ...both, heads: [] };
    const u = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: mine.slice(0, 7), checkpoints: [hidden], publicKey: { pem } });
    expect(u.breaks.map((b) => b.kind)).toEqual(["truncated"]);
  });

  test("a checkpoint's signature in another spelling (standard base64, padding, a trailing character) is not accepted as the same", async () => {
    const mine = chain(VAULT, 3);
    const c = await sign(1, [{ vault_id: VAULT, seq: 3, hash: mine[2]!.hash }]);
    const std = Buffer.from(c.signature, "base64url").toString("base64");
    for (const signature of [`${std}`, `${c.signature}==`, `${c.signature}A`, `${c.signature.slice(0, -1)}`]) {
      if (signature === c.signature) continue;
      const r = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: mine, checkpoints: [{ ...c, signature }], publicKey: { pem } });
      // Either it is the same 64 bytes (then it verifies, harmlessly) or it is forged; never silently skipped.
      expect(r.checkpoints + r.breaks.filter((b) => b.kind === "forged_checkpoint").length).toBe(1);
    }
  });
});

describe("the canonical encoding's boundaries", () => {
  const base: ChainedRecord = {
    vaultId: VAULT,
    seq: 1,
    prev: AUDIT_CHAIN_GENESIS,
    at: T0,
    principal: "agent:1",
    vault: "main",
    ingress: "explicit",
    method: "GET",
    host: "api.example.com",
    path: "/a",
    service: "api.example.com",
    credentialKeys: "A",
    credentialRefs: null,
    status: 200,
    bytesIn: 0,
    bytesOut: 0,
    durationMs: 0,
    error: null,
    contained: false,
    approvedBy: null,
  };

  test("text chosen to look like the encoding's separators stays inside its field: no two different records share an encoding", () => {
    // The path swallowing the next field, and the host giving part of itself to the path.
    const shifted = [
      { ...base, path: '/a","api.example.com', service: null },
      { ...base, host: 'api.example.com","/a', path: "" },
      { ...base, path: "/a\\", host: "api.example.com" },
      { ...base, credentialKeys: 'A","[\\"kv:x\\"]', credentialRefs: null },
      { ...base, credentialKeys: "A", credentialRefs: '["kv:x"]' },
    ];
    const encodings = [base, ...shifted].map(canonicalAuditRecord);
    expect(new Set(encodings).size).toBe(encodings.length);
    for (const r of shifted) expect((JSON.parse(canonicalAuditRecord(r)) as unknown[]).length).toBe(21);
  });

  test("null and empty text, false and 0, a number and its digits as text each encode differently", () => {
    const pairs: [ChainedRecord, ChainedRecord][] = [
      [
        { ...base, service: null },
        { ...base, service: "" },
      ],
      [
        { ...base, error: null },
        { ...base, error: "" },
      ],
      [
        { ...base, approvedBy: null },
        { ...base, approvedBy: "" },
      ],
      [
        { ...base, credentialRefs: null },
        { ...base, credentialRefs: "" },
      ],
      [
        { ...base, credentialRefs: undefined },
        { ...base, credentialRefs: "[]" },
      ],
      [
        { ...base, contained: false },
        { ...base, contained: 0 as unknown as boolean },
      ],
      [
        { ...base, status: 200 },
        { ...base, status: "200" as unknown as number },
      ],
    ];
    for (const [a, b] of pairs) expect(auditRecordHash(a)).not.toBe(auditRecordHash(b));
    // An edited export file may change a field's JSON type; the record then no longer verifies.
    const [r] = chain(VAULT, 1);
    for (const change of [{ status: "200" }, { contained: 0 }, { bytes_in: "0" }, { at: String(r!.at) }, { credential_refs: "" }, { error: "" }]) {
      const edited = { ...r!, ...change } as unknown as ExportedAuditRecord;
      expect(hashOf(VAULT, edited)).not.toBe(r!.hash);
    }
  });

  test("a record's hash depends on its vault id: a record moved to another vault's chain does not verify there", async () => {
    const theirs = chain(OTHER, 3);
    const mine = chain(VAULT, 3);
    const moved = [mine[0]!, { ...theirs[1]!, prev: mine[0]!.hash }, mine[2]!];
    const r = await verifyAuditChain({ vaultId: VAULT, anchor: genesis, records: moved });
    expect(r.breaks[0]).toMatchObject({ kind: "edited", seq: 2 });
  });
});

describe("the anchor", () => {
  test("records kept at or below the anchor are named, and a checkpoint at the anchor must carry its hash", async () => {
    const mine = chain(VAULT, 10);
    const c = await sign(1, [{ vault_id: VAULT, seq: 5, hash: mine[4]!.hash }]);
    const anchor = await signedAnchor(keys.privateKey, checkpointKeyId(pem), VAULT, { seq: 5, hash: mine[4]!.hash });
    const kept = await verifyAuditChain({ vaultId: VAULT, anchor, records: mine, checkpoints: [c], publicKey: { pem } });
    expect(kept.breaks.map((b) => [b.kind, b.seq])).toEqual([1, 2, 3, 4, 5].map((s) => ["anchor", s]));
    const wrong = await verifyAuditChain({
      vaultId: VAULT,
      anchor: await signedAnchor(keys.privateKey, checkpointKeyId(pem), VAULT, { seq: 5, hash: "f".repeat(64) }),
      records: mine.slice(5),
      checkpoints: [c],
      publicKey: { pem },
    });
    expect(wrong.breaks.map((b) => b.kind)).toContain("rewritten");
  });
});
