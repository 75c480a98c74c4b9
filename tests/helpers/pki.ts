// Test PKI: a throwaway CA and a server certificate for 127.0.0.1 / localhost, made with
// @peculiar/x509 and WebCrypto, so HTTPS upstreams in tests are verified for real.

import "reflect-metadata";
import * as x509 from "@peculiar/x509";

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;

export interface TestPki {
  readonly caPem: string;
  readonly certPem: string;
  readonly keyPem: string;
}

function pem(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

export async function createTestPki(names: { dns?: string[]; ips?: string[] } = {}): Promise<TestPki> {
  x509.cryptoProvider.set(crypto);
  const now = Date.now();
  const caKeys = await crypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    // A name of its own per CA: BoringSSL looks a root up by subject, and two test CAs of one name
    // trusted together (two upstreams in one test) made it check against the wrong key.
    name: `CN=broker test CA ${crypto.randomUUID().slice(0, 8)}`,
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
  const san = [
    ...(names.dns ?? ["localhost", "upstream.test"]).map((value) => ({ type: "dns" as const, value })),
    ...(names.ips ?? ["127.0.0.1"]).map((value) => ({ type: "ip" as const, value })),
  ];
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: "02",
    subject: "CN=localhost",
    issuer: ca.subject,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 86_400_000),
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [new x509.SubjectAlternativeNameExtension(san), new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth])],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", leafKeys.privateKey);
  return { caPem: ca.toString("pem"), certPem: leaf.toString("pem"), keyPem: pem("PRIVATE KEY", pkcs8) };
}
