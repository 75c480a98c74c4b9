// The data key: a random 256-bit AES key that encrypts every credential and the CA key.
// With a master password it is stored wrapped (AES-256-GCM under an Argon2id-derived key that is
// never stored); without one it is stored raw. Changing the password re-wraps this one key only:
// credential ciphertexts are never touched.

import { KeyringError } from "../errors.ts";
import { Secret, wipe } from "../secret.ts";
import type { KeyringRow, Store } from "../store/index.ts";
import { DecryptError, encodeAad, importAesKey, KEY_BYTES, open, randomBytes, seal } from "./aead.ts";
import { decodeParams, deriveKey, encodeParams, KDF_DEFAULTS, type KdfParams, SALT_BYTES } from "./kdf.ts";

export type KeyringMode = "plain" | "password";

export interface UnlockedKeyring {
  /** Non-extractable AES-GCM key: usable for encryption, impossible to print or export. */
  readonly dataKey: CryptoKey;
  readonly mode: KeyringMode;
  /** True when this call created the keyring. */
  readonly created: boolean;
  /** True when a master password was supplied but the store has none (it was not used). */
  readonly passwordUnused: boolean;
}

export interface KeyringDeps {
  readonly now?: () => number;
  readonly kdf?: KdfParams;
}

const WRAP_AAD = encodeAad("broker", "data-key", 1);

/** Opens the keyring, creating it on first use (wrapped when a password is given). */
export async function unlockKeyring(store: Store, password: Secret | undefined, deps: KeyringDeps = {}): Promise<UnlockedKeyring> {
  const now = deps.now ?? Date.now;
  let row = await store.keyring.get();
  let created = false;
  if (!row) {
    const raw = randomBytes(KEY_BYTES);
    const fresh = password ? await wrapDataKey(raw, password, deps.kdf ?? KDF_DEFAULTS) : ({ mode: "plain", dataKey: raw } as const);
    created = await store.keyring.create(fresh, now());
    wipe(raw);
    row = await store.keyring.get();
    if (!row) throw new Error("keyring could not be created");
  }
  const raw = await readDataKey(row, password);
  try {
    return { dataKey: await importAesKey(raw), mode: row.mode, created, passwordUnused: row.mode === "plain" && password !== undefined };
  } finally {
    wipe(raw);
  }
}

export async function keyringMode(store: Store): Promise<KeyringMode | undefined> {
  return (await store.keyring.get())?.mode;
}

export async function setMasterPassword(store: Store, next: Secret, deps: KeyringDeps = {}): Promise<void> {
  const row = await requireRow(store);
  if (row.mode === "password") {
    throw new KeyringError("a master password is already set", "use `broker master-password change` to replace it");
  }
  await rewrap(store, row, undefined, next, deps);
}

export async function changeMasterPassword(store: Store, current: Secret, next: Secret, deps: KeyringDeps = {}): Promise<void> {
  const row = await requireRow(store);
  if (row.mode === "plain") {
    throw new KeyringError("no master password is set", "use `broker master-password set` to add one");
  }
  await rewrap(store, row, current, next, deps);
}

export async function removeMasterPassword(store: Store, current: Secret, deps: KeyringDeps = {}): Promise<void> {
  const row = await requireRow(store);
  if (row.mode === "plain") throw new KeyringError("no master password is set", "nothing to remove");
  await rewrap(store, row, current, undefined, deps);
}

async function rewrap(store: Store, row: KeyringRow, current: Secret | undefined, next: Secret | undefined, deps: KeyringDeps) {
  const raw = await readDataKey(row, current);
  try {
    // Derive outside the transaction (Argon2id takes a while); then replace only if nobody changed the row meanwhile.
    const replacement: KeyringRow = next ? await wrapDataKey(raw, next, deps.kdf ?? KDF_DEFAULTS) : { mode: "plain", dataKey: raw };
    await store.transaction(async (tx) => {
      const latest = await tx.keyring.get();
      if (!latest || !sameRow(latest, row)) {
        throw new KeyringError("the keyring changed while this command ran", "run the command again");
      }
      await tx.keyring.replace(replacement, (deps.now ?? Date.now)());
    });
  } finally {
    wipe(raw);
  }
}

async function readDataKey(row: KeyringRow, password: Secret | undefined): Promise<Uint8Array> {
  if (row.mode === "plain") return new Uint8Array(row.dataKey);
  if (!password) {
    throw new KeyringError(
      "the store is protected by a master password",
      "set BROKER_MASTER_PASSWORD (or BROKER_MASTER_PASSWORD_FILE), or start it on a terminal to be prompted",
    );
  }
  if (password.reveal().length === 0) throw new KeyringError("wrong master password", "check the password and try again");
  const kek = await deriveKek(password, row.kdfSalt, decodeParams(row.kdfParams));
  try {
    return await open(kek, { nonce: row.wrapNonce, ciphertext: row.wrappedKey }, WRAP_AAD);
  } catch (err) {
    if (err instanceof DecryptError) throw new KeyringError("wrong master password", "check the password and try again");
    throw err;
  }
}

async function wrapDataKey(raw: Uint8Array, password: Secret, params: KdfParams): Promise<KeyringRow> {
  if (password.reveal().length === 0) throw new KeyringError("the master password is empty", "choose a non-empty password");
  const salt = randomBytes(SALT_BYTES);
  const kek = await deriveKek(password, salt, params);
  const sealed = await seal(kek, raw, WRAP_AAD);
  return { mode: "password", wrappedKey: sealed.ciphertext, wrapNonce: sealed.nonce, kdfSalt: salt, kdfParams: encodeParams(params) };
}

async function deriveKek(password: Secret, salt: Uint8Array, params: KdfParams): Promise<CryptoKey> {
  const bytes = await deriveKey(password, salt, params);
  try {
    return await importAesKey(bytes);
  } finally {
    wipe(bytes);
  }
}

async function requireRow(store: Store): Promise<KeyringRow> {
  const row = await store.keyring.get();
  if (!row) {
    // No keyring yet: create a passwordless one, so `set` works on a fresh data directory.
    await unlockKeyring(store, undefined);
    return (await store.keyring.get())!;
  }
  return row;
}

function sameRow(a: KeyringRow, b: KeyringRow): boolean {
  if (a.mode !== b.mode) return false;
  if (a.mode === "plain" && b.mode === "plain") return Buffer.from(a.dataKey).equals(b.dataKey);
  if (a.mode === "password" && b.mode === "password") return Buffer.from(a.wrappedKey).equals(b.wrappedKey) && Buffer.from(a.wrapNonce).equals(b.wrapNonce);
  return false;
}
