// Checking the audit log's signatures from outside the broker (docs/audit-chain.md): the public key as a PEM, its
// key id, a checkpoint's signature over the heads it signed and a retention anchor's signature. WebCrypto only, so
// the verifier runs wherever the CLI or the console does.

import { anchorMessage, checkpointMessage } from "../store/index.ts";
import { auditKeyId } from "./audit-signing.ts";
import type { ExportedCheckpoint, SignedAnchorPoint } from "./audit-export-shapes.ts";

/** The broker's public checkpoint key (an SPKI PEM) for WebCrypto's Ed25519 verify. */
export async function importCheckpointKey(pem: string): Promise<CryptoKey> {
  const body = pemBody(pem);
  try {
    return await crypto.subtle.importKey("spki", Buffer.from(body, "base64"), { name: "Ed25519" }, false, ["verify"]);
  } catch {
    throw new Error("the public key is not an Ed25519 public key");
  }
}

/** The key id checkpoints name: the first 16 hex digits of the SHA-256 of the key's SPKI DER. */
export function checkpointKeyId(pem: string): string {
  return auditKeyId(new Uint8Array(Buffer.from(pemBody(pem), "base64")));
}

/** Whether the checkpoint's signature is the key's Ed25519 signature of its message over the heads it signed (docs/audit-chain.md). */
export async function checkpointSignatureValid(key: CryptoKey, c: ExportedCheckpoint): Promise<boolean> {
  if (!/^[A-Za-z0-9_-]+$/.test(c.signature)) return false;
  const heads = (c.signed_heads ?? c.heads).map((h) => ({ vaultId: h.vault_id, seq: h.seq, hash: h.hash }));
  const message = checkpointMessage({ id: c.id, at: c.at, keyId: c.key_id, heads });
  try {
    return await crypto.subtle.verify({ name: "Ed25519" }, key, Buffer.from(c.signature, "base64url"), new Uint8Array(message));
  } catch {
    return false;
  }
}

/**
 * Whether the anchor carries the key's Ed25519 signature of anchorMessage() over the vault, its seq and hash, when
 * retention moved it and the key id it names (which must be `keyId`, the public key's).
 */
export async function anchorSignatureValid(key: CryptoKey, keyId: string, vaultId: number, a: SignedAnchorPoint): Promise<boolean> {
  if (typeof a.signature !== "string" || !/^[A-Za-z0-9_-]+$/.test(a.signature) || a.key_id !== keyId || typeof a.at !== "number") return false;
  const message = anchorMessage({ vaultId, seq: a.seq, hash: a.hash, at: a.at, keyId: a.key_id });
  try {
    return await crypto.subtle.verify({ name: "Ed25519" }, key, Buffer.from(a.signature, "base64url"), message as BufferSource);
  } catch {
    return false;
  }
}

/** The base64 inside a `PUBLIC KEY` PEM (any line breaks); throws on anything else. */
function pemBody(pem: string): string {
  const m = /-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----/.exec(pem);
  const body = m?.[1]?.replace(/\s+/g, "") ?? "";
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body)) throw new Error("the public key is not a PEM-encoded SPKI key (-----BEGIN PUBLIC KEY-----)");
  return body;
}
