// AES-256-GCM: a published known-answer vector, fresh 96-bit nonces, and tamper detection.

import { describe, expect, test } from "bun:test";
import { DecryptError, encodeAad, importAesKey, NONCE_BYTES, open, seal } from "../../../src/crypto/aead.ts";

const hex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));
const toHex = (b: Uint8Array) => Buffer.from(b).toString("hex");

// McGrew & Viega, "The Galois/Counter Mode of Operation (GCM)", Test Case 16 (AES-256, 96-bit IV, with AAD).
const TC16 = {
  K: "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
  IV: "cafebabefacedbaddecaf888",
  P: "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
  A: "feedfacedeadbeeffeedfacedeadbeefabaddad2",
  C: "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
  T: "76fc6ece0f4e1768cddf8853bb2d551b",
};

function flipBit(b: Uint8Array, index: number, bit = 0): Uint8Array {
  const out = new Uint8Array(b);
  out[index] = out[index]! ^ (1 << bit);
  return out;
}

describe("known answer (GCM spec Test Case 16)", () => {
  test("seal with the given nonce produces C||T", async () => {
    const key = await importAesKey(hex(TC16.K));
    const sealed = await seal(key, hex(TC16.P), hex(TC16.A), hex(TC16.IV));
    expect(toHex(sealed.nonce)).toBe(TC16.IV);
    expect(toHex(sealed.ciphertext)).toBe(TC16.C + TC16.T);
  });

  test("open decrypts C||T back to P", async () => {
    const key = await importAesKey(hex(TC16.K));
    const plain = await open(key, { nonce: hex(TC16.IV), ciphertext: hex(TC16.C + TC16.T) }, hex(TC16.A));
    expect(toHex(plain)).toBe(TC16.P);
  });
});

describe("nonces", () => {
  test("are 12 bytes and unique over 10,000 encryptions", async () => {
    expect(NONCE_BYTES).toBe(12);
    const key = await importAesKey(crypto.getRandomValues(new Uint8Array(32)));
    const plain = new Uint8Array([1, 2, 3]);
    const aad = encodeAad("test");
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) {
      const { nonce } = await seal(key, plain, aad);
      expect(nonce.byteLength).toBe(12);
      seen.add(toHex(nonce));
    }
    expect(seen.size).toBe(10_000);
  });
});

describe("tampering", () => {
  const setup = async () => {
    const key = await importAesKey(crypto.getRandomValues(new Uint8Array(32)));
    const aad = encodeAad("broker", "test", 1);
    const sealed = await seal(key, new TextEncoder().encode("s3cr3t-value"), aad);
    return { key, aad, sealed };
  };

  test("the untouched ciphertext opens", async () => {
    const { key, aad, sealed } = await setup();
    expect(new TextDecoder().decode(await open(key, sealed, aad))).toBe("s3cr3t-value");
  });

  test("a flipped bit in the ciphertext body fails", async () => {
    const { key, aad, sealed } = await setup();
    const bad = { nonce: sealed.nonce, ciphertext: flipBit(sealed.ciphertext, 0) };
    await expect(open(key, bad, aad)).rejects.toBeInstanceOf(DecryptError);
  });

  test("a flipped bit in the tag fails", async () => {
    const { key, aad, sealed } = await setup();
    const bad = { nonce: sealed.nonce, ciphertext: flipBit(sealed.ciphertext, sealed.ciphertext.byteLength - 1, 7) };
    await expect(open(key, bad, aad)).rejects.toBeInstanceOf(DecryptError);
  });

  test("a flipped bit in the nonce fails", async () => {
    const { key, aad, sealed } = await setup();
    const bad = { nonce: flipBit(sealed.nonce, 5, 3), ciphertext: sealed.ciphertext };
    await expect(open(key, bad, aad)).rejects.toBeInstanceOf(DecryptError);
  });

  test("a nonce of the wrong length fails", async () => {
    const { key, aad, sealed } = await setup();
    await expect(open(key, { nonce: sealed.nonce.slice(0, 11), ciphertext: sealed.ciphertext }, aad)).rejects.toBeInstanceOf(DecryptError);
  });

  test("different additional data fails", async () => {
    const { key, sealed } = await setup();
    await expect(open(key, sealed, encodeAad("broker", "test", 2))).rejects.toBeInstanceOf(DecryptError);
  });

  test("another key fails", async () => {
    const { aad, sealed } = await setup();
    const other = await importAesKey(crypto.getRandomValues(new Uint8Array(32)));
    await expect(open(other, sealed, aad)).rejects.toBeInstanceOf(DecryptError);
  });
});

describe("helpers", () => {
  test("encodeAad length-prefixes its parts so different splits never collide", () => {
    expect(toHex(encodeAad("a", "bc"))).not.toBe(toHex(encodeAad("ab", "c")));
    expect(toHex(encodeAad("ab"))).toBe("000000026162");
    expect(toHex(encodeAad(7))).toBe(toHex(encodeAad("7")));
  });

  test("importAesKey accepts only 32-byte keys and makes them non-extractable", async () => {
    await expect(importAesKey(new Uint8Array(16))).rejects.toThrow();
    const key = await importAesKey(new Uint8Array(32));
    expect(key.extractable).toBe(false);
    await expect(crypto.subtle.exportKey("raw", key)).rejects.toThrow();
  });
});
