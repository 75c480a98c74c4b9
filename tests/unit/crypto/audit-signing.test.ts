// The audit log's signing key (docs/audit-chain.md, Checkpoints): made once and kept (two instances starting
// together on one PostgreSQL store one key and both use it), its private half never in the database in the
// clear (the row's bytes and the whole SQLite file are searched for it), a stored key that was tampered with
// refused, and checkpoints it signs verified by an independent client (node:crypto's crypto.verify with the
// published PEM) while a forged or altered checkpoint fails there and in verifyCheckpoint.

import { afterAll, describe, expect, test } from "bun:test";
import { verify as nodeVerify, generateKeyPairSync, sign as nodeSign } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  auditKeyId,
  checkpointMessage,
  encodeAad,
  loadAuditSigningKey,
  open,
  openAuditSigningKey,
  pemToSpki,
  signCheckpoint,
  unlockKeyring,
  verifyCheckpoint,
  type SignedCheckpoint,
} from "../../../src/crypto/index.ts";
import { createStore, migrate, openMemoryStore, openStore, type AuditSigningKeyRow } from "../../../src/store/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const T0 = 1_764_355_200_000;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const HEADS = [
  { vaultId: 3, seq: 17, hash: "c".repeat(64) },
  { vaultId: 1, seq: 1200, hash: "a".repeat(64) },
];

/** The PKCS#8 bytes of a stored key, opened the way the broker opens it (the test's only way to see them). */
async function privateBytes(dataKey: CryptoKey, row: AuditSigningKeyRow): Promise<Uint8Array> {
  return open(dataKey, { nonce: row.privateNonce, ciphertext: row.privateCiphertext }, encodeAad("broker", "audit-signing-key", 1, row.keyId));
}

function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  return Buffer.from(haystack).indexOf(Buffer.from(needle)) >= 0;
}

describe("the signing key", () => {
  test("made on the first load, the same key on every later one; its key id is the SPKI's SHA-256 prefix", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-audit-key-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir });
    const { dataKey } = await unlockKeyring(store, undefined, { now: () => T0 });
    const first = await loadAuditSigningKey(store, dataKey, T0);
    const again = await loadAuditSigningKey(store, dataKey, T0 + 1000);
    expect([first.created, again.created]).toEqual([true, false]);
    expect(again.signer.keyId).toBe(first.signer.keyId);
    expect(again.signer.publicKeyPem).toBe(first.signer.publicKeyPem);
    expect(again.signer.createdAt).toBe(T0);
    expect(first.signer.keyId).toMatch(/^[0-9a-f]{16}$/);
    const spki = pemToSpki(first.signer.publicKeyPem);
    expect(first.signer.keyId).toBe(new Bun.CryptoHasher("sha256").update(spki).digest("hex").slice(0, 16));
    expect(auditKeyId(spki)).toBe(first.signer.keyId);
    expect(Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_signing_keys"))!.n)).toBe(1);
    store.close();
  });

  test("the loaded signer keeps the private half for retention without showing it: not in its JSON, Bun.inspect or a log line", async () => {
    const store = await openMemoryStore();
    const { dataKey } = await unlockKeyring(store, undefined, { now: () => T0 });
    const { signer } = await loadAuditSigningKey(store, dataKey, T0);
    const pkcs8 = await privateBytes(dataKey, (await store.auditCheckpoints.signingKey())!);
    expect(signer.anchorKey.pkcs8).toEqual(pkcs8); // retention signs anchors with it (store/audit-anchors.ts)
    const log = createMemoryLogger();
    log.info("signer", { signer, key: signer.anchorKey });
    const seed = Buffer.from(pkcs8.subarray(pkcs8.length - 32));
    const shown = [JSON.stringify(signer), Bun.inspect(signer), Bun.inspect(signer.anchorKey), String(signer.anchorKey), ...log.lines];
    for (const text of shown) {
      for (const enc of ["hex", "base64", "base64url"] as const) expect(text).not.toContain(seed.toString(enc));
      expect(text).not.toContain([...pkcs8.subarray(16, 24)].join(", ")); // the bytes as an inspected array
    }
    expect(Bun.inspect(signer.anchorKey)).toContain("[redacted]");
  });

  test("the private key is sealed: neither its PKCS#8 nor its 32-byte seed is in the row or anywhere in the database file", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-audit-key-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir });
    const { dataKey } = await unlockKeyring(store, undefined, { now: () => T0 });
    await loadAuditSigningKey(store, dataKey, T0);
    const row = (await store.auditCheckpoints.signingKey())!;
    const pkcs8 = await privateBytes(dataKey, row);
    expect(pkcs8.byteLength).toBe(48); // RFC 8410: 16 bytes of structure, then the 32-byte seed
    const seed = pkcs8.slice(16);
    // The row as the database holds it, every column's bytes.
    const raw = await store.db.get<Record<string, unknown>>("SELECT * FROM audit_signing_keys");
    const cells = Object.values(raw!).map((v) => (v instanceof Uint8Array ? v : new TextEncoder().encode(String(v))));
    for (const cell of cells) {
      expect(contains(cell, seed)).toBe(false);
      expect(contains(cell, pkcs8)).toBe(false);
      expect(Buffer.from(cell).toString("latin1")).not.toContain(Buffer.from(seed).toString("base64"));
      expect(Buffer.from(cell).toString("latin1")).not.toContain(Buffer.from(seed).toString("hex"));
    }
    store.close();
    const files = ["broker.db", "broker.db-wal"].map((f) => join(dir, f)).filter(existsSync);
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) {
      const bytes = new Uint8Array(readFileSync(f));
      expect(contains(bytes, seed)).toBe(false);
      expect(contains(bytes, pkcs8)).toBe(false);
    }
  });

  test("a stored key that was tampered with is refused: another public key, another key id, a ciphertext moved or altered", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-audit-key-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir });
    const { dataKey } = await unlockKeyring(store, undefined, { now: () => T0 });
    await loadAuditSigningKey(store, dataKey, T0);
    const row = (await store.auditCheckpoints.signingKey())!;
    const other = generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }).toString();
    const otherId = auditKeyId(pemToSpki(other));
    // A public key swapped in: its id no longer matches, or (id rewritten to match) the private key no longer opens.
    await expect(openAuditSigningKey(dataKey, { ...row, publicKeyPem: other })).rejects.toThrow(/does not match its key id/);
    await expect(openAuditSigningKey(dataKey, { ...row, publicKeyPem: other, keyId: otherId })).rejects.toThrow(/decryption failed/);
    const flipped = row.privateCiphertext.slice();
    flipped[5]! ^= 1;
    await expect(openAuditSigningKey(dataKey, { ...row, privateCiphertext: flipped })).rejects.toThrow(/decryption failed/);
    // Another data key (another broker's) cannot open it either.
    const stranger = await crypto.subtle.importKey("raw", crypto.getRandomValues(new Uint8Array(32)), { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
    await expect(openAuditSigningKey(stranger, row)).rejects.toThrow(/decryption failed/);
    store.close();
  });
});

forEachBackend((backend) => {
  test("instances starting at once: each makes a pair, one is stored, every instance signs with that one", async () => {
    const connect = await backend.freshDatabase();
    const first = connect();
    await migrate(first);
    const { dataKey } = await unlockKeyring(createStore(first), undefined, { now: () => T0 });
    const instances = [createStore(first), ...Array.from({ length: backend.name === "postgres" ? 5 : 1 }, () => createStore(connect()))];
    const loaded = await Promise.all(instances.map((s, i) => loadAuditSigningKey(s, dataKey, T0 + i)));
    expect(loaded.filter((l) => l.created).length).toBe(1);
    expect(new Set(loaded.map((l) => l.signer.keyId)).size).toBe(1);
    expect(new Set(loaded.map((l) => l.signer.publicKeyPem)).size).toBe(1);
    expect(Number((await first.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_signing_keys"))!.n)).toBe(1);
    // A checkpoint signed by any of them verifies with the one published key.
    const pem = loaded[0]!.signer.publicKeyPem;
    for (const l of loaded) {
      const c = { id: 1, at: T0, keyId: l.signer.keyId, heads: HEADS };
      const signature = await signCheckpoint(l.signer, c);
      expect(await verifyCheckpoint(pem, { ...c, signature })).toBe(true);
    }
  });
});

describe("checkpoint signatures", () => {
  async function signed(): Promise<{ pem: string; c: SignedCheckpoint }> {
    const dir = mkdtempSync(join(tmpdir(), "broker-audit-key-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir });
    const { dataKey } = await unlockKeyring(store, undefined, { now: () => T0 });
    const { signer } = await loadAuditSigningKey(store, dataKey, T0);
    store.close();
    const c = { id: 7, at: T0, keyId: signer.keyId, heads: HEADS };
    return { pem: signer.publicKeyPem, c: { ...c, signature: await signCheckpoint(signer, c) } };
  }

  /** The independent client: node:crypto, the PEM as published, the message rebuilt from docs/audit-chain.md's rule. */
  function independentlyVerified(pem: string, c: SignedCheckpoint): boolean {
    const heads = [...c.heads].sort((a, b) => a.vaultId - b.vaultId).map((h) => [h.vaultId, h.seq, h.hash]);
    const message = Buffer.from(JSON.stringify(["broker-audit-checkpoint-v1", c.id, c.at, c.keyId, heads]), "utf8");
    return nodeVerify(null, message, pem, Buffer.from(c.signature, "base64url"));
  }

  test("round trip: the signature is base64url of 64 bytes over checkpointMessage(), and node:crypto verifies it with the PEM", async () => {
    const { pem, c } = await signed();
    expect(c.signature).toMatch(/^[A-Za-z0-9_-]{86}$/);
    expect(Buffer.from(checkpointMessage(c)).toString()).toBe(
      `["broker-audit-checkpoint-v1",7,${T0},"${c.keyId}",[[1,1200,"${"a".repeat(64)}"],[3,17,"${"c".repeat(64)}"]]]`,
    );
    expect(independentlyVerified(pem, c)).toBe(true);
    expect(await verifyCheckpoint(pem, c)).toBe(true);
    // The heads' order as given does not matter: the message sorts them.
    expect(await verifyCheckpoint(pem, { ...c, heads: [...c.heads].reverse() })).toBe(true);
  });

  test("an altered checkpoint fails: any head's seq or hash, a head added or removed, the id, the time, the key id, the signature", async () => {
    const { pem, c } = await signed();
    const sig = Buffer.from(c.signature, "base64url");
    sig[10]! ^= 0x01;
    const altered: [string, SignedCheckpoint][] = [
      ["seq", { ...c, heads: [{ ...c.heads[0]!, seq: 18 }, c.heads[1]!] }],
      ["hash", { ...c, heads: [c.heads[0]!, { ...c.heads[1]!, hash: `b${"a".repeat(63)}` }] }],
      ["vault id", { ...c, heads: [{ ...c.heads[0]!, vaultId: 4 }, c.heads[1]!] }],
      ["head removed", { ...c, heads: [c.heads[1]!] }],
      ["head added", { ...c, heads: [...c.heads, { vaultId: 9, seq: 1, hash: "d".repeat(64) }] }],
      ["id", { ...c, id: 8 }],
      ["time", { ...c, at: c.at + 1 }],
      ["signature bit", { ...c, signature: sig.toString("base64url") }],
      ["signature cut", { ...c, signature: c.signature.slice(0, 80) }],
    ];
    for (const [what, a] of altered) {
      expect({ what, independent: independentlyVerified(pem, a), ours: await verifyCheckpoint(pem, a) }).toEqual({ what, independent: false, ours: false });
    }
    // A key id that is not this key's is refused before any signature check.
    expect(await verifyCheckpoint(pem, { ...c, keyId: "0123456789abcdef" })).toBe(false);
  });

  test("a forged checkpoint fails: signed by another Ed25519 key (even naming this key's id), or checked against another key", async () => {
    const { pem, c } = await signed();
    const forger = generateKeyPairSync("ed25519");
    const forged = { ...c, heads: [{ vaultId: 1, seq: 1190, hash: "e".repeat(64) }] };
    const forgedSig = nodeSign(null, Buffer.from(checkpointMessage(forged)), forger.privateKey).toString("base64url");
    expect(independentlyVerified(pem, { ...forged, signature: forgedSig })).toBe(false);
    expect(await verifyCheckpoint(pem, { ...forged, signature: forgedSig })).toBe(false);
    // The genuine checkpoint does not verify with the forger's key either.
    const forgerPem = forger.publicKey.export({ type: "spki", format: "pem" }).toString();
    expect(independentlyVerified(forgerPem, c)).toBe(false);
    expect(await verifyCheckpoint(forgerPem, c)).toBe(false);
  });
});
