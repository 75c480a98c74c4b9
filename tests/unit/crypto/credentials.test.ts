// Credential ciphertext is bound to its row (vault id + key name) and to the data key.

import { describe, expect, test } from "bun:test";
import { Secret } from "../../../src/secret.ts";
import { openMemoryStore } from "../../../src/store/index.ts";
import { DecryptError, importAesKey } from "../../../src/crypto/aead.ts";
import { CREDENTIAL_KEY_PATTERN, decryptCredential, encryptCredential, loadCredential, storeCredential } from "../../../src/crypto/credentials.ts";

const newKey = () => importAesKey(crypto.getRandomValues(new Uint8Array(32)));
const VALUE = "sk-live-7f3a9c1e";

describe("encrypt/decrypt", () => {
  test("round trip returns a Secret with the value", async () => {
    const key = await newKey();
    const sealed = await encryptCredential(key, 1, "API_KEY", new Secret(VALUE));
    expect(Buffer.from(sealed.ciphertext).includes(Buffer.from(VALUE))).toBe(false);
    const out = await decryptCredential(key, { vaultId: 1, key: "API_KEY", ...sealed });
    expect(out).toBeInstanceOf(Secret);
    expect(out.reveal()).toBe(VALUE);
    expect(String(out)).toBe("[redacted]");
  });

  test("a ciphertext moved to another key name fails", async () => {
    const key = await newKey();
    const sealed = await encryptCredential(key, 1, "API_KEY", new Secret(VALUE));
    await expect(decryptCredential(key, { vaultId: 1, key: "OTHER_KEY", ...sealed })).rejects.toBeInstanceOf(DecryptError);
  });

  test("a ciphertext moved to another vault fails", async () => {
    const key = await newKey();
    const sealed = await encryptCredential(key, 1, "API_KEY", new Secret(VALUE));
    await expect(decryptCredential(key, { vaultId: 2, key: "API_KEY", ...sealed })).rejects.toBeInstanceOf(DecryptError);
  });

  test("a ciphertext under another data key fails", async () => {
    const sealed = await encryptCredential(await newKey(), 1, "API_KEY", new Secret(VALUE));
    await expect(decryptCredential(await newKey(), { vaultId: 1, key: "API_KEY", ...sealed })).rejects.toBeInstanceOf(DecryptError);
  });
});

describe("through the store", () => {
  test("stored rows hold ciphertext only and load back", async () => {
    using store = await openMemoryStore();
    const key = await newKey();
    const vault = await store.vaults.create("v1", 1);
    await storeCredential(store, key, vault.id, "API_KEY", new Secret(VALUE), 5);
    const rows = await store.db.all<{ nonce: Uint8Array; ciphertext: Uint8Array }>("SELECT nonce, ciphertext FROM credentials");
    expect(rows).toHaveLength(1);
    expect(rows[0]!.nonce.byteLength).toBe(12);
    expect(Buffer.from(rows[0]!.ciphertext).includes(Buffer.from(VALUE))).toBe(false);
    expect((await loadCredential(store, key, vault.id, "API_KEY"))?.reveal()).toBe(VALUE);
    expect(await loadCredential(store, key, vault.id, "MISSING")).toBeUndefined();
  });

  test("a row copied by SQL to another key or vault fails to decrypt", async () => {
    using store = await openMemoryStore();
    const key = await newKey();
    const v1 = await store.vaults.create("v1", 1);
    const v2 = await store.vaults.create("v2", 1);
    await storeCredential(store, key, v1.id, "API_KEY", new Secret(VALUE));
    const copy =
      "INSERT INTO credentials (vault_id, key, nonce, ciphertext, created_at, updated_at) SELECT ?, ?, nonce, ciphertext, 1, 1 FROM credentials WHERE vault_id = ? AND key = ?";
    await store.db.run(copy, [v1.id, "STOLEN", v1.id, "API_KEY"]);
    await store.db.run(copy, [v2.id, "API_KEY", v1.id, "API_KEY"]);
    await expect(loadCredential(store, key, v1.id, "STOLEN")).rejects.toBeInstanceOf(DecryptError);
    await expect(loadCredential(store, key, v2.id, "API_KEY")).rejects.toBeInstanceOf(DecryptError);
  });

  test("key names follow the UPPER_SNAKE pattern", () => {
    for (const ok of ["API_KEY", "A", "TOKEN_2"]) expect(CREDENTIAL_KEY_PATTERN.test(ok)).toBe(true);
    for (const bad of ["api_key", "1KEY", "_KEY", "API-KEY", ""]) expect(CREDENTIAL_KEY_PATTERN.test(bad)).toBe(false);
  });
});
