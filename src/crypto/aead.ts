// AES-256-GCM through WebCrypto: a fresh random 96-bit nonce per encryption, and additional
// data that binds each ciphertext to where it belongs, so a ciphertext moved elsewhere fails.

export const NONCE_BYTES = 12;
export const KEY_BYTES = 32;

export class DecryptError extends Error {
  constructor() {
    super("decryption failed: wrong key, or the ciphertext was altered or moved");
  }
}

export interface Sealed {
  nonce: Uint8Array;
  /** Ciphertext followed by the 16-byte tag. */
  ciphertext: Uint8Array;
}

/** Imports raw key bytes as a non-extractable AES-GCM key: the bytes cannot be read back out of it. */
export async function importAesKey(raw: Uint8Array): Promise<CryptoKey> {
  if (raw.byteLength !== KEY_BYTES) throw new Error(`AES-256 key must be ${KEY_BYTES} bytes`);
  return crypto.subtle.importKey("raw", raw as BufferSource, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]);
}

export async function seal(key: CryptoKey, plaintext: Uint8Array, aad: Uint8Array, nonce = randomBytes(NONCE_BYTES)): Promise<Sealed> {
  const ct = await crypto.subtle.encrypt(
    { name: "AES-GCM", iv: nonce as BufferSource, additionalData: aad as BufferSource, tagLength: 128 },
    key,
    plaintext as BufferSource,
  );
  return { nonce, ciphertext: new Uint8Array(ct) };
}

export async function open(key: CryptoKey, sealed: Sealed, aad: Uint8Array): Promise<Uint8Array> {
  if (sealed.nonce.byteLength !== NONCE_BYTES) throw new DecryptError();
  try {
    const pt = await crypto.subtle.decrypt(
      { name: "AES-GCM", iv: sealed.nonce as BufferSource, additionalData: aad as BufferSource, tagLength: 128 },
      key,
      sealed.ciphertext as BufferSource,
    );
    return new Uint8Array(pt);
  } catch {
    throw new DecryptError();
  }
}

export function randomBytes(n: number): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(n));
}

/** Additional data: length-prefixed parts, so ("a","bc") and ("ab","c") can never collide. */
export function encodeAad(...parts: (string | number)[]): Uint8Array {
  const chunks = parts.map((p) => new TextEncoder().encode(String(p)));
  const out = new Uint8Array(chunks.reduce((n, c) => n + 4 + c.byteLength, 0));
  const view = new DataView(out.buffer);
  let at = 0;
  for (const c of chunks) {
    view.setUint32(at, c.byteLength);
    out.set(c, at + 4);
    at += 4 + c.byteLength;
  }
  return out;
}
