// The audit chain's verifier (src/crypto/audit-verify.ts, docs/audit-chain.md "Verifying"): an intact chain is
// verified up to its last record; each kind of tampering is named at the first record it touches, once; checkpoints
// are checked with Ed25519 (keys made here, as the broker's checkpoint signer is not what is under test).

import { beforeAll, describe, expect, test } from "bun:test";
import { signedAnchor } from "../../helpers/audit-anchor.ts";
import {
  AUDIT_CHAIN_GENESIS,
  auditRecordHash,
  checkpointMessage,
  checkpointKeyId,
  createChainVerifier,
  importCheckpointKey,
  UNSIGNED_GRACE_MS,
  verifyAuditChain,
  type ChainPoint,
  type ExportedAuditRecord,
  type ExportedCheckpoint,
} from "../../../src/crypto/index.ts";

const VAULT = 7;
const T0 = Date.UTC(2026, 0, 1);

/** The record's hash at its own seq and prev, as the broker's writer computes it. */
function hashOf(r: Omit<ExportedAuditRecord, "hash">): string {
  return auditRecordHash({
    vaultId: VAULT,
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

/** `n` chained records after `anchor`, ids from 101 (seq 1 is id 101). */
function chain(n: number, anchor: ChainPoint = { seq: 0, hash: AUDIT_CHAIN_GENESIS }): ExportedAuditRecord[] {
  const out: ExportedAuditRecord[] = [];
  let prev = anchor.hash;
  for (let i = 1; i <= n; i++) {
    const seq = anchor.seq + i;
    const base = {
      id: 100 + seq,
      seq,
      prev,
      at: T0 + seq * 1000,
      principal: seq % 2 ? "agent:1" : "user:2",
      vault: "main",
      ingress: "explicit",
      method: seq % 3 ? "GET" : "POST",
      host: "api.example.com",
      path: `/v1/items/${seq}`,
      service: "api.example.com",
      credential_keys: "API_KEY",
      credential_refs: seq === 4 ? JSON.stringify(["kv:a#b"]) : null,
      status: 200,
      bytes_in: seq * 3,
      bytes_out: seq * 10,
      duration_ms: seq,
      error: null,
      contained: seq === 6,
      approved_by: seq === 8 ? "user:2" : null,
    };
    const r = { ...base, hash: hashOf(base) };
    out.push(r);
    prev = r.hash;
  }
  return out;
}

/** A record with new contents and its hash recomputed over them (an editor who knows the encoding). */
function rehash(r: ExportedAuditRecord, change: Partial<ExportedAuditRecord>): ExportedAuditRecord {
  const { hash: _old, ...rest } = { ...r, ...change };
  return { ...rest, hash: hashOf(rest) };
}

const GENESIS = { seq: 0, hash: AUDIT_CHAIN_GENESIS };
let keys: CryptoKeyPair;
let pem: string;
let otherKeys: CryptoKeyPair;

async function pemOf(k: CryptoKey): Promise<string> {
  const spki = Buffer.from(await crypto.subtle.exportKey("spki", k)).toString("base64");
  return `-----BEGIN PUBLIC KEY-----\n${spki.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----\n`;
}

async function checkpoint(
  id: number,
  heads: { vault_id: number; seq: number; hash: string }[],
  signer: CryptoKey = keys.privateKey,
  keyId = checkpointKeyId(pem),
): Promise<ExportedCheckpoint> {
  const at = T0 + id * 60_000;
  const message = checkpointMessage({ id, at, keyId, heads: heads.map((h) => ({ vaultId: h.vault_id, seq: h.seq, hash: h.hash })) });
  const signature = Buffer.from(await crypto.subtle.sign({ name: "Ed25519" }, signer, new Uint8Array(message))).toString("base64url");
  return { id, at, key_id: keyId, heads, signature };
}

beforeAll(async () => {
  keys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  otherKeys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  pem = await pemOf(keys.publicKey);
});

/** The anchor retention moved to `seq`, signed with the test's key. */
const anchorAt = (seq: number, hash: string, key: CryptoKey = keys.privateKey) => signedAnchor(key, checkpointKeyId(pem), VAULT, { seq, hash });

const verify = (records: ExportedAuditRecord[], extra: Partial<Parameters<typeof verifyAuditChain>[0]> = {}) =>
  verifyAuditChain({ vaultId: VAULT, anchor: GENESIS, records, publicKey: { pem }, ...extra });

describe("an intact chain", () => {
  test("is verified up to its last record", async () => {
    const records = chain(20);
    const r = await verify(records, { head: { seq: 20, hash: records[19]!.hash } });
    expect(r).toMatchObject({ ok: true, records: 20, breaks: [], checkpoints: 0, uncheckedCheckpoints: 0 });
    expect(r.verified).toEqual({ seq: 20, id: 120, at: T0 + 20_000, hash: records[19]!.hash });
  });

  test("from an anchor (retention removed the first records)", async () => {
    const whole = chain(20);
    const kept = whole.slice(5);
    const r = await verify(kept, { anchor: await anchorAt(5, whole[4]!.hash) });
    expect(r.ok).toBe(true);
    expect(r.verified?.seq).toBe(20);
  });

  test("records written after the head was read are fine (an export of a busy vault)", async () => {
    const records = chain(20);
    expect((await verify(records, { head: { seq: 15, hash: records[14]!.hash } })).ok).toBe(true);
  });

  test("an empty chain verifies, with nothing verified", async () => {
    const r = await verify([], { head: GENESIS });
    expect(r).toMatchObject({ ok: true, records: 0, verified: null });
  });

  test("with signed checkpoints, every one covering several vaults' heads", async () => {
    const records = chain(20);
    const cps = [
      await checkpoint(1, [{ vault_id: VAULT, seq: 10, hash: records[9]!.hash }]),
      await checkpoint(2, [
        { vault_id: 3, seq: 99, hash: "a".repeat(64) },
        { vault_id: VAULT, seq: 20, hash: records[19]!.hash },
      ]),
      await checkpoint(3, [{ vault_id: 3, seq: 120, hash: "b".repeat(64) }]), // another vault's only: ignored
    ];
    const r = await verify(records, { checkpoints: cps });
    expect(r).toMatchObject({ ok: true, checkpoints: 2, uncheckedCheckpoints: 0 });
    // Without the public key they are counted, not relied on.
    const noKey = await verifyAuditChain({ vaultId: VAULT, anchor: GENESIS, records, checkpoints: cps });
    expect(noKey).toMatchObject({ ok: true, checkpoints: 0, uncheckedCheckpoints: 2 });
  });

  test("a checkpoint as the API gives it: the vault's head, and every head the signature covers", async () => {
    const records = chain(20);
    const all = [
      { vault_id: 2, seq: 5, hash: "f".repeat(64) },
      { vault_id: VAULT, seq: 20, hash: records[19]!.hash },
    ];
    const signed = await checkpoint(8, all);
    const view: ExportedCheckpoint = { ...signed, heads: [all[1]!], signed_heads: all };
    expect(await verify(records, { checkpoints: [view] })).toMatchObject({ ok: true, checkpoints: 1 });
    // Its shown head changed while what it signed was not: forged (and not relied on).
    const shown = { ...view, heads: [{ vault_id: VAULT, seq: 30, hash: "0".repeat(64) }] };
    const r = await verify(records, { checkpoints: [shown] });
    expect(r.breaks.map((b) => [b.kind, b.message])).toEqual([
      ["forged_checkpoint", `checkpoint 8 (${new Date(signed.at).toISOString()}): forged — the head it names for this vault is not one it signed`],
    ]);
  });

  test("pushed one record at a time, continuing from an earlier run's last record", async () => {
    const records = chain(30);
    const v = await createChainVerifier({ vaultId: VAULT, anchor: { seq: 20, hash: records[19]!.hash }, anchorId: 120 });
    for (const r of records.slice(20)) v.push(r);
    expect(v.finish()).toMatchObject({ ok: true, records: 10, verified: { seq: 30, id: 130 } });
  });
});

describe("each tampering is named at the first record it touches", () => {
  test("a changed field: edited", async () => {
    const records = chain(20);
    records[4] = { ...records[4]!, status: 500 };
    const r = await verify(records);
    expect(r.ok).toBe(false);
    expect(r.verified).toBeNull();
    expect(r.breaks).toEqual([
      { kind: "edited", seq: 5, id: 105, checkpoint: null, message: "record seq 5 (id 105): edited — its hash does not match its contents" },
    ]);
  });

  test("every field of the encoding is covered", async () => {
    const changes: Partial<ExportedAuditRecord>[] = [
      { at: T0 + 1 },
      { principal: "agent:9" },
      { vault: "other" },
      { ingress: "transparent" },
      { method: "DELETE" },
      { host: "evil.example.com" },
      { path: "/v1/else" },
      { service: null },
      { credential_keys: "OTHER" },
      { credential_refs: "[]" },
      { status: 201 },
      { bytes_in: 1 },
      { bytes_out: 1 },
      { duration_ms: 999 },
      { error: "x" },
      { contained: true },
      { approved_by: "user:1" },
    ];
    for (const change of changes) {
      const records = chain(10);
      records[4] = { ...records[4]!, ...change };
      const r = await verify(records);
      expect({ change, first: r.breaks[0]?.kind, seq: r.breaks[0]?.seq }).toEqual({ change, first: "edited", seq: 5 });
    }
    // The vault id is in the hash too: the same records are not vault 8's chain.
    expect((await verifyAuditChain({ vaultId: 8, anchor: GENESIS, records: chain(3) })).breaks[0]?.kind).toBe("edited");
  });

  test("a changed field with its hash recomputed: edited, named by the next record's link", async () => {
    const records = chain(20);
    records[4] = rehash(records[4]!, { status: 500 });
    const r = await verify(records);
    expect(r.breaks).toHaveLength(1);
    expect(r.breaks[0]).toMatchObject({ kind: "edited", seq: 5, id: 105 });
    expect(r.breaks[0]!.message).toBe(
      "record seq 5 (id 105): edited — its hash was recomputed over changed contents, so record seq 6 (id 106) no longer links to it",
    );
  });

  test("a deleted row: missing", async () => {
    const records = chain(20);
    records.splice(4, 1);
    const r = await verify(records);
    expect(r.breaks).toEqual([
      {
        kind: "missing",
        seq: 5,
        id: null,
        checkpoint: null,
        message: "record seq 5: missing — deleted; seq 4 (id 104) is followed by record seq 6 (id 106)",
      },
    ]);
    const three = chain(20);
    three.splice(4, 3);
    expect((await verify(three)).breaks.map((b) => b.message)).toEqual([
      "records seq 5 to 7: missing — deleted; seq 4 (id 104) is followed by record seq 8 (id 108)",
    ]);
  });

  test("an inserted row claiming a record's seq: inserted, whichever of the two comes first", async () => {
    const records = chain(20);
    const forged = rehash(records[4]!, { id: 121, path: "/v1/forged" });
    const r = await verify([...records.slice(0, 5), forged, ...records.slice(5)]);
    expect(r.breaks).toHaveLength(1);
    expect(r.breaks[0]).toMatchObject({ kind: "inserted", seq: 5, id: 121 });
    expect(r.breaks[0]!.message).toBe("record seq 5 (id 121): inserted — a second record claims seq 5 (the chain goes on from id 105)");
    // Given a lower id than the genuine record (an id a deleted row left free), it is still the one named.
    const early = { ...forged, id: 50 };
    const r2 = await verify([...records.slice(0, 4), early, ...records.slice(4)]);
    expect(r2.breaks.map((b) => [b.kind, b.id])).toEqual([["inserted", 50]]);
    // A copy of a row with one field changed (its hash no longer matches).
    const copy = { ...records[9]!, id: 122, status: 404 };
    const r3 = await verify([...records.slice(0, 10), copy, ...records.slice(10)]);
    expect(r3.breaks.map((b) => [b.kind, b.seq, b.id])).toEqual([["inserted", 10, 122]]);
  });

  test("an inserted row without chain fields, written after the chain began: inserted", async () => {
    const records = chain(20).map((r) => ({ ...r, id: r.id * 10 })); // ids 1010, 1020, …
    const r = await verify(records, { unchainedAfterChain: [1055, 5000] });
    expect(r.breaks.map((b) => [b.kind, b.seq, b.id])).toEqual([
      ["inserted", 6, 1055],
      ["inserted", 21, 5000],
    ]);
    expect(r.breaks[0]!.message).toBe("record id 1055: inserted — it has no seq, prev or hash, but was written after the chain began (before seq 6)");
  });

  test("two rows' contents swapped: out of order, naming both, once", async () => {
    const records = chain(20);
    const a = records[4]!;
    const b = records[8]!;
    const contents = (r: ExportedAuditRecord) => {
      const { id: _i, seq: _s, prev: _p, hash: _h, ...rest } = r;
      return rest;
    };
    records[4] = { ...a, ...contents(b) };
    records[8] = { ...b, ...contents(a) };
    const r = await verify(records);
    expect(r.breaks).toEqual([
      {
        kind: "out_of_order",
        seq: 5,
        id: 105,
        checkpoint: null,
        message:
          "record seq 5 (id 105): out of order — it holds the contents of record seq 9 (id 109), and that record holds its contents: the two were swapped",
      },
    ]);
  });

  test("two rows' ids swapped: out of order, naming both, once", async () => {
    const records = chain(20);
    records[4] = { ...records[4]!, id: 109 };
    records[8] = { ...records[8]!, id: 105 };
    const r = await verify(records);
    expect(r.breaks).toEqual([
      {
        kind: "out_of_order",
        seq: 5,
        id: 109,
        checkpoint: null,
        message: "record seq 5 (id 109): out of order — it and record seq 9 (id 105) changed places (each has the other's id): records were swapped",
      },
    ]);
    // Neighbours swapped.
    const next = chain(20);
    next[4] = { ...next[4]!, id: 106 };
    next[5] = { ...next[5]!, id: 105 };
    const r2 = await verify(next);
    expect(r2.breaks.map((b) => [b.kind, b.seq, b.id])).toEqual([["out_of_order", 5, 106]]);
  });

  test("a record out of seq order in the file: out of order", async () => {
    const records = chain(10);
    const r = await verify([...records.slice(0, 5), records[2]!, ...records.slice(5)]);
    expect(r.breaks.map((b) => [b.kind, b.seq, b.id])).toEqual([["out_of_order", 3, 103]]);
  });

  test("the last records removed after a checkpoint (and the head moved back): truncated", async () => {
    const records = chain(20);
    const cp = await checkpoint(4, [{ vault_id: VAULT, seq: 20, hash: records[19]!.hash }]);
    const kept = records.slice(0, 10);
    const r = await verify(kept, { head: { seq: 10, hash: kept[9]!.hash }, checkpoints: [cp] });
    expect(r.breaks).toEqual([
      {
        kind: "truncated",
        seq: 11,
        id: null,
        checkpoint: 4,
        message: `records seq 11 to 20: missing — removed after checkpoint 4 (${new Date(cp.at).toISOString()}), which signed seq 20 (the chain ends at record seq 10 (id 110))`,
      },
    ]);
    // Without the checkpoint and with the head moved back, nothing shows it: that is what checkpoints are for.
    expect((await verify(kept, { head: { seq: 10, hash: kept[9]!.hash } })).ok).toBe(true);
    // With the head left where it was, the head shows it.
    const r2 = await verify(kept, { head: { seq: 20, hash: records[19]!.hash } });
    expect(r2.breaks.map((b) => [b.kind, b.seq, b.message])).toEqual([
      ["truncated", 11, "records seq 11 to 20: missing — removed from the end; the vault's head is seq 20 (the chain ends at record seq 10 (id 110))"],
    ]);
  });

  test("a forged checkpoint: its signature does not verify (altered, another key, another key id)", async () => {
    const records = chain(20);
    const good = await checkpoint(5, [{ vault_id: VAULT, seq: 20, hash: records[19]!.hash }]);
    const altered = { ...good, heads: [{ vault_id: VAULT, seq: 25, hash: "c".repeat(64) }] };
    let r = await verify(records, { checkpoints: [altered] });
    expect(r.breaks).toEqual([
      {
        kind: "forged_checkpoint",
        seq: 25,
        id: null,
        checkpoint: 5,
        message: `checkpoint 5 (${new Date(good.at).toISOString()}): forged — its signature does not verify with the broker's public key`,
      },
    ]);
    // A forged checkpoint's heads are not relied on: no "truncated" on its word.
    expect(r.breaks.some((b) => b.kind === "truncated")).toBe(false);
    r = await verify(records, { checkpoints: [await checkpoint(5, [{ vault_id: VAULT, seq: 20, hash: records[19]!.hash }], otherKeys.privateKey)] });
    expect(r.breaks.map((b) => b.kind)).toEqual(["forged_checkpoint"]);
    r = await verify(records, {
      checkpoints: [await checkpoint(5, [{ vault_id: VAULT, seq: 20, hash: records[19]!.hash }], keys.privateKey, "0123456789abcdef")],
    });
    expect(r.breaks.map((b) => b.message)).toEqual([
      `checkpoint 5 (${new Date(good.at).toISOString()}): forged — signed with key 0123456789abcdef, not the broker's key ${checkpointKeyId(pem)}`,
    ]);
    r = await verify(records, { checkpoints: [{ ...good, signature: "not base64url!" }] });
    expect(r.breaks.map((b) => b.kind)).toEqual(["forged_checkpoint"]);
  });

  test("a chain recomputed after an edit: rewritten, where a checkpoint signed another hash", async () => {
    const records = chain(20);
    const cp = await checkpoint(6, [{ vault_id: VAULT, seq: 12, hash: records[11]!.hash }]);
    // The editor changes seq 5 and recomputes every hash after it: every link holds.
    const rewritten = [...records];
    for (let i = 4; i < 20; i++)
      rewritten[i] = rehash(rewritten[i]!, { prev: i === 4 ? records[3]!.hash : rewritten[i - 1]!.hash, ...(i === 4 ? { status: 500 } : {}) });
    expect((await verify(rewritten)).ok).toBe(true);
    const r = await verify(rewritten, { checkpoints: [cp] });
    expect(r.breaks.map((b) => [b.kind, b.seq, b.id, b.checkpoint])).toEqual([["rewritten", 12, 112, 6]]);
  });

  test("a wrong anchor: the first record does not follow it", async () => {
    const whole = chain(20);
    const kept = whole.slice(5);
    let r = await verify(kept, { anchor: await anchorAt(5, "d".repeat(64)) });
    expect(r.breaks).toEqual([
      {
        kind: "anchor",
        seq: 6,
        id: 106,
        checkpoint: null,
        message: "record seq 6 (id 106): does not follow the anchor — its prev is not the anchor's hash (seq 5): the anchor or the first record was changed",
      },
    ]);
    // An anchor behind the first kept record: the records between are missing.
    r = await verify(kept, { anchor: GENESIS });
    expect(r.breaks.map((b) => [b.kind, b.seq, b.message])).toEqual([
      ["missing", 1, "records seq 1 to 5: missing — deleted; the chain starts at record seq 6 (id 106) but its anchor is seq 0"],
    ]);
    // An anchor ahead of records still there.
    r = await verify(whole, { anchor: await anchorAt(5, whole[4]!.hash) });
    expect(r.breaks[0]).toMatchObject({ kind: "anchor", seq: 1, id: 101 });
    // A checkpoint at the anchor's seq checks the anchor's hash.
    const cp = await checkpoint(7, [{ vault_id: VAULT, seq: 5, hash: whole[4]!.hash }]);
    r = await verify(kept, { anchor: await anchorAt(5, "e".repeat(64)), checkpoints: [cp] });
    expect(r.breaks.map((b) => b.kind)).toEqual(["rewritten", "anchor"]);
  });

  test("several tamperings: each named once, the first first", async () => {
    const records = chain(40);
    records[29] = { ...records[29]!, status: 418 };
    records.splice(9, 1);
    const r = await verify(records);
    expect(r.breaks.map((b) => [b.kind, b.seq])).toEqual([
      ["missing", 10],
      ["edited", 30],
    ]);
  });
});

describe("retention's signed anchor", () => {
  test("an anchor above the genesis without retention's valid signature is named; without a public key it is not checked", async () => {
    const whole = chain(20);
    const kept = whole.slice(5);
    const bare = await verify(kept, { anchor: { seq: 5, hash: whole[4]!.hash } });
    expect(bare.breaks.map((b) => [b.kind, b.seq, b.message])).toEqual([
      ["anchor", 5, "anchor (seq 5): not signed — records up to it are gone, and no signature by the broker's key says retention removed them"],
    ]);
    const other = await verify(kept, { anchor: await anchorAt(5, whole[4]!.hash, otherKeys.privateKey) });
    expect(other.breaks[0]?.message).toBe("anchor (seq 5): forged — its signature does not verify with the broker's public key");
    const good = await anchorAt(5, whole[4]!.hash);
    // Each signed part counts: the time, the seq, the key id.
    for (const changed of [
      { ...good, at: good.at! + 1 },
      { ...good, key_id: "0123456789abcdef" },
      { ...good, signature: `${good.signature}x` },
    ]) {
      expect((await verify(kept, { anchor: changed })).breaks[0]).toMatchObject({ kind: "anchor", seq: 5 });
    }
    // The same signature on another vault's anchor does not hold.
    expect((await verifyAuditChain({ vaultId: VAULT + 1, anchor: good, records: [], publicKey: { pem } })).breaks[0]).toMatchObject({ kind: "anchor" });
    expect((await verifyAuditChain({ vaultId: VAULT, anchor: { seq: 5, hash: whole[4]!.hash }, records: kept })).ok).toBe(true);
    // An earlier run's last verified record needs no signature.
    expect((await verify(kept, { anchor: { seq: 5, hash: whole[4]!.hash }, anchorTrusted: true })).ok).toBe(true);
  });

  test("an anchor moved while the chain was read: the chain goes on from it; unsigned, or naming another hash for a record read, it is named", async () => {
    const whole = chain(30);
    const read = async (move: Awaited<ReturnType<typeof anchorAt>>, firstPage = 10, rest = whole.slice(15)) => {
      const v = await createChainVerifier({ vaultId: VAULT, anchor: GENESIS, publicKey: { pem } });
      for (const r of whole.slice(0, firstPage)) v.push(r);
      await v.moveAnchor(move);
      for (const r of rest) v.push(r);
      return v.finish();
    };
    const moved = await read(await anchorAt(15, whole[14]!.hash));
    expect({ ok: moved.ok, verified: moved.verified?.seq, records: moved.records }).toEqual({ ok: true, verified: 30, records: 25 });
    // Past records already read (the first page reached seq 20): nothing changes for them.
    expect((await read(await anchorAt(15, whole[14]!.hash), 20, whole.slice(20))).ok).toBe(true);
    const bare = await read({ seq: 15, hash: whole[14]!.hash });
    expect(bare.breaks.map((b) => [b.kind, b.seq])).toEqual([["anchor", 15]]);
    const wrong = await read(await anchorAt(10, "a".repeat(64)), 10, whole.slice(10));
    expect(wrong.breaks.map((b) => b.kind)).toContain("rewritten");
    // The anchor must still be followed: a gap after the moved anchor is records deleted.
    expect((await read(await anchorAt(15, whole[14]!.hash), 10, whole.slice(17))).breaks[0]).toMatchObject({ kind: "missing", seq: 16 });
  });
});

describe("checkpoints kept outside the database, and records no checkpoint signs", () => {
  test("a copy of a checkpoint the database no longer holds is named 'deleted_checkpoint' (unless retention removed what it signed)", async () => {
    const records = chain(20);
    const cp = await checkpoint(3, [{ vault_id: VAULT, seq: 12, hash: records[11]!.hash }]);
    const outside = [{ source: "hook.jsonl", checkpoints: [cp] }];
    const gone = await verify(records, { outsideCheckpoints: outside });
    expect(gone.breaks.map((b) => [b.kind, b.seq, b.checkpoint, b.message])).toEqual([
      [
        "deleted_checkpoint",
        12,
        3,
        `checkpoint 3 (${new Date(cp.at).toISOString()}): deleted — hook.jsonl holds it (it signed seq 12), the broker's database does not`,
      ],
    ]);
    expect((await verify(records, { checkpoints: [cp], outsideCheckpoints: outside })).ok).toBe(true);
    // Its head still binds the chain: a rewrite under it is named as for any checkpoint.
    const rewritten = records.map((r) => (r.seq === 12 ? { ...r, hash: "b".repeat(64) } : r));
    expect((await verify(rewritten, { checkpoints: [], outsideCheckpoints: outside })).breaks.map((b) => b.kind)).toContain("rewritten");
    // Below a signed anchor: its records went by retention, and so may it.
    expect((await verify(records.slice(14), { anchor: await anchorAt(14, records[13]!.hash), outsideCheckpoints: outside })).ok).toBe(true);
    // A forged copy is named forged, not relied on.
    const forged = { ...cp, signature: cp.signature.replace(/^./, (c) => (c === "A" ? "B" : "A")) };
    expect((await verify(records, { outsideCheckpoints: [{ source: "x", checkpoints: [forged] }] })).breaks[0]?.kind).toBe("forged_checkpoint");
  });

  test("records the broker says must be signed by now (written longer than the interval ago) that no checkpoint signs are named 'unsigned'", async () => {
    const records = chain(20);
    const mustBeSigned = (through: number) => ({ mustBeSigned: { through, everyMs: 5_000 } });
    expect((await verify(records, mustBeSigned(3))).breaks.map((b) => [b.kind, b.seq, b.message])).toEqual([
      [
        "unsigned",
        1,
        "records seq 1 to 3: unsigned — no checkpoint signs them, though the broker signs every record within 5 s of writing it and wrote them longer ago: checkpoints were deleted (or the broker could not make them)",
      ],
    ]);
    // A checkpoint at seq 15 signs 1..15: through 15 holds, 16 does not.
    const cp = await checkpoint(1, [{ vault_id: VAULT, seq: 15, hash: records[14]!.hash }]);
    expect((await verify(records, { checkpoints: [cp], ...mustBeSigned(15) })).ok).toBe(true);
    expect((await verify(records, { checkpoints: [cp], ...mustBeSigned(16) })).breaks.map((b) => [b.kind, b.seq])).toEqual([["unsigned", 16]]);
    // A forged checkpoint signs nothing; a signed anchor covers what retention removed.
    const forged = { ...cp, signature: cp.signature.replace(/^./, (c) => (c === "A" ? "B" : "A")) };
    expect((await verify(records, { checkpoints: [forged], ...mustBeSigned(15) })).breaks.map((b) => b.kind)).toEqual(["unsigned", "forged_checkpoint"]);
    expect((await verify(records.slice(10), { anchor: await anchorAt(10, records[9]!.hash), ...mustBeSigned(10) })).ok).toBe(true);
    // Beyond the chain's end (records retention left none of) nothing is claimed; past the end, truncation is named as before.
    expect((await verify(records, { checkpoints: [cp], ...mustBeSigned(99) })).breaks[0]).toMatchObject({ kind: "unsigned", seq: 16 });
  });
});

describe("the public key", () => {
  test("an SPKI PEM with any line breaks imports; anything else is refused with a reason", async () => {
    await importCheckpointKey(pem.replace(/\n/g, "\r\n"));
    await expect(importCheckpointKey("not a key")).rejects.toThrow("not a PEM-encoded SPKI key");
    const ec = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    await expect(importCheckpointKey(await pemOf(ec.publicKey))).rejects.toThrow("not an Ed25519 public key");
  });
});
