// The broker's root CA (ECDSA P-256, CA constraints, 5-year lifetime): created on first start,
// its private key sealed with the data key, the certificate public. Leaf certificates for
// intercepted hosts are signed by it (tunnel/leaf.ts).

import "reflect-metadata"; // @peculiar/x509 needs it loaded first (tests import this module directly)
import * as x509 from "@peculiar/x509";
import type { Store } from "../store/index.ts";
import { encodeAad, open, randomBytes, seal } from "./aead.ts";

export const EC_ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const CA_LIFETIME_MS = 5 * 365 * 86_400_000;
const KEY_AAD = encodeAad("broker", "ca-key", 1);

x509.cryptoProvider.set(crypto);

export interface RootCa {
  readonly certPem: string;
  readonly cert: x509.X509Certificate;
  /** Non-extractable signing key. */
  readonly key: CryptoKey;
  readonly notAfter: number;
}

export function randomSerial(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // positive
  bytes[0] = bytes[0]! | 0x01; // and no leading zero byte
  return Buffer.from(bytes).toString("hex");
}

async function createCa(store: Store, dataKey: CryptoKey, now: number): Promise<void> {
  const keys = await crypto.subtle.generateKey(EC_ALG, true, ["sign", "verify"]);
  const notAfter = now + CA_LIFETIME_MS;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: `CN=broker root CA ${new Date(now).toISOString().slice(0, 10)}, O=broker`,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(notAfter),
    keys,
    signingAlgorithm: EC_ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const pkcs8 = new Uint8Array(await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  const sealed = await seal(dataKey, pkcs8, KEY_AAD);
  pkcs8.fill(0);
  await store.ca.insert({ certPem: cert.toString("pem"), keyNonce: sealed.nonce, keyCiphertext: sealed.ciphertext, createdAt: now, notAfter });
}

/** The active root CA, as the server holds it: rotation swaps it and empties the leaf cache. */
export interface CaHolder {
  readonly current: RootCa;
  rotate(): Promise<RootCa>;
}

/** Loads the active CA, creating one on first start (or when the active one is near its end). */
export async function loadRootCa(store: Store, dataKey: CryptoKey, now = Date.now()): Promise<RootCa> {
  let row = await store.ca.active();
  if (!row || row.notAfter - now < 30 * 86_400_000) {
    await createCa(store, dataKey, now);
    row = (await store.ca.active())!;
  }
  const pkcs8 = await open(dataKey, { nonce: row.keyNonce, ciphertext: row.keyCiphertext }, KEY_AAD);
  const key = await crypto.subtle.importKey("pkcs8", pkcs8 as BufferSource, EC_ALG, false, ["sign"]);
  pkcs8.fill(0);
  return { certPem: row.certPem, cert: new x509.X509Certificate(row.certPem), key, notAfter: row.notAfter };
}

/** Replaces the CA with a fresh one; clients must trust the new certificate. */
export async function rotateRootCa(store: Store, dataKey: CryptoKey, now = Date.now()): Promise<RootCa> {
  await createCa(store, dataKey, now);
  return loadRootCa(store, dataKey, now);
}
