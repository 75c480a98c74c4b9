// Signed anchors (docs/audit-chain.md, "Heads and anchors"): when retention removes a vault's oldest records, the
// new anchor (the last removed record's seq and hash) is signed with the broker's Ed25519 key in the same
// transaction, so anyone with the public key can tell retention's removals from a prefix deleted by someone with
// write access to the database (who cannot sign). Here, not in crypto/, because retention runs in the store (on
// SQLite, in its worker thread, where nothing but cloneable data arrives): signing is synchronous (node:crypto)
// from the key's PKCS#8 bytes.

import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from "node:crypto";
import type { SqlValue } from "./db.ts";

/** The anchor encoding's name. */
export const AUDIT_ANCHOR_ENCODING = "broker-audit-anchor-v1";

/** What retention needs to sign anchors: the signing key's id and its private half (PKCS#8 DER). Never logged. */
export interface AnchorKey {
  readonly keyId: string;
  readonly pkcs8: Uint8Array;
}

/**
 * The broker's own anchor key as it is held (AuditSigner.anchorKey): its bytes in a private field, so a log line, JSON
 * or an inspection of it shows "[redacted]". Sent to the SQLite worker as a plain copy (store/sqlite-reader.ts).
 */
export class HeldAnchorKey implements AnchorKey {
  readonly #pkcs8: Uint8Array;
  constructor(
    readonly keyId: string,
    pkcs8: Uint8Array,
  ) {
    this.#pkcs8 = pkcs8;
  }
  get pkcs8(): Uint8Array {
    return this.#pkcs8;
  }
  toJSON(): { keyId: string; pkcs8: string } {
    return { keyId: this.keyId, pkcs8: "[redacted]" };
  }
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `AnchorKey(${this.keyId}, [redacted])`;
  }
}

/** A vault's anchor as signed: the last removed record's seq and hash, when it was removed, by which key. */
export interface AnchorFacts {
  readonly vaultId: number;
  readonly seq: number;
  readonly hash: string;
  readonly at: number;
  readonly keyId: string;
}

/** The bytes an anchor's signature covers: `["broker-audit-anchor-v1", vault_id, seq, hash, at, key_id]` as JSON. */
export function anchorMessage(a: AnchorFacts): Uint8Array {
  return new TextEncoder().encode(JSON.stringify([AUDIT_ANCHOR_ENCODING, a.vaultId, a.seq, a.hash, a.at, a.keyId]));
}

/** Imported once per key id per thread: an import costs more than the signature. */
const imported = new Map<string, { readonly privateKey: KeyObject; readonly publicKey: KeyObject }>();

/** The key's two halves as node:crypto objects (the public one for checking what the key signed before). */
export function anchorKeyObjects(key: AnchorKey): { readonly privateKey: KeyObject; readonly publicKey: KeyObject } {
  let k = imported.get(key.keyId);
  if (!k) {
    const privateKey = createPrivateKey({ key: Buffer.from(key.pkcs8), format: "der", type: "pkcs8" });
    k = { privateKey, publicKey: createPublicKey(privateKey) };
    imported.set(key.keyId, k);
  }
  return k;
}

/** The base64url (no padding) Ed25519 signature of the anchor, by `key`. */
export function signAnchor(key: AnchorKey, a: Omit<AnchorFacts, "keyId">): string {
  return sign(null, anchorMessage({ ...a, keyId: key.keyId }), anchorKeyObjects(key).privateKey).toString("base64url");
}

/** Whether `signature` is `key`'s signature of the anchor's facts. */
export function anchorSignedBy(key: AnchorKey, a: AnchorFacts, signature: string): boolean {
  if (a.keyId !== key.keyId || !/^[A-Za-z0-9_-]{86}$/.test(signature)) return false;
  return verify(null, anchorMessage(a), anchorKeyObjects(key).publicKey, Buffer.from(signature, "base64url"));
}

/** Retention's key and clock for the anchors it moves. */
export interface AnchorSigning {
  readonly key: AnchorKey;
  readonly at: number;
}

/** The parameters of retention's anchor move (store/audit.ts MOVE_ANCHOR): the anchor, signed when `signing` is given. */
export function movedAnchorParams(vaultId: number, seq: number, hash: string, signing: AnchorSigning | undefined): SqlValue[] {
  const signature = signing ? signAnchor(signing.key, { vaultId, seq, hash, at: signing.at }) : null;
  return [seq, hash, signing?.at ?? null, signing?.key.keyId ?? null, signature, vaultId, seq];
}
