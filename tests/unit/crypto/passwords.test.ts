// User passwords: Argon2id with a per-hash random salt and the parameters stored beside the hash.

import { describe, expect, test } from "bun:test";
import { Secret } from "../../../src/secret.ts";
import { type KdfParams, SALT_BYTES } from "../../../src/crypto/kdf.ts";
import { hashPassword, verifyAgainstNothing, verifyPassword } from "../../../src/crypto/passwords.ts";

const CHEAP: KdfParams = { alg: "argon2id", iterations: 1, memoryKiB: 1024, parallelism: 1, hashLength: 32 };
const pw = (s: string) => new Secret(s);

describe("hash and verify", () => {
  test("round trip: the right password verifies, a wrong one does not", async () => {
    const stored = await hashPassword(pw("correct horse battery"), CHEAP);
    expect(await verifyPassword(pw("correct horse battery"), stored)).toBe(true);
    expect(await verifyPassword(pw("correct horse batterY"), stored)).toBe(false);
  });

  // An empty password is just a wrong one: a login form submitted empty must get `false`, not a crash
  // (hash-wasm refuses empty passwords with a plain Error "Password must be specified").
  test("an empty password verifies false instead of throwing", async () => {
    const stored = await hashPassword(pw("correct horse battery"), CHEAP);
    expect(await verifyPassword(pw(""), stored).catch((e: unknown) => e)).toBe(false);
    expect(await verifyAgainstNothing(pw(""), CHEAP).catch((e: unknown) => e)).toBe(false);
  });

  test("the stored hash does not contain the password", async () => {
    const stored = await hashPassword(pw("plain-text-pw"), CHEAP);
    expect(JSON.stringify(stored)).not.toContain("plain-text-pw");
    expect(Buffer.from(stored.hash).includes(Buffer.from("plain-text-pw"))).toBe(false);
  });

  test("each hash gets its own random 16-byte salt", async () => {
    const a = await hashPassword(pw("same password"), CHEAP);
    const b = await hashPassword(pw("same password"), CHEAP);
    expect(a.salt.byteLength).toBe(SALT_BYTES);
    expect(b.salt.byteLength).toBe(16);
    expect(Buffer.from(a.salt).equals(Buffer.from(b.salt))).toBe(false);
    expect(Buffer.from(a.hash).equals(Buffer.from(b.hash))).toBe(false);
  });

  test("a tampered hash, salt or truncated hash fails", async () => {
    const stored = await hashPassword(pw("pw-12345"), CHEAP);
    const flipped = new Uint8Array(stored.hash);
    flipped[0] = flipped[0]! ^ 1;
    expect(await verifyPassword(pw("pw-12345"), { ...stored, hash: flipped })).toBe(false);
    expect(await verifyPassword(pw("pw-12345"), { ...stored, salt: new Uint8Array(16) })).toBe(false);
    expect(await verifyPassword(pw("pw-12345"), { ...stored, hash: stored.hash.slice(0, 16) })).toBe(false);
  });

  test("verification uses the parameters stored with the hash, not the defaults", async () => {
    const stored = await hashPassword(pw("pw-12345"), CHEAP);
    expect(JSON.parse(stored.params)).toEqual(CHEAP);
    expect(await verifyPassword(pw("pw-12345"), stored)).toBe(true);
    const other = JSON.stringify({ ...CHEAP, iterations: 2 });
    expect(await verifyPassword(pw("pw-12345"), { ...stored, params: other })).toBe(false);
  });

  test("absurd stored parameters are refused rather than run", async () => {
    const stored = await hashPassword(pw("pw-12345"), CHEAP);
    const huge = JSON.stringify({ ...CHEAP, memoryKiB: 64 * 1024 * 1024 });
    await expect(verifyPassword(pw("pw-12345"), { ...stored, params: huge })).rejects.toThrow();
  });
});

describe("contract parameters", () => {
  test("by default the params are stored as JSON with 3 iterations, 64 MiB, 4 lanes, 32 bytes", async () => {
    const stored = await hashPassword(pw("default-params"));
    expect(JSON.parse(stored.params)).toEqual({ alg: "argon2id", iterations: 3, memoryKiB: 65536, parallelism: 4, hashLength: 32 });
    expect(stored.hash.byteLength).toBe(32);
    expect(stored.salt.byteLength).toBe(16);
    expect(await verifyPassword(pw("default-params"), stored)).toBe(true);
  });
});

describe("unknown users", () => {
  test("verifyAgainstNothing always returns false", async () => {
    expect(await verifyAgainstNothing(pw("anything"), CHEAP)).toBe(false);
    expect(await verifyAgainstNothing(pw("anything else"))).toBe(false);
  });
});
