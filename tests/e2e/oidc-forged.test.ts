// Identity-provider sign-in (contract Authentication §10, issue 13) against a HOSTILE provider: every
// forged or replayed input is refused with the same generic 401 page and no session cookie, and the
// broker logs neither the code, the state nor the ID token. The provider is tests/helpers/fake-oidc.ts
// on 127.0.0.1 (http is allowed for loopback issuers); the broker runs in-process with a movable clock.
//
// Until the server side exists the suite skips locally (probe: GET /v1/auth/oidc → {"enabled": true});
// under CI=true it runs and fails instead, so CI cannot pass by skipping (architecture.md §8).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { startBroker, type Broker } from "./proxy-fixture.ts";
import { createTestPki } from "../helpers/pki.ts";
import { s256, startFakeOidc, type FakeOidc, type Scenario } from "../helpers/fake-oidc.ts";

const inCi = process.env.CI === "true";
const MIN = 60_000;

let offset = 0;
const now = () => Date.now() + offset;

const pki = await createTestPki();
const fake: FakeOidc = await startFakeOidc({ now });
const broker: Broker = await startBroker({ caPem: pki.caPem, env: fake.env, now });
const probe = await fetch(`${broker.apiUrl}/v1/auth/oidc`, { headers: { accept: "application/json" } });
const probeBody: any = await probe.json().catch(() => undefined);
const implemented = probe.status === 200 && probeBody?.enabled === true;
if (!implemented && !inCi) console.warn(`skipping OIDC forged-input tests: GET /v1/auth/oidc answered ${probe.status} (server side of issue 13 not there yet)`);

afterAll(async () => {
  await broker.stop();
  await fake.stop();
});

type Jar = Map<string, string>;

function absorb(jar: Jar, res: Response): void {
  for (const c of res.headers.getSetCookie()) {
    const pair = c.split(";")[0] ?? "";
    const i = pair.indexOf("=");
    const name = pair.slice(0, i).trim();
    const value = pair.slice(i + 1).trim();
    if (value === "" || /max-age=0\b/i.test(c)) jar.delete(name);
    else jar.set(name, value);
  }
}
const cookieHeader = (jar: Jar) => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");

/** The value of a non-empty session cookie the response sets, if any. */
function sessionCookie(res: Response): string | undefined {
  for (const c of res.headers.getSetCookie()) {
    const m = /^\s*([^=;]+)=([^;]*)/.exec(c);
    if (m?.[1] && m[2] && m[1].endsWith("broker_session") && !/max-age=0\b/i.test(c)) return m[2];
  }
  return undefined;
}

interface Flow {
  jar: Jar;
  /** The provider's authorization URL the broker redirected to. */
  authorize: URL;
  /** The broker callback URL the provider sent the browser back to. */
  callbackUrl: string;
  state: string;
  code: string | undefined;
}

/** Browser leg 1 and 2: broker login → provider /authorize → back to the callback (not yet followed). */
async function begin(returnTo = "/"): Promise<Flow> {
  const jar: Jar = new Map();
  const login = await fetch(`${broker.apiUrl}/v1/auth/oidc/login?return_to=${encodeURIComponent(returnTo)}`, { redirect: "manual" });
  absorb(jar, login);
  if (login.status !== 302) throw new Error(`login: expected 302, got ${login.status} ${await login.text()}`);
  const authorize = new URL(login.headers.get("location")!);
  expect(authorize.origin + authorize.pathname).toBe(`${fake.issuer}/authorize`);
  const atProvider = await fetch(authorize, { redirect: "manual" });
  expect(atProvider.status).toBe(302);
  const callbackUrl = atProvider.headers.get("location")!;
  const back = new URL(callbackUrl);
  return { jar, authorize, callbackUrl, state: back.searchParams.get("state") ?? "", code: back.searchParams.get("code") ?? undefined };
}

/** Browser leg 3: the callback, with the cookies the browser holds (or the ones given, for replays). */
async function callback(url: string, jar: Jar): Promise<Response> {
  const res = await fetch(url, { redirect: "manual", headers: jar.size ? { cookie: cookieHeader(jar) } : {} });
  return res;
}

let userSeq = 0;
function newUser(): { sub: string; email: string } {
  const u = { sub: `sub-${++userSeq}-${randomBytes(4).toString("hex")}`, email: `oidc-${userSeq}-${randomBytes(3).toString("hex")}@example.com` };
  fake.setUser(u);
  return u;
}

const refusalBodies: string[] = [];

/** 401 HTML, no session cookie, and none of the flow's secrets in the page or the broker's log. */
async function expectRefused(res: Response, flow: Flow): Promise<void> {
  const body = await res.text();
  expect({ status: res.status, type: res.headers.get("content-type")?.split(";")[0] }).toEqual({ status: 401, type: "text/html" });
  expect(sessionCookie(res)).toBeUndefined();
  refusalBodies.push(body);
  for (const s of secretsOf(flow)) expect(body.includes(s)).toBe(false);
  expectNotLogged(flow);
}

function secretsOf(flow: Flow): string[] {
  const out = [flow.state, flow.code ?? ""];
  const t = fake.tokenRequests.find((r) => r.params.code === flow.code);
  if (t) out.push(t.idToken ?? "", t.accessToken ?? "", t.refreshToken ?? "", t.params.code_verifier ?? "");
  return out.filter((s) => s.length >= 8);
}

function expectNotLogged(flow: Flow): void {
  for (const s of secretsOf(flow)) {
    const hit = broker.logLines.find((l) => l.includes(s));
    if (hit) throw new Error(`a sign-in secret is in the broker's log: ${hit.slice(0, 200)}`);
  }
}

async function refusedWith(scenario: Scenario): Promise<Flow> {
  newUser();
  fake.setScenario(scenario);
  try {
    const flow = await begin();
    await expectRefused(await callback(flow.callbackUrl, flow.jar), flow);
    return flow;
  } finally {
    fake.setScenario("good");
  }
}

async function signsIn(flow: Flow, email: string, returnPath = "/"): Promise<string> {
  const res = await callback(flow.callbackUrl, flow.jar);
  const text = await res.text();
  if (res.status !== 303) throw new Error(`callback: expected 303, got ${res.status} ${text.slice(0, 300)}`);
  const loc = new URL(res.headers.get("location")!, broker.apiUrl);
  expect(loc.origin).toBe(new URL(broker.apiUrl).origin);
  expect(loc.pathname).toBe(returnPath);
  const token = sessionCookie(res);
  expect(token).toBeString();
  const me = await broker.api("GET", "/v1/auth/whoami", undefined, token);
  expect(me.status).toBe(200);
  expect(me.body.kind).toBe("user");
  expect(me.body.user.email).toBe(email);
  expectNotLogged(flow);
  return token!;
}

describe.skipIf(!implemented && !inCi)("OIDC sign-in against a hostile provider", () => {
  beforeAll(() => {
    if (!implemented) throw new Error(`GET /v1/auth/oidc answered ${probe.status} ${JSON.stringify(probeBody)}: the server side of issue 13 is missing`);
  });

  test("a good ID token signs in: PKCE S256, 32-byte state, nonce, the verifier reaches the provider; the cookie is a working session", async () => {
    const u = newUser();
    const flow = await begin("/vaults");
    const p: Record<string, string> = Object.fromEntries(flow.authorize.searchParams);
    expect(p.response_type).toBe("code");
    expect(p.client_id).toBe(fake.clientId);
    expect(p.redirect_uri).toBe(`${broker.apiUrl}/v1/auth/oidc/callback`);
    expect((p.scope ?? "").split(" ")).toContain("openid");
    expect(p.code_challenge_method).toBe("S256");
    expect(p.code_challenge).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(p.state ?? "", "base64url").length).toBeGreaterThanOrEqual(32);
    expect(p.nonce?.length ?? 0).toBeGreaterThanOrEqual(16);
    expect(p.nonce).not.toBe(p.state);

    await signsIn(flow, u.email, "/vaults");
    const t = fake.tokenRequests.at(-1)!;
    expect(t.outcome).toBe("issued");
    expect(t.verifierPresent).toBe(true);
    expect(t.verifierMatched).toBe(true);
    expect(s256(t.params.code_verifier ?? "")).toBe(p.code_challenge!);
    expect(t.params.code_verifier).not.toBe(p.code_challenge);
    expect(t.params.redirect_uri).toBe(p.redirect_uri);
    expect(t.clientAuth).not.toBe("none");
  });

  test("two sign-ins get different state, nonce and PKCE challenge", async () => {
    newUser();
    const a = await begin();
    const b = await begin();
    for (const k of ["state", "nonce", "code_challenge"]) expect(a.authorize.searchParams.get(k)).not.toBe(b.authorize.searchParams.get(k));
  });

  test("wrong signing key (the published kid, another key) is refused", async () => {
    await refusedWith("wrong-key");
  });

  test("alg: none is refused", async () => {
    await refusedWith("alg-none");
  });

  test("HS256 signed with the provider's public key as the HMAC secret is refused", async () => {
    await refusedWith("hs256-public-key");
  });

  test("wrong issuer is refused", async () => {
    await refusedWith("wrong-iss");
  });

  test("wrong audience is refused", async () => {
    await refusedWith("wrong-aud");
  });

  test("expired ID token is refused", async () => {
    await refusedWith("expired");
  });

  test("wrong nonce is refused", async () => {
    await refusedWith("wrong-nonce");
  });

  test("callback with an error parameter is refused", async () => {
    const flow = await refusedWith("authorize-error");
    expect(new URL(flow.callbackUrl).searchParams.get("error")).toBe("access_denied");
  });

  test("reused state: the same state/code pair a second time is refused", async () => {
    const u = newUser();
    const flow = await begin();
    const cookiesBefore = new Map(flow.jar);
    await signsIn(flow, u.email);
    const tokenCalls = fake.counts.token;
    await expectRefused(await callback(flow.callbackUrl, cookiesBefore), flow);
    expect(fake.counts.token).toBe(tokenCalls); // a spent state never reaches the provider again
  });

  test("expired state: past 10 minutes on the server clock the callback is refused", async () => {
    newUser();
    const flow = await begin();
    const tokenCalls = fake.counts.token;
    offset += 10 * MIN + 5_000;
    await expectRefused(await callback(flow.callbackUrl, flow.jar), flow);
    expect(fake.counts.token).toBe(tokenCalls); // the state is checked before the code is spent
  });

  test("a state still inside its 10 minutes is accepted (the clock above is the one that counts)", async () => {
    const u = newUser();
    const flow = await begin();
    offset += 9 * MIN;
    await signsIn(flow, u.email);
  });

  test("a state the broker never issued is refused without a code exchange", async () => {
    newUser();
    const flow = await begin();
    const forged = new URL(flow.callbackUrl);
    forged.searchParams.set("state", randomBytes(32).toString("base64url"));
    const tokenCalls = fake.counts.token;
    await expectRefused(await callback(forged.href, flow.jar), flow);
    expect(fake.counts.token).toBe(tokenCalls);
    const noState = new URL(flow.callbackUrl);
    noState.searchParams.delete("state");
    await expectRefused(await callback(noState.href, flow.jar), flow);
    expect(fake.counts.token).toBe(tokenCalls);
  });

  test("wrong PKCE verifier: a code bound to another flow's challenge is refused by the provider, and so by the broker", async () => {
    newUser();
    const victim = await begin();
    const attacker = await begin();
    // Code injection: the attacker's code, the victim's state and browser. The broker sends the victim's verifier.
    const injected = new URL(victim.callbackUrl);
    injected.searchParams.set("code", attacker.code!);
    const before = fake.tokenRequests.length;
    const flow = { ...victim, code: attacker.code };
    await expectRefused(await callback(injected.href, victim.jar), flow);
    const sent = fake.tokenRequests.slice(before);
    for (const t of sent) {
      expect(t.verifierPresent).toBe(true);
      expect(t.verifierMatched).toBe(false);
      expect(t.outcome).toBe("invalid_grant");
    }
  });

  test("wrong PKCE verifier: the provider's recorded challenge does not match (token endpoint says invalid_grant)", async () => {
    const before = fake.tokenRequests.length;
    await refusedWith("tampered-challenge");
    const t = fake.tokenRequests.slice(before);
    expect(t.length).toBe(1);
    expect(t[0]?.verifierPresent).toBe(true); // never a missing verifier
    expect(t[0]?.outcome).toBe("invalid_grant");
  });

  test("an email that is not plain ASCII of the usual shape never makes an account (look-alikes, two @, no @)", async () => {
    // U+212A (Kelvin sign) lower-cases to "k": folded, it would take kim@example.com's address.
    for (const email of ["\u212Aim@example.com", "evil@attacker.net@example.com", "example.com"]) {
      fake.setUser({ sub: `sub-shape-${randomBytes(4).toString("hex")}`, email });
      const flow = await begin();
      await expectRefused(await callback(flow.callbackUrl, flow.jar), flow);
    }
    expect((await broker.api("POST", "/v1/auth/register", { email: "kim@example.com", password: "correct horse battery" })).status).toBe(201);
  });

  test("a mixed-case ASCII email signs up under its lower-case form", async () => {
    const tag = randomBytes(3).toString("hex");
    fake.setUser({ sub: `sub-case-${tag}`, email: `Mixed.Case-${tag}@Example.COM` });
    await signsIn(await begin(), `mixed.case-${tag}@example.com`);
  });

  test("an existing password account with the same email is not linked: generic rejection", async () => {
    fake.setUser({ sub: `sub-owner-${randomBytes(4).toString("hex")}`, email: "owner@example.com" });
    const flow = await begin();
    await expectRefused(await callback(flow.callbackUrl, flow.jar), flow);
  });

  // RFC 6749 §10.12 / RFC 9700 §4.7: the state must bind the flow to the browser that started it, or an
  // attacker's finished flow (their code, their valid state) signs the victim in as the attacker (login
  // CSRF) or links the victim's provider account to the attacker's broker account.
  test("login CSRF: a callback arriving in a browser other than the one that started the flow is refused", async () => {
    newUser();
    const attackers = await begin(); // the attacker's own flow, completed at the provider as the attacker
    const victimBrowser: Jar = new Map();
    await expectRefused(await callback(attackers.callbackUrl, victimBrowser), attackers);
  });

  test("link CSRF: a link flow started by one account and completed in another person's browser links nothing", async () => {
    const victim = newUser();
    const start = await fetch(`${broker.apiUrl}/v1/auth/oidc/link`, {
      method: "POST",
      redirect: "manual",
      headers: { authorization: `Bearer ${broker.userToken}` },
    });
    expect(start.status).toBe(303);
    // The attacker (the owner here) sends the provider URL to the victim, whose browser is signed in at the provider.
    const victimBrowser: Jar = new Map();
    const atProvider = await fetch(start.headers.get("location")!, { redirect: "manual" });
    const cbUrl = atProvider.headers.get("location")!;
    const back = new URL(cbUrl);
    const flow: Flow = {
      jar: victimBrowser,
      authorize: new URL(start.headers.get("location")!),
      callbackUrl: cbUrl,
      state: back.searchParams.get("state") ?? "",
      code: back.searchParams.get("code") ?? undefined,
    };
    await expectRefused(await callback(cbUrl, victimBrowser), flow);
    const ids = await broker.api("GET", "/v1/account/identities", undefined, broker.userToken);
    expect(JSON.stringify(ids.body)).not.toContain(victim.email);
  });

  test("return_to off the broker's origin never becomes the post-sign-in redirect", async () => {
    for (const evil of ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"]) {
      const res = await fetch(`${broker.apiUrl}/v1/auth/oidc/login?return_to=${encodeURIComponent(evil)}`, { redirect: "manual" });
      if (res.status !== 302) {
        expect(res.status).toBeGreaterThanOrEqual(400);
        continue;
      }
      const u = newUser();
      const jar: Jar = new Map();
      absorb(jar, res);
      const atProvider = await fetch(res.headers.get("location")!, { redirect: "manual" });
      const cb = await callback(atProvider.headers.get("location")!, jar);
      expect(cb.status).toBe(303);
      const loc = new URL(cb.headers.get("location")!, broker.apiUrl);
      expect(loc.origin).toBe(new URL(broker.apiUrl).origin);
      expect(loc.pathname.startsWith("//")).toBe(false);
      const me = await broker.api("GET", "/v1/auth/whoami", undefined, sessionCookie(cb));
      expect(me.body.user?.email).toBe(u.email);
    }
  });

  test("key set: cached (no refetch per sign-in), refetched once on an unknown kid, so a rotated key signs in", async () => {
    const u1 = newUser();
    await signsIn(await begin(), u1.email);
    const afterFirst = fake.counts.jwks;
    expect(afterFirst).toBeGreaterThanOrEqual(1);
    const u2 = newUser();
    await signsIn(await begin(), u2.email);
    expect(fake.counts.jwks).toBe(afterFirst); // cached

    // The old key is gone from the JWKS; tokens carry the new kid. The provider may rotate at any moment,
    // also seconds after the broker last fetched the set: the unknown kid must trigger the one refetch.
    await fake.rotateKeys();
    offset += 2 * MIN;
    const u3 = newUser();
    await signsIn(await begin(), u3.email);
    expect(fake.counts.jwks).toBe(afterFirst + 1);
  });

  test("a kid unknown even after the refetch is refused, with at most one refetch", async () => {
    offset += 2 * MIN;
    const before = fake.counts.jwks;
    await refusedWith("wrong-key-unknown-kid");
    expect(fake.counts.jwks - before).toBeLessThanOrEqual(1);
  });

  test("every refusal shows the same generic page", () => {
    expect(refusalBodies.length).toBeGreaterThan(10);
    expect(new Set(refusalBodies).size).toBe(1);
    expect(refusalBodies[0]).not.toMatch(/nonce|issuer|audience|expired|signature|verifier|registered|already/i);
  });
});
