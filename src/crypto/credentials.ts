// Credential values at rest: sealed with the data key, the additional data naming the vault id
// and key, so a ciphertext copied to another row (or vault) fails to decrypt.

import { Secret } from "../secret.ts";
import type { Store } from "../store/index.ts";
import { encodeAad, open, seal } from "./aead.ts";

export const CREDENTIAL_KEY_PATTERN = /^[A-Z][A-Z0-9_]*$/;

function credentialAad(vaultId: number, key: string): Uint8Array {
  return encodeAad("broker", "credential", 1, vaultId, key);
}

export async function encryptCredential(dataKey: CryptoKey, vaultId: number, key: string, value: Secret) {
  return seal(dataKey, new TextEncoder().encode(value.reveal()), credentialAad(vaultId, key)); // reveal: straight into AES-GCM
}

export async function decryptCredential(dataKey: CryptoKey, row: { vaultId: number; key: string; nonce: Uint8Array; ciphertext: Uint8Array }): Promise<Secret> {
  const plain = await open(dataKey, { nonce: row.nonce, ciphertext: row.ciphertext }, credentialAad(row.vaultId, row.key));
  return new Secret(new TextDecoder().decode(plain));
}

export async function storeCredential(store: Store, dataKey: CryptoKey, vaultId: number, key: string, value: Secret, now = Date.now()) {
  const sealed = await encryptCredential(dataKey, vaultId, key, value);
  await store.credentials.put({ vaultId, key, ...sealed }, now);
}

export async function loadCredential(store: Store, dataKey: CryptoKey, vaultId: number, key: string): Promise<Secret | undefined> {
  const row = await store.credentials.get(vaultId, key);
  return row && decryptCredential(dataKey, row);
}
