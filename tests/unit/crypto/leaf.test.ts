// Leaf certificates for intercepted hosts (mintLeaf) and their bounded LRU cache (createLeafCache).

import "reflect-metadata";
import { describe, expect, test } from "bun:test";
import * as x509 from "@peculiar/x509";
import { EC_ALG, type RootCa } from "../../../src/crypto/ca.ts";
import { createLeafCache, mintLeaf, type Leaf } from "../../../src/crypto/leaf.ts";

x509.cryptoProvider.set(crypto);

async function testCa(now = Date.now()): Promise<RootCa> {
  const keys = await crypto.subtle.generateKey(EC_ALG, true, ["sign", "verify"]);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: "01",
    name: "CN=leaf test CA",
    notBefore: new Date(now - 86_400_000),
    notAfter: new Date(now + 365 * 86_400_000),
    keys,
    signingAlgorithm: EC_ALG,
    extensions: [new x509.BasicConstraintsExtension(true, 0, true), new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign, true)],
  });
  return { certPem: cert.toString("pem"), cert, key: keys.privateKey, notAfter: now + 365 * 86_400_000 };
}

const caPromise = testCa();

describe("mintLeaf", () => {
  test("DNS host: SAN dns, serverAuth, not a CA, back-dated, signed by the CA", async () => {
    const ca = await caPromise;
    const now = Date.now();
    const leaf = await mintLeaf(ca, "api.example.com", now);
    const cert = new x509.X509Certificate(leaf.certPem);
    const san = cert.getExtension(x509.SubjectAlternativeNameExtension)!;
    expect(san.names.toJSON()).toEqual([{ type: "dns", value: "api.example.com" }]);
    const eku = cert.getExtension(x509.ExtendedKeyUsageExtension)!;
    expect(eku.usages).toEqual([x509.ExtendedKeyUsage.serverAuth]);
    const bc = cert.getExtension(x509.BasicConstraintsExtension)!;
    expect(bc.ca).toBe(false);
    expect(cert.notBefore.getTime()).toBeLessThan(now - 3600_000); // back-dated for clock skew
    expect(Math.abs(cert.notAfter.getTime() - leaf.notAfter)).toBeLessThan(1000); // certificates carry whole seconds
    expect(cert.notAfter.getTime()).toBeGreaterThan(now);
    expect(cert.notAfter.getTime()).toBeLessThanOrEqual(now + 30 * 86_400_000); // short-lived
    expect(cert.issuer).toBe(ca.cert.subject);
    expect(await cert.verify({ publicKey: ca.cert.publicKey, signatureOnly: true })).toBe(true);
    expect(leaf.context).toBeDefined();
  });

  test("IP host: SAN ip, and the signature does not verify under another CA", async () => {
    const ca = await caPromise;
    const leaf = await mintLeaf(ca, "127.0.0.2");
    const cert = new x509.X509Certificate(leaf.certPem);
    expect(cert.getExtension(x509.SubjectAlternativeNameExtension)!.names.toJSON()).toEqual([{ type: "ip", value: "127.0.0.2" }]);
    expect(await cert.verify({ publicKey: ca.cert.publicKey })).toBe(true);
    const other = await testCa();
    expect(await cert.verify({ publicKey: other.cert.publicKey, signatureOnly: true })).toBe(false);
  });

  test("IPv6 host gets an ip SAN", async () => {
    const leaf = await mintLeaf(await caPromise, "::1");
    const names = new x509.X509Certificate(leaf.certPem).getExtension(x509.SubjectAlternativeNameExtension)!.names.toJSON();
    expect(names).toHaveLength(1);
    expect(names[0]!.type).toBe("ip");
  });

  test("a leaf never outlives its CA", async () => {
    const now = Date.now();
    const ca = { ...(await caPromise), notAfter: now + 3600_000 };
    const leaf = await mintLeaf(ca, "short.example", now);
    expect(leaf.notAfter).toBeLessThanOrEqual(ca.notAfter);
  });
});

describe("createLeafCache", () => {
  const fake = (host: string, notAfter: number): Leaf => ({ context: {} as Leaf["context"], certPem: host, notAfter });

  function counting(now: () => number, lifetime = 7 * 86_400_000) {
    const mints: string[] = [];
    const mint = async (host: string) => {
      mints.push(host);
      await Bun.sleep(5);
      return fake(host, now() + lifetime);
    };
    return { mints, mint };
  }

  test("same host twice → one mint", async () => {
    const { mints, mint } = counting(Date.now);
    const cache = createLeafCache(mint, { max: 10, now: Date.now });
    const a = await cache.get("a.example");
    const b = await cache.get("a.example");
    expect(a).toBe(b);
    expect(mints).toEqual(["a.example"]);
  });

  test("10 concurrent gets for one host → one mint", async () => {
    const { mints, mint } = counting(Date.now);
    const cache = createLeafCache(mint, { max: 10, now: Date.now });
    const leaves = await Promise.all(Array.from({ length: 10 }, () => cache.get("c.example")));
    expect(new Set(leaves).size).toBe(1);
    expect(mints).toEqual(["c.example"]);
  });

  test("LRU bound: max 3, a 4th host evicts the least recently used; a re-get mints again", async () => {
    const { mints, mint } = counting(Date.now);
    const cache = createLeafCache(mint, { max: 3, now: Date.now });
    await cache.get("h1");
    await cache.get("h2");
    await cache.get("h3");
    await cache.get("h1"); // h1 is now the most recent: h2 is the oldest
    await cache.get("h4");
    expect(cache.size).toBe(3);
    expect(mints).toEqual(["h1", "h2", "h3", "h4"]);
    await cache.get("h1");
    await cache.get("h3");
    await cache.get("h4");
    expect(mints).toHaveLength(4); // still cached
    await cache.get("h2");
    expect(mints).toEqual(["h1", "h2", "h3", "h4", "h2"]);
    expect(cache.size).toBe(3);
  });

  test("a failed mint is not cached: the next get mints again", async () => {
    let calls = 0;
    const cache = createLeafCache(
      async (host) => {
        calls++;
        if (calls === 1) throw new Error("mint failed");
        return fake(host, Date.now() + 7 * 86_400_000);
      },
      { max: 3, now: Date.now },
    );
    await expect(cache.get("f.example")).rejects.toThrow("mint failed");
    await Bun.sleep(1);
    expect(cache.size).toBe(0);
    const leaf = await cache.get("f.example");
    expect(leaf.certPem).toBe("f.example");
    expect(calls).toBe(2);
  });

  test("a leaf near its expiry is re-minted (movable clock)", async () => {
    let clock = 1_000_000_000_000;
    const now = () => clock;
    const { mints, mint } = counting(now);
    const cache = createLeafCache(mint, { max: 3, now });
    const first = await cache.get("e.example");
    clock += 3 * 86_400_000; // 4 days left: still good
    expect(await cache.get("e.example")).toBe(first);
    clock += 3.5 * 86_400_000; // half a day left: renewed
    const second = await cache.get("e.example");
    expect(second).not.toBe(first);
    expect(mints).toEqual(["e.example", "e.example"]);
    expect(cache.size).toBe(1);
  });

  test("clear() empties the cache (CA rotation)", async () => {
    const { mints, mint } = counting(Date.now);
    const cache = createLeafCache(mint, { max: 3, now: Date.now });
    await cache.get("r.example");
    cache.clear();
    expect(cache.size).toBe(0);
    await cache.get("r.example");
    expect(mints).toEqual(["r.example", "r.example"]);
  });
});
