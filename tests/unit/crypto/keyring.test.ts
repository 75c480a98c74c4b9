// The keyring: passwordless and wrapped data keys, and master-password set/change/remove that
// re-wrap the data key only (credential rows stay byte-identical).

import { describe, expect, test } from "bun:test";
import { KeyringError } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { openMemoryStore, type Store } from "../../../src/store/index.ts";
import { loadCredential, storeCredential } from "../../../src/crypto/credentials.ts";
import { encodeParams, KDF_DEFAULTS, type KdfParams } from "../../../src/crypto/kdf.ts";
import { changeMasterPassword, keyringMode, removeMasterPassword, setMasterPassword, unlockKeyring } from "../../../src/crypto/keyring.ts";

// Cheap Argon2id so the suite stays fast; one test below uses the real defaults.
const CHEAP: KdfParams = { alg: "argon2id", iterations: 1, memoryKiB: 1024, parallelism: 1, hashLength: 32 };
const deps = { kdf: CHEAP, now: () => 1_700_000_000_000 };
const pw = (s: string) => new Secret(s);

interface RawKeyring {
  mode: string;
  data_key: Uint8Array | null;
  wrapped_key: Uint8Array | null;
  wrap_nonce: Uint8Array | null;
  kdf_salt: Uint8Array | null;
  kdf_params: string | null;
}
const readKeyring = (store: Store) => store.db.get<RawKeyring>("SELECT mode, data_key, wrapped_key, wrap_nonce, kdf_salt, kdf_params FROM keyring");

async function expectKeyringError(p: Promise<unknown>, message: string | RegExp): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(KeyringError);
  expect((err as KeyringError).message).toMatch(message);
  expect((err as KeyringError).hint.length).toBeGreaterThan(0);
}

describe("unlock", () => {
  test("first unlock without a password creates a passwordless keyring; the next one reuses it", async () => {
    using store = await openMemoryStore();
    expect(await keyringMode(store)).toBeUndefined();
    const first = await unlockKeyring(store, undefined, deps);
    expect(first).toMatchObject({ mode: "plain", created: true, passwordUnused: false });
    const row = await readKeyring(store);
    expect(row?.mode).toBe("plain");
    expect(row?.data_key?.byteLength).toBe(32);
    expect(row?.wrapped_key).toBeNull();
    await storeCredential(store, first.dataKey, (await store.vaults.create("v", 1)).id, "K", pw("value"));
    const second = await unlockKeyring(store, undefined, deps);
    expect(second.created).toBe(false);
    expect((await loadCredential(store, second.dataKey, 1, "K"))?.reveal()).toBe("value");
    expect(second.dataKey.extractable).toBe(false);
  });

  test("first unlock with a password creates a wrapped keyring with no raw data key stored", async () => {
    using store = await openMemoryStore();
    const k = await unlockKeyring(store, pw("correct horse"), deps);
    expect(k).toMatchObject({ mode: "password", created: true });
    const row = await readKeyring(store);
    expect(row?.mode).toBe("password");
    expect(row?.data_key).toBeNull();
    expect(row?.wrapped_key?.byteLength).toBe(48);
    expect(row?.wrap_nonce?.byteLength).toBe(12);
    expect(row?.kdf_salt?.byteLength).toBe(16);
    expect(row?.kdf_params).toBe(encodeParams(CHEAP));
  });

  test("a protected store needs its password, and the right one", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, pw("right"), deps);
    await expectKeyringError(unlockKeyring(store, undefined, deps), "protected by a master password");
    // `broker server` takes no --password-stdin: the hint names what it does read.
    const missing = (await unlockKeyring(store, undefined, deps).catch((e: unknown) => e)) as KeyringError;
    expect(missing.hint).toBe("set BROKER_MASTER_PASSWORD (or BROKER_MASTER_PASSWORD_FILE), or start it on a terminal to be prompted");
    await expectKeyringError(unlockKeyring(store, pw("wrong"), deps), "wrong master password");
    expect((await unlockKeyring(store, pw("right"), deps)).created).toBe(false);
  });

  // An empty password (Enter at the prompt of `master-password change`) is a wrong password, not a crash:
  // hash-wasm throws a plain Error for it, which the CLI does not turn into a helpful message.
  test("an empty password against a protected store is a KeyringError", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, pw("right"), deps);
    await expectKeyringError(unlockKeyring(store, pw(""), deps), "wrong master password");
    await expectKeyringError(changeMasterPassword(store, pw(""), pw("next-pass"), deps), "wrong master password");
  });

  test("a password given to a passwordless store is reported unused", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, undefined, deps);
    expect((await unlockKeyring(store, pw("whatever"), deps)).passwordUnused).toBe(true);
  });

  test("an empty password is rejected on create, set and change", async () => {
    using store = await openMemoryStore();
    await expectKeyringError(unlockKeyring(store, pw(""), deps), "empty");
    expect(await keyringMode(store)).toBeUndefined();
    await unlockKeyring(store, undefined, deps);
    await expectKeyringError(setMasterPassword(store, pw(""), deps), "empty");
    await setMasterPassword(store, pw("one"), deps);
    await expectKeyringError(changeMasterPassword(store, pw("one"), pw(""), deps), "empty");
  });

  test("the production KDF defaults are used and recorded when no kdf is injected", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, pw("default-params"));
    const row = await readKeyring(store);
    expect(JSON.parse(row!.kdf_params!)).toEqual({ alg: "argon2id", iterations: 3, memoryKiB: 65536, parallelism: 4, hashLength: 32 });
    expect(row!.kdf_params).toBe(encodeParams(KDF_DEFAULTS));
    expect((await unlockKeyring(store, pw("default-params"))).mode).toBe("password");
  });
});

describe("master password lifecycle", () => {
  const SECRETS: Record<string, string> = { API_KEY: "sk-aaaa", DB_URL: "postgres://u:p@h/db", TOKEN: "t0k3n" };
  const snapshot = async (store: Store) =>
    JSON.stringify(
      (
        await store.db.all<{ vault_id: number; key: string; nonce: Uint8Array; ciphertext: Uint8Array }>(
          "SELECT vault_id, key, nonce, ciphertext FROM credentials ORDER BY vault_id, key",
        )
      ).map((r) => [r.vault_id, r.key, Buffer.from(r.nonce).toString("hex"), Buffer.from(r.ciphertext).toString("hex")]),
    );
  const expectReadable = async (store: Store, password: Secret | undefined) => {
    const { dataKey } = await unlockKeyring(store, password, deps);
    for (const [k, v] of Object.entries(SECRETS)) expect((await loadCredential(store, dataKey, 1, k))?.reveal()).toBe(v);
  };

  test("set, change and remove re-wrap the data key only", async () => {
    using store = await openMemoryStore();
    const { dataKey } = await unlockKeyring(store, undefined, deps);
    const vault = await store.vaults.create("prod", 1);
    for (const [k, v] of Object.entries(SECRETS)) await storeCredential(store, dataKey, vault.id, k, pw(v));
    const before = await snapshot(store);
    const rawPlainKey = (await readKeyring(store))!.data_key!;

    await setMasterPassword(store, pw("first-pass"), deps);
    expect(await snapshot(store)).toBe(before);
    expect(await keyringMode(store)).toBe("password");
    const wrapped = await readKeyring(store);
    expect(wrapped?.data_key).toBeNull();
    expect(Buffer.from(wrapped!.wrapped_key!).includes(Buffer.from(rawPlainKey))).toBe(false);
    await expectReadable(store, pw("first-pass"));
    await expectKeyringError(unlockKeyring(store, undefined, deps), "protected by a master password");

    await changeMasterPassword(store, pw("first-pass"), pw("second-pass"), deps);
    expect(await snapshot(store)).toBe(before);
    await expectReadable(store, pw("second-pass"));
    await expectKeyringError(unlockKeyring(store, pw("first-pass"), deps), "wrong master password");
    await expectKeyringError(changeMasterPassword(store, pw("first-pass"), pw("third"), deps), "wrong master password");

    await removeMasterPassword(store, pw("second-pass"), deps);
    expect(await snapshot(store)).toBe(before);
    expect(await keyringMode(store)).toBe("plain");
    expect(Buffer.from((await readKeyring(store))!.data_key!).equals(Buffer.from(rawPlainKey))).toBe(true);
    await expectReadable(store, undefined);
    expect((await unlockKeyring(store, pw("second-pass"), deps)).passwordUnused).toBe(true);
    await expectKeyringError(removeMasterPassword(store, pw("second-pass"), deps), "no master password");
  });

  test("remove with a wrong password leaves the store protected", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, pw("keep-me"), deps);
    await expectKeyringError(removeMasterPassword(store, pw("nope"), deps), "wrong master password");
    expect(await keyringMode(store)).toBe("password");
  });

  test("set when a password is already set is refused", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, pw("already"), deps);
    await expectKeyringError(setMasterPassword(store, pw("another"), deps), "already set");
  });

  test("change and remove on a passwordless store are refused", async () => {
    using store = await openMemoryStore();
    await unlockKeyring(store, undefined, deps);
    await expectKeyringError(changeMasterPassword(store, pw("x"), pw("y"), deps), "no master password");
    await expectKeyringError(removeMasterPassword(store, pw("x"), deps), "no master password");
    expect(await keyringMode(store)).toBe("plain");
  });

  test("set on a fresh store creates the keyring first", async () => {
    using store = await openMemoryStore();
    await setMasterPassword(store, pw("fresh"), deps);
    expect(await keyringMode(store)).toBe("password");
    expect((await unlockKeyring(store, pw("fresh"), deps)).mode).toBe("password");
  });
});
