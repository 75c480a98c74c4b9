// The audit log's signing key (issue 37, docs/audit-chain.md, Checkpoints): an Ed25519 key pair made with
// WebCrypto on the broker's first start, its private half sealed with the data key (the additional data names
// the key id, itself the hash of the public half, so a public key swapped in the row no longer opens the
// private one), its public half published. Signs checkpointMessage()'s bytes; verifies them for any holder
// of the public key.

import { HeldAnchorKey, type AnchorKey, type AuditSigningKeyRow, type Store } from "../store/index.ts";
import { encodeAad, open, seal } from "./aead.ts";
import { checkpointMessage, type CheckpointHead } from "../store/index.ts";

const ED25519 = { name: "Ed25519" } as const;
const SIGNATURE_BYTES = 64;

function keyAad(keyId: string): Uint8Array {
  return encodeAad("broker", "audit-signing-key", 1, keyId);
}

/** The public facts of the signing key, as the API and the console show them. */
export interface AuditPublicKey {
  /** The first 16 hex digits of the SHA-256 of the public key's SPKI DER. */
  readonly keyId: string;
  /** SubjectPublicKeyInfo, PEM (`-----BEGIN PUBLIC KEY-----`). */
  readonly publicKeyPem: string;
  readonly createdAt: number;
}

/** The loaded key: signs checkpoints with a non-extractable private key. */
export interface AuditSigner extends AuditPublicKey {
  /** base64url (no padding) Ed25519 signature of `message`. */
  sign(message: Uint8Array): Promise<string>;
  /**
   * The same key for retention, which signs the anchors it moves inside its transaction, on SQLite in its worker
   * thread (store/audit-anchors.ts): the private half's PKCS#8 bytes, held so that no log, JSON or inspection shows them.
   */
  readonly anchorKey: AnchorKey;
}

/** A checkpoint as it is signed and published. */
export interface SignedCheckpoint {
  readonly id: number;
  readonly at: number;
  readonly keyId: string;
  /** Every head the signature covers. */
  readonly heads: readonly CheckpointHead[];
  readonly signature: string;
}

/** The key id of a public key: the first 16 hex digits of the SHA-256 of its SPKI DER. */
export function auditKeyId(spkiDer: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(spkiDer).digest("hex").slice(0, 16);
}

export function spkiToPem(der: Uint8Array): string {
  const b64 = Buffer.from(der).toString("base64");
  return `-----BEGIN PUBLIC KEY-----\n${b64.match(/.{1,64}/g)!.join("\n")}\n-----END PUBLIC KEY-----\n`;
}

/** The DER inside a `PUBLIC KEY` PEM; throws on anything else. */
export function pemToSpki(pem: string): Uint8Array {
  const m = /^-----BEGIN PUBLIC KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PUBLIC KEY-----\s*$/.exec(pem.trim() + "\n");
  if (!m) throw new Error("not a PEM public key (-----BEGIN PUBLIC KEY-----)");
  return new Uint8Array(Buffer.from(m[1]!.replace(/\s+/g, ""), "base64"));
}

/** A fresh key pair, its private half sealed with the data key: the row to store. */
export async function createAuditSigningKey(dataKey: CryptoKey, now: number): Promise<Omit<AuditSigningKeyRow, "id">> {
  const pair = (await crypto.subtle.generateKey(ED25519, true, ["sign", "verify"])) as CryptoKeyPair;
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", pair.publicKey));
  const keyId = auditKeyId(spki);
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", pair.privateKey));
  const sealed = await seal(dataKey, pkcs8, keyAad(keyId));
  pkcs8.fill(0);
  return { keyId, publicKeyPem: spkiToPem(spki), privateNonce: sealed.nonce, privateCiphertext: sealed.ciphertext, createdAt: now };
}

/** Opens a stored key: the key id must be the public key's, and the private half must open and sign for it. */
export async function openAuditSigningKey(dataKey: CryptoKey, row: AuditSigningKeyRow): Promise<AuditSigner> {
  const spki = pemToSpki(row.publicKeyPem);
  if (auditKeyId(spki) !== row.keyId) throw new Error(`audit signing key ${row.keyId}: the stored public key does not match its key id`);
  const pkcs8 = await open(dataKey, { nonce: row.privateNonce, ciphertext: row.privateCiphertext }, keyAad(row.keyId));
  const anchorKey = new HeldAnchorKey(row.keyId, new Uint8Array(pkcs8));
  let privateKey: CryptoKey;
  try {
    privateKey = await crypto.subtle.importKey("pkcs8", pkcs8 as BufferSource, ED25519, false, ["sign"]);
  } finally {
    pkcs8.fill(0);
  }
  const publicKey = await crypto.subtle.importKey("spki", spki as BufferSource, ED25519, true, ["verify"]);
  const probe = new TextEncoder().encode(`broker-audit-signing-key-probe:${row.keyId}`);
  const probed = await crypto.subtle.sign(ED25519, privateKey, probe as BufferSource);
  if (!(await crypto.subtle.verify(ED25519, publicKey, probed, probe as BufferSource)))
    throw new Error(`audit signing key ${row.keyId}: the private key does not belong to the stored public key`);
  return {
    keyId: row.keyId,
    publicKeyPem: row.publicKeyPem,
    createdAt: row.createdAt,
    anchorKey,
    async sign(message: Uint8Array) {
      return Buffer.from(await crypto.subtle.sign(ED25519, privateKey, message as BufferSource)).toString("base64url");
    },
  };
}

/**
 * The broker's signing key, created on first start. Several instances starting at once each make a pair, but
 * only the first insert is kept (insertSigningKey); every instance then reads the stored key back and uses
 * that one. `created`: this call's key is the one stored.
 */
export async function loadAuditSigningKey(
  store: Pick<Store, "auditCheckpoints">,
  dataKey: CryptoKey,
  now: number,
): Promise<{ signer: AuditSigner; created: boolean }> {
  let created = false;
  let row = await store.auditCheckpoints.signingKey();
  if (!row) {
    created = await store.auditCheckpoints.insertSigningKey(await createAuditSigningKey(dataKey, now));
    row = await store.auditCheckpoints.signingKey();
    if (!row) throw new Error("the audit signing key was stored but cannot be read back");
  }
  return { signer: await openAuditSigningKey(dataKey, row), created };
}

/** The checkpoint's signature: checkpointMessage()'s bytes signed by `signer` (whose key id the checkpoint names). */
export function signCheckpoint(signer: AuditSigner, c: Omit<SignedCheckpoint, "signature" | "keyId">): Promise<string> {
  return signer.sign(checkpointMessage({ id: c.id, at: c.at, keyId: signer.keyId, heads: c.heads }));
}

/**
 * Whether `c.signature` is a valid Ed25519 signature, by the key in `publicKeyPem`, of the checkpoint's
 * message. False for a malformed signature or a checkpoint naming another key id; throws only on a PEM that
 * is not a public key.
 */
export async function verifyCheckpoint(publicKeyPem: string, c: SignedCheckpoint): Promise<boolean> {
  const spki = pemToSpki(publicKeyPem);
  if (auditKeyId(spki) !== c.keyId) return false;
  if (!/^[A-Za-z0-9_-]{86}$/.test(c.signature)) return false;
  const signature = new Uint8Array(Buffer.from(c.signature, "base64url"));
  if (signature.byteLength !== SIGNATURE_BYTES) return false;
  const key = await crypto.subtle.importKey("spki", spki as BufferSource, ED25519, false, ["verify"]);
  return crypto.subtle.verify(ED25519, key, signature as BufferSource, checkpointMessage(c) as BufferSource);
}
