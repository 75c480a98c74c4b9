// A secret store connection's auth secrets at rest (issue 36): one JSON object of text fields (a token, a
// role id and secret id, access keys, a service-account key, a client secret) sealed with the data key,
// the additional data naming the connection and its kind, so a ciphertext copied to another connection
// fails to open.

import { Secret } from "../secret.ts";
import { encodeAad, open, seal, type Sealed } from "./aead.ts";

function storeSecretsAad(name: string, kind: string): Uint8Array {
  return encodeAad("broker", "secret-store", 1, name, kind);
}

/** SECRET in: each field's value; out: nonce and ciphertext only. */
export async function sealStoreSecrets(dataKey: CryptoKey, name: string, kind: string, secrets: Readonly<Record<string, Secret>>): Promise<Sealed> {
  // reveal: straight into AES-GCM
  const plain = JSON.stringify(Object.fromEntries(Object.entries(secrets).map(([k, v]) => [k, v.reveal()])));
  return seal(dataKey, new TextEncoder().encode(plain), storeSecretsAad(name, kind));
}

/** SECRET: each field's value, wrapped. Rejects (DecryptError) when the row was not sealed for this connection. */
export async function openStoreSecrets(dataKey: CryptoKey, name: string, kind: string, sealed: Sealed): Promise<Record<string, Secret>> {
  const plain = JSON.parse(new TextDecoder().decode(await open(dataKey, sealed, storeSecretsAad(name, kind)))) as Record<string, unknown>;
  const out: Record<string, Secret> = {};
  for (const [k, v] of Object.entries(plain)) if (typeof v === "string") out[k] = new Secret(v);
  return out;
}
