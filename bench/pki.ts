// Bench PKI: a throwaway CA and a server certificate for the local upstream (DNS localhost and IP
// 127.0.0.1), so every client in the bench verifies certificates for real. Same approach as the
// test PKI (ECDSA P-256 via @peculiar/x509 + WebCrypto), kept separate: bench never imports tests/.

import "reflect-metadata";
import * as x509 from "@peculiar/x509";

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface BenchPki {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

export async function createBenchPki(): Promise<BenchPki> {
  x509.cryptoProvider.set(crypto);
  const now = Date.now();
  const caKeys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=broker bench upstream CA",
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 86_400_000),
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const leafKeys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: "CN=localhost",
    issuer: ca.subject,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 86_400_000),
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: "localhost" },
        { type: "ip", value: "127.0.0.1" },
      ]),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", leafKeys.privateKey);
  return { caPem: ca.toString("pem"), certPem: leaf.toString("pem"), keyPem: pem("PRIVATE KEY", pkcs8) };
}
