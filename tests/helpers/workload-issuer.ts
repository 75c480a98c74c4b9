// A workload token issuer for tests: signing keys made with jose, its JWKS and OIDC discovery document served over
// HTTPS on 127.0.0.1 under a throwaway CA (so the broker's trusting fetch verifies it for real), keys rotatable
// mid-test, and forgeries (`alg: none`, HS256 keyed with the public key's bytes) for the refusal tests.

import * as jose from "jose";
import { createTestPki, type TestPki } from "./pki.ts";

export interface TestIssuer {
  /** https://127.0.0.1:<port>: the `iss` its tokens carry. */
  readonly url: string;
  readonly jwksUrl: string;
  readonly pki: TestPki;
  /** How many times the JWKS was fetched. */
  jwksFetches(): number;
  /** The JWKS document it serves now (public keys only), as an owner would save it to a file. */
  keySet(): jose.JSONWebKeySet;
  /** Signs `claims` (iss added) with the current key; `now` in ms sets iat/exp (default: now, 10 minutes). */
  sign(claims: Record<string, unknown>, opts?: { now?: number; ttlSec?: number; kid?: string; noExp?: boolean; alg?: string }): Promise<string>;
  /** A new key: tokens are signed with it from now on; `keepOld` serves the previous one too. */
  rotate(opts?: { keepOld?: boolean; publish?: boolean }): Promise<void>;
  /** Publishes the keys made but not yet served (a rotation whose JWKS update lags). */
  publish(): void;
  /** An unsigned token (`alg: none`). */
  unsigned(claims: Record<string, unknown>, now?: number): string;
  /** HS256 signed with the current public key's PEM bytes as the HMAC secret: the classic key-confusion forgery. */
  hmacForgery(claims: Record<string, unknown>, now?: number): Promise<string>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

interface Key {
  kid: string;
  priv: CryptoKey;
  pub: CryptoKey;
  jwk: jose.JWK;
}

async function makeKey(alg: string): Promise<Key> {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true });
  const jwk = await jose.exportJWK(publicKey);
  const kid = crypto.randomUUID();
  return { kid, priv: privateKey, pub: publicKey, jwk: { ...jwk, kid, alg, use: "sig" } };
}

/** `pki`: serve under an existing test CA (an upstream's, which a broker under test already trusts). */
export async function startTestIssuer(opts: { alg?: string; pki?: TestPki } = {}): Promise<TestIssuer> {
  const alg = opts.alg ?? "RS256";
  const pki = opts.pki ?? (await createTestPki({ ips: ["127.0.0.1"] }));
  let current = await makeKey(alg);
  let served: Key[] = [current];
  let pending: Key[] = [current];
  let fetches = 0;
  let url = "";
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/.well-known/openid-configuration") return Response.json({ issuer: url, jwks_uri: `${url}/jwks` });
      if (path === "/jwks") {
        fetches++;
        return Response.json({ keys: served.map((k) => k.jwk) });
      }
      return new Response("not found", { status: 404 });
    },
  });
  url = `https://127.0.0.1:${server.port}`;
  const times = (now: number | undefined, ttlSec: number) => {
    const iat = Math.floor((now ?? Date.now()) / 1000);
    return { iat, exp: iat + ttlSec };
  };
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const close = async () => void server.stop(true);
  return {
    url,
    jwksUrl: `${url}/jwks`,
    pki,
    jwksFetches: () => fetches,
    keySet: () => ({ keys: served.map((k) => k.jwk) }),
    async sign(claims, o = {}) {
      const t = times(o.now, o.ttlSec ?? 600);
      const body = { iss: url, iat: t.iat, ...(o.noExp ? {} : { exp: t.exp }), ...claims };
      return new jose.SignJWT(body).setProtectedHeader({ alg: o.alg ?? alg, kid: o.kid ?? current.kid, typ: "JWT" }).sign(current.priv);
    },
    async rotate(o = {}) {
      const old = current;
      current = await makeKey(alg);
      pending = o.keepOld ? [current, old] : [current];
      if (o.publish !== false) served = pending;
    },
    publish() {
      served = pending;
    },
    unsigned(claims, now) {
      const t = times(now, 600);
      return `${b64({ alg: "none", typ: "JWT" })}.${b64({ iss: url, ...t, ...claims })}.`;
    },
    async hmacForgery(claims, now) {
      const t = times(now, 600);
      const spki = await jose.exportSPKI(current.pub);
      return new jose.SignJWT({ iss: url, ...t, ...claims })
        .setProtectedHeader({ alg: "HS256", kid: current.kid, typ: "JWT" })
        .sign(new TextEncoder().encode(spki));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
