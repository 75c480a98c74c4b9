// Leaf certificates for intercepted hosts: minted per CONNECT authority (DNS or IP SAN, serverAuth,
// 7-day validity back-dated a day for clock skew), signed by the root CA, turned into a TLS
// secure context, and kept in a bounded LRU cache that shares one mint between concurrent asks.

import "reflect-metadata"; // @peculiar/x509 needs it loaded first (tests import this module directly)
import { createSecureContext, type SecureContext } from "node:tls";
import * as x509 from "@peculiar/x509";
import ipaddr from "ipaddr.js";
import { EC_ALG, randomSerial, type RootCa } from "./ca.ts";

const LEAF_LIFETIME_MS = 7 * 86_400_000;
const RENEW_BEFORE_MS = 86_400_000;

export interface Leaf {
  readonly context: SecureContext;
  readonly certPem: string;
  readonly notAfter: number;
}

function pemOf(label: string, der: ArrayBuffer): string {
  const b64 = Buffer.from(der).toString("base64").replace(/.{64}/g, "$&\n");
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** Mints a leaf for `host` (a DNS name or an IP literal, already validated). */
export async function mintLeaf(ca: RootCa, host: string, now = Date.now()): Promise<Leaf> {
  const keys = await crypto.subtle.generateKey(EC_ALG, true, ["sign", "verify"]);
  const isIp = ipaddr.isValid(host);
  const notAfter = Math.min(now + LEAF_LIFETIME_MS, ca.notAfter);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: isIp ? "CN=broker leaf" : `CN=${host}`,
    issuer: ca.cert.subject,
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(notAfter),
    publicKey: keys.publicKey,
    signingKey: ca.key,
    signingAlgorithm: EC_ALG,
    extensions: [
      new x509.SubjectAlternativeNameExtension([isIp ? { type: "ip", value: host } : { type: "dns", value: host }]),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.BasicConstraintsExtension(false, undefined, true),
    ],
  });
  const keyPem = pemOf("PRIVATE KEY", await crypto.subtle.exportKey("pkcs8", keys.privateKey));
  const certPem = cert.toString("pem");
  return { context: createSecureContext({ key: keyPem, cert: `${certPem}\n${ca.certPem}` }), certPem, notAfter };
}

export interface LeafCache {
  get(host: string): Promise<Leaf>;
  clear(): void;
  readonly size: number;
}

export interface LeafCacheOptions {
  readonly max: number;
  readonly now: () => number;
  /** Told whether each ask was answered from the cache or started a mint (metrics). */
  readonly onLookup?: (outcome: "hit" | "mint") => void;
}

export function createLeafCache(mint: (host: string) => Promise<Leaf>, opts: LeafCacheOptions): LeafCache {
  const entries = new Map<string, Promise<Leaf>>(); // insertion order doubles as LRU order
  return {
    async get(host) {
      const hit = entries.get(host);
      if (hit) {
        const leaf = await hit.catch(() => undefined);
        if (leaf && leaf.notAfter - opts.now() > RENEW_BEFORE_MS) {
          entries.delete(host);
          entries.set(host, hit);
          opts.onLookup?.("hit");
          return leaf;
        }
        if (entries.get(host) !== hit) return this.get(host);
      }
      opts.onLookup?.("mint");
      const pending = mint(host);
      pending.catch(() => entries.delete(host)); // a failed mint must not be cached
      entries.delete(host);
      entries.set(host, pending);
      while (entries.size > opts.max) entries.delete(entries.keys().next().value!);
      return pending;
    },
    clear() {
      entries.clear();
    },
    get size() {
      return entries.size;
    },
  };
}
