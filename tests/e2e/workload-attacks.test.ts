// Attacks on workload identity (issue 39, docs/architecture.md D27): forged and malformed platform tokens, audience
// and time tricks, jti replay, claim-condition bypasses, binding selection, renewal abuse, denial of service, leaks
// and privilege. Each test names the attack and would fail without its defence. The one hole this round found (a
// failing OIDC discovery fetched again on every anonymous exchange) is closed: one discovery at a time per issuer, a
// failure answered from memory for the JWKS cooldown.
// The issuer here is our own: its JWKS served over HTTPS on 127.0.0.1 under the upstream test CA the broker trusts,
// so the test can sign any header and payload with a key the broker really trusts.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as jose from "jose";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

const GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";
const AUD = "https://broker.example";

interface OwnIssuer {
  url: string;
  jwksUrl: string;
  fetches: Record<string, number>;
  kid: string;
  priv: CryptoKey;
  pubJwk: jose.JWK;
  /** Signs any protected header and payload with the trusted key. */
  raw(header: Record<string, unknown>, payload: Record<string, unknown>): Promise<string>;
  sign(claims: Record<string, unknown>, o?: { ttlSec?: number; noExp?: boolean; header?: Record<string, unknown> }): Promise<string>;
  close(): void;
}

async function ownIssuer(upstream: TestUpstream, opts: { iss?: (url: string) => string } = {}): Promise<OwnIssuer> {
  const { privateKey, publicKey } = await jose.generateKeyPair("RS256", { extractable: true });
  const attacker = await jose.generateKeyPair("RS256", { extractable: true });
  const kid = crypto.randomUUID();
  const pubJwk = { ...(await jose.exportJWK(publicKey)), kid, alg: "RS256", use: "sig" };
  const attackerJwk = { ...(await jose.exportJWK(attacker.publicKey)), kid: "attacker", alg: "RS256", use: "sig" };
  const fetches: Record<string, number> = {};
  let url = "";
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: upstream.pki.certPem, key: upstream.pki.keyPem },
    fetch(req) {
      const path = new URL(req.url).pathname;
      fetches[path] = (fetches[path] ?? 0) + 1;
      if (path === "/.well-known/openid-configuration") return Response.json({ issuer: iss, jwks_uri: `${url}/jwks` });
      if (path === "/jwks") return Response.json({ keys: [pubJwk] });
      if (path === "/evil-jwks") return Response.json({ keys: [attackerJwk] });
      return new Response("not found", { status: 404 });
    },
  });
  url = `https://127.0.0.1:${server.port}`;
  const iss = opts.iss ? opts.iss(url) : url;
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const raw = async (header: Record<string, unknown>, payload: Record<string, unknown>) => {
    const input = `${b64(header)}.${b64(payload)}`;
    const sig = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", privateKey, new TextEncoder().encode(input));
    return `${input}.${Buffer.from(sig).toString("base64url")}`;
  };
  return {
    url: iss,
    jwksUrl: `${url}/jwks`,
    fetches,
    kid,
    priv: privateKey,
    pubJwk,
    raw,
    async sign(claims, o = {}) {
      const iat = Math.floor(Date.now() / 1000);
      const body = { iss, iat, ...(o.noExp ? {} : { exp: iat + (o.ttlSec ?? 600) }), ...claims };
      return raw({ alg: "RS256", kid, typ: "JWT", ...o.header }, body);
    },
    close: () => void server.stop(true),
    // exported for the embedded-key forgery
    ...{ attackerPriv: attacker.privateKey, attackerJwk },
  } as OwnIssuer & { attackerPriv: CryptoKey; attackerJwk: jose.JWK };
}

let upstream: TestUpstream;
let broker: Broker;
let iss: OwnIssuer & { attackerPriv: CryptoKey; attackerJwk: jose.JWK };
let other: OwnIssuer; // a second issuer row with the same `iss` but other keys
const tokens: string[] = [];
const responses: string[] = [];

const gh = (over: Record<string, unknown> = {}) => ({
  aud: AUD,
  sub: "repo:org/repo:ref:refs/heads/main",
  repository: "org/repo",
  ref: "refs/heads/main",
  jti: crypto.randomUUID(),
  ...over,
});

async function exchange(token: string, bearer?: string, form = false) {
  tokens.push(token);
  const headers: Record<string, string> = {};
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  const fields = { grant_type: GRANT, subject_token: token, subject_token_type: JWT_TYPE };
  let body: string;
  if (form) {
    headers["content-type"] = "application/x-www-form-urlencoded";
    body = new URLSearchParams(fields).toString();
  } else {
    headers["content-type"] = "application/json";
    body = JSON.stringify(fields);
  }
  const res = await fetch(`${broker.apiUrl}/v1/sessions/exchange`, { method: "POST", headers, body });
  const text = await res.text();
  responses.push(text);
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed };
}

async function refused(token: string, words?: RegExp) {
  const r = await exchange(token);
  expect(r.status).toBe(400);
  expect(r.body?.error?.code ?? r.body?.error).toBeDefined();
  if (words) expect(JSON.stringify(r.body)).toMatch(words);
  return r;
}

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { ips: ["127.0.0.1"] } });
  iss = (await ownIssuer(upstream)) as typeof iss;
  broker = await startBroker({ caPem: upstream.pki.caPem });
  const owner = broker.userToken;
  const must = async (m: string, p: string, b: unknown, status = 201) => {
    const r = await broker.api(m, p, b, owner);
    if (r.status !== status) throw new Error(`${m} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  };
  await must("POST", "/v1/vaults", { name: "prod" });
  await must("POST", "/v1/workload-issuers", { name: "gh", issuer: iss.url, jwks_url: iss.jwksUrl, audiences: [AUD], clock_skew_seconds: 0 });
  // Tried in order: deploy (exact), then wide (a glob), then prod (admin of another vault) for one repository.
  await must("POST", "/v1/workload-issuers/gh/bindings", {
    name: "deploy",
    vault: broker.vault,
    conditions: { repository: "org/repo", ref: "refs/heads/main" },
    max_session_seconds: 120,
  });
  await must("POST", "/v1/workload-issuers/gh/bindings", { name: "wide", vault: broker.vault, conditions: { sub: "repo:org/*" } });
  await must("POST", "/v1/workload-issuers/gh/bindings", { name: "prod", vault: "prod", role: "admin", conditions: { repository: "org/prod-only" } });
  // Same `iss`, other keys, its own binding into prod: a token signed by either key set must only reach its own bindings.
  other = await ownIssuer(upstream, { iss: () => iss.url });
  await must("POST", "/v1/workload-issuers", { name: "gh-other", issuer: iss.url, jwks_url: other.jwksUrl, audiences: [AUD], clock_skew_seconds: 0 });
  await must("POST", "/v1/workload-issuers/gh-other/bindings", { name: "x", vault: "prod", role: "admin", conditions: { repository: "other/*" } });
  await broker.setCredential("API_KEY", "sk_attack_secret_value");
}, 60_000);

afterAll(async () => {
  // No platform token (its signature) in any response body or log line.
  for (const t of tokens) {
    const sig = t.split(".")[2];
    if (!sig || sig.length < 16) continue;
    for (const r of responses) expect(r).not.toContain(sig);
    for (const l of broker.logLines) expect(l).not.toContain(sig);
  }
  await broker?.stop();
  iss?.close();
  other?.close();
  await upstream?.close();
});

describe("forged tokens", () => {
  test("control: a genuine token for deploy is exchanged", async () => {
    const r = await exchange(await iss.sign(gh()));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ vault: broker.vault, role: "proxy" });
  });

  test("alg none is refused", async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const now = Math.floor(Date.now() / 1000);
    await refused(`${b64({ alg: "none", typ: "JWT" })}.${b64({ iss: iss.url, iat: now, exp: now + 600, ...gh() })}.`, /algorithm/);
  });

  test("HS256 keyed with the public key (PEM and JWK bytes) is refused", async () => {
    const now = Math.floor(Date.now() / 1000);
    const pub = await jose.importJWK(iss.pubJwk, "RS256");
    const pem = await jose.exportSPKI(pub as CryptoKey);
    for (const secret of [pem, JSON.stringify(iss.pubJwk), iss.pubJwk.n!]) {
      const t = await new jose.SignJWT({ iss: iss.url, iat: now, exp: now + 600, ...gh() })
        .setProtectedHeader({ alg: "HS256", kid: iss.kid })
        .sign(new TextEncoder().encode(secret));
      await refused(t, /algorithm/);
    }
  });

  test("embedded keys (jwk, jku, x5u, x5c) are ignored: an attacker-signed token is refused and nothing is fetched", async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { iss: iss.url, iat: now, exp: now + 600, ...gh() };
    const before = iss.fetches["/evil-jwks"] ?? 0;
    const headers = [
      { alg: "RS256", kid: "attacker", jwk: iss.attackerJwk },
      { alg: "RS256", kid: "attacker", jku: `${iss.jwksUrl.replace("/jwks", "/evil-jwks")}` },
      { alg: "RS256", kid: "attacker", x5u: `${iss.jwksUrl.replace("/jwks", "/evil-jwks")}` },
      { alg: "RS256", jwk: iss.attackerJwk }, // no kid: jose tries the issuer's keys only
    ];
    for (const h of headers) {
      const t = await new jose.SignJWT(claims).setProtectedHeader(h as jose.JWTHeaderParameters).sign(iss.attackerPriv);
      await refused(t);
    }
    expect(iss.fetches["/evil-jwks"] ?? 0).toBe(before);
  });

  test("kid injection/traversal (the real key's kid with junk, '../', SQL) is refused", async () => {
    for (const kid of [`../${iss.kid}`, `${iss.kid}' OR '1'='1`, `${iss.kid}/../../jwks`, "", "\u0000"]) {
      await refused(await iss.sign(gh(), { header: { kid } }));
    }
  });

  test("a crit header naming an unknown extension is refused even with a valid signature", async () => {
    await refused(await iss.sign(gh(), { header: { crit: ["exp-extension"], "exp-extension": true } }));
    await refused(await iss.sign(gh(), { header: { b64: false, crit: ["b64"] } }));
  });

  test("iss with a trailing slash, a prefix or a different case is not trusted", async () => {
    for (const bad of [`${iss.url}/`, `${iss.url}/evil`, iss.url.toUpperCase(), `${iss.url}.evil.example`]) {
      await refused(await iss.sign(gh({ iss: bad })), /issuer/);
    }
  });

  test("a token signed by the other key set with the same iss reaches only its own issuer's bindings", async () => {
    // other's key, claims for gh's deploy binding: gh's keys refuse it, gh-other has no binding for org/repo.
    const t = await other.sign(gh());
    const r = await refused(t);
    expect(JSON.stringify(r.body)).not.toContain("proxy-e2e");
    // gh's key, claims for gh-other's prod-admin binding: verified by gh, whose bindings do not admit other/* →
    // refused (it never reaches gh-other's bindings).
    await refused(await iss.sign(gh({ repository: "other/thing", sub: "repo:other/thing:ref:refs/heads/main" })));
  });
});

describe("audience and time", () => {
  test("aud as an array holding an allowed one is accepted; empty, other or missing aud is refused", async () => {
    expect((await exchange(await iss.sign(gh({ aud: ["https://evil.example", AUD] })))).status).toBe(200);
    for (const aud of ["", [], ["https://evil.example"], `${AUD}/`, undefined]) {
      await refused(await iss.sign(gh({ aud })));
    }
  });

  test("exp missing, a string, negative or past is refused; nbf/iat in the future are refused", async () => {
    const now = Math.floor(Date.now() / 1000);
    await refused(await iss.sign(gh(), { noExp: true }));
    await refused(await iss.sign(gh({ exp: String(now + 600) })));
    await refused(await iss.sign(gh({ exp: -1 })));
    await refused(await iss.sign(gh({ exp: now - 5 })));
    await refused(await iss.sign(gh({ nbf: now + 120 })));
    await refused(await iss.sign(gh({ iat: now + 120 })));
    await refused(await iss.sign(gh({ iat: String(now) })));
    await refused(await iss.sign(gh({ sub: 42 })));
    await refused(await iss.sign(gh({ sub: "" })));
  });

  test("a huge exp is capped by the binding's max_session_seconds", async () => {
    const r = await exchange(await iss.sign(gh({ exp: 4_102_444_800 })));
    expect(r.status).toBe(200);
    expect(r.body.expires_in).toBeLessThanOrEqual(120);
  });

  test("a fractional exp does not break the exchange (no 500)", async () => {
    const now = Math.floor(Date.now() / 1000);
    const r = await exchange(await iss.sign(gh({ exp: now + 100.12345 })));
    expect(r.status).toBe(200);
  });
});

describe("jti replay", () => {
  test("the same jti in a different token (other claims, other signature) is refused", async () => {
    const jti = crypto.randomUUID();
    expect((await exchange(await iss.sign(gh({ jti })))).status).toBe(200);
    await refused(await iss.sign(gh({ jti, ttlMarker: 1 })), /jti/);
    await refused(await iss.sign(gh({ jti }), { ttlSec: 300 }), /jti/);
  });

  test("twenty concurrent exchanges of one token: exactly one session", async () => {
    const t = await iss.sign(gh());
    const all = await Promise.all(Array.from({ length: 20 }, () => exchange(t)));
    expect(all.filter((r) => r.status === 200).length).toBe(1);
    expect(all.filter((r) => r.status >= 500).length).toBe(0);
  });

  test("form-encoded and JSON bodies share the jti ledger", async () => {
    const t = await iss.sign(gh());
    expect((await exchange(t, undefined, true)).status).toBe(200);
    expect((await exchange(t)).status).toBe(400);
  });
});

describe("claim conditions and binding selection", () => {
  test("'repo:org/*' does not admit org-evil, a case change or a lookalike", async () => {
    for (const sub of ["repo:org-evil/x:ref:refs/heads/main", "repo:Org/x:ref:refs/heads/main", "repo:оrg/x:ref:refs/heads/main", "xrepo:org/x"]) {
      await refused(await iss.sign(gh({ sub, repository: "nope/nope" })), /no binding/);
    }
  });

  test("claims that are objects, or flat keys shadowing a path, do not satisfy an exact condition", async () => {
    await refused(await iss.sign(gh({ repository: { "": "org/repo" }, sub: "x" })), /no binding/);
    await refused(await iss.sign(gh({ repository: ["org/repo"], ref: { refs: "refs/heads/main" }, sub: "x" })), /no binding/);
  });

  test("a token for the deploy binding cannot pick the prod binding's vault", async () => {
    const r = await exchange(await iss.sign(gh()));
    expect(r.body).toMatchObject({ vault: broker.vault, role: "proxy" });
  });
});

describe("renewal", () => {
  async function session(over: Record<string, unknown> = {}) {
    const r = await exchange(await iss.sign(gh(over)));
    expect(r.status).toBe(200);
    return r.body.access_token as string;
  }

  test("another subject's token cannot extend this session", async () => {
    const s = await session();
    const r = await exchange(await iss.sign(gh({ sub: "repo:org/repo:ref:refs/heads/other" })), s);
    expect(r.status).toBe(400);
  });

  test("another binding's token cannot extend this session", async () => {
    const s = await session();
    // Same sub, but matches 'wide' (ref differs), another agent.
    const r = await exchange(await iss.sign(gh({ ref: "refs/heads/dev" })), s);
    expect(r.status).toBe(400);
  });

  test("the owner's own sessions are not renewable through the exchange", async () => {
    expect((await exchange(await iss.sign(gh()), broker.sessionToken)).status).toBe(400);
    expect((await exchange(await iss.sign(gh()), broker.userToken)).status).toBe(400);
  });

  test("a revoked workload session cannot be renewed", async () => {
    const s = await session();
    const list = await broker.api("GET", `/v1/sessions?vault=${broker.vault}`, undefined, s);
    const id = list.body?.sessions?.[0]?.id;
    expect(id).toBeDefined();
    expect((await broker.api("DELETE", `/v1/sessions/${id}`, undefined, s)).status).toBeLessThan(300);
    const r = await exchange(await iss.sign(gh()), s);
    expect(r.status).toBe(401);
  });

  test("renewal never exceeds the binding's cap from now", async () => {
    const s = await session();
    const r = await exchange(await iss.sign(gh({ exp: 4_102_444_800 })), s);
    expect(r.status).toBe(200);
    expect(r.body.access_token).toBe(s);
    expect(r.body.expires_in).toBeLessThanOrEqual(120);
  });

  test("a refused renewal does not burn the token's jti", async () => {
    const jti = crypto.randomUUID();
    const t = await iss.sign(gh({ jti }));
    expect((await exchange(t, broker.sessionToken)).status).toBe(400);
    expect((await exchange(t)).status).toBe(200);
  });
});

describe("privilege of a workload session", () => {
  let s = "";
  beforeAll(async () => {
    const r = await exchange(await iss.sign(gh()));
    s = r.body.access_token;
  });

  test("cannot mint sessions, manage issuers or bindings, read values, or create vaults", async () => {
    expect((await broker.api("POST", "/v1/sessions", { vault: broker.vault, role: "proxy" }, s)).status).toBe(403);
    expect((await broker.api("GET", "/v1/workload-issuers", undefined, s)).status).toBe(403);
    expect((await broker.api("POST", "/v1/workload-issuers", { name: "evil", issuer: "https://evil.example", audiences: ["x"] }, s)).status).toBe(403);
    expect((await broker.api("POST", "/v1/workload-issuers/gh/bindings", { name: "e", vault: "prod", conditions: { sub: "*" } }, s)).status).toBe(403);
    expect((await broker.api("DELETE", "/v1/workload-issuers/gh", undefined, s)).status).toBe(403);
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials/API_KEY`, undefined, s)).status).toBe(403);
    const reveal = await broker.api("GET", `/v1/vaults/${broker.vault}/credentials?reveal=true`, undefined, s);
    expect(JSON.stringify(reveal.body)).not.toContain("sk_attack_secret_value");
    expect((await broker.api("POST", "/v1/vaults", { name: "wl-made" }, s)).status).toBe(403);
    expect((await broker.api("GET", "/v1/vaults/prod/credentials", undefined, s)).status).toBe(403);
  });

  test("the owner's scoped session cannot manage issuers", async () => {
    expect((await broker.api("GET", "/v1/workload-issuers", undefined, broker.sessionToken)).status).toBe(403);
    expect(
      (await broker.api("POST", "/v1/workload-issuers", { name: "e2", issuer: "https://evil.example", audiences: ["x"] }, broker.sessionToken)).status,
    ).toBe(403);
  });
});

describe("denial of service and leaks", () => {
  test("a stream of made-up kids fetches the JWKS at most once more", async () => {
    const before = iss.fetches["/jwks"] ?? 0;
    await Promise.all(Array.from({ length: 30 }, async () => refused(await iss.sign(gh(), { header: { kid: crypto.randomUUID() } }))));
    expect((iss.fetches["/jwks"] ?? 0) - before).toBeLessThanOrEqual(1);
  });

  test("oversized, malformed and deeply nested tokens are 400s, never 500s", async () => {
    const big = await iss.sign(gh({ pad: "x".repeat(20_000) }));
    expect((await exchange(big)).status).toBeGreaterThanOrEqual(400);
    expect((await exchange(big)).status).toBeLessThan(500);
    let nested: unknown = "x";
    for (let i = 0; i < 2000; i++) nested = [nested];
    const deep = await iss.sign(gh({ deep: nested }));
    const r = await exchange(deep);
    expect(r.status).toBeLessThan(500);
    for (const junk of ["a.b.c", "....", "e30.e30.e30", `${"A".repeat(100)}.${"B".repeat(100)}.`]) {
      const j = await exchange(junk);
      expect(j.status).toBe(400);
    }
  });

  test("an untrusted or unknown issuer costs no fetch", async () => {
    const before = JSON.stringify(iss.fetches);
    await refused(await iss.sign(gh({ iss: "https://127.0.0.1:1/unknown" })), /not trusted/);
    expect(JSON.stringify(iss.fetches)).toBe(before);
  });
});

describe("discovery and kill switches", () => {
  test("a failing OIDC discovery is not fetched again on every anonymous exchange (cooldown like the JWKS)", async () => {
    // An issuer configured without jwks_url whose discovery document is (temporarily) unavailable: each anonymous
    // exchange naming it should not become one outbound fetch (the JWKS path has a 30 s cooldown; discovery has none).
    const broken = await ownIssuer(upstream, { iss: (u) => `${u}/broken` });
    try {
      const add = await broker.api("POST", "/v1/workload-issuers", { name: "disc", issuer: broken.url, audiences: [AUD] }, broker.userToken);
      expect(add.status).toBe(201);
      for (let i = 0; i < 20; i++) await refused(await broken.sign(gh()));
      const fetches = broken.fetches["/broken/.well-known/openid-configuration"] ?? 0;
      expect(fetches, `20 anonymous exchanges made ${fetches} discovery fetches; expected at most 1 per cooldown`).toBeLessThanOrEqual(1);
    } finally {
      await broker.api("DELETE", "/v1/workload-issuers/disc", undefined, broker.userToken);
      broken.close();
    }
  });

  test("revoking the binding's agent ends its sessions and refuses new exchanges; re-adding restores", async () => {
    const owner = broker.userToken;
    expect(
      (await broker.api("POST", "/v1/workload-issuers/gh/bindings", { name: "kill", vault: broker.vault, conditions: { repository: "kill/me" } }, owner))
        .status,
    ).toBe(201);
    const claims = () => gh({ repository: "kill/me", sub: "kill" });
    const s = (await exchange(await iss.sign(claims()))).body.access_token;
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials`, undefined, s)).status).toBe(200);
    expect((await broker.api("DELETE", "/v1/agents/wl-gh-kill", undefined, owner)).status).toBe(204);
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials`, undefined, s)).status).toBe(401);
    await refused(await iss.sign(claims()), /revoked/);
    // renewal with the dead session is a 401, not a resurrection
    expect((await exchange(await iss.sign(claims()), s)).status).toBe(401);
    expect((await broker.api("DELETE", "/v1/workload-issuers/gh/bindings/kill", undefined, owner)).status).toBe(204);
  });

  test("removing a binding ends every session exchanged under it", async () => {
    const owner = broker.userToken;
    await broker.api("POST", "/v1/workload-issuers/gh/bindings", { name: "gone", vault: broker.vault, conditions: { repository: "gone/me" } }, owner);
    const s = (await exchange(await iss.sign(gh({ repository: "gone/me", sub: "gone" })))).body.access_token;
    expect((await broker.api("DELETE", "/v1/workload-issuers/gh/bindings/gone", undefined, owner)).status).toBe(204);
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}/credentials`, undefined, s)).status).toBe(401);
  });
});
