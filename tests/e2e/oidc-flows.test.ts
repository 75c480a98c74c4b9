// Identity-provider sign-in (contract Authentication §10, issue 13) against a REAL OpenID provider:
// `oidc-provider` on 127.0.0.1 (tests/helpers/oidc-provider.ts), the broker in-process with start-up
// discovery (tests/e2e/proxy-fixture.ts, owner owner@example.com registered with a password). A fetch
// client follows the redirect chain (redirect: "manual", provider cookies kept) to the broker callback.
// Covered: first sign-in creates a member (allowed domain), refused domain, an existing password
// user's email gets the same generic rejection as any failure, link from a signed-in session and sign
// in through it, list/unlink identities, the CLI hand-over code (once), the callback's cookie opens the
// console, and neither codes, states nor tokens reach the broker's log or the database.
// "Refused while no user exists" and the dummy hash for provider-only users: tests/unit/server/oidc-real-provider.test.ts.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { startBroker, type Broker } from "./proxy-fixture.ts";
import { createTestPki } from "../helpers/pki.ts";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc-provider.ts";

const USERS = [
  { sub: "sub-alice", email: "alice@allowed.test", email_verified: true },
  { sub: "sub-mallory", email: "mallory@refused.test", email_verified: true },
  { sub: "sub-owner-at-idp", email: "owner@example.com", email_verified: true }, // same email as the password owner
  { sub: "sub-owner-work", email: "owner.work@corp.test", email_verified: true }, // what the owner links
  { sub: "sub-cli", email: "carol@allowed.test", email_verified: true },
  { sub: "sub-unverified", email: "eve@allowed.test", email_verified: false },
];

let idp: TestOidcProvider;
let broker: Broker;
const seen: string[] = []; // codes and states from every redirect, for the leak check

beforeAll(async () => {
  const pki = await createTestPki();
  idp = await startOidcProvider({ users: USERS, clientId: "broker-e2e", clientSecret: randomBytes(24).toString("base64url"), redirectUris: [] });
  broker = await startBroker({ caPem: pki.caPem, env: idp.env({ BROKER_OIDC_NAME: "Test IdP" }) });
  idp.setRedirectUris([`${broker.apiUrl}/v1/auth/oidc/callback`]);
});

afterAll(async () => {
  await broker?.stop();
  await idp?.stop();
});

type Jar = Map<string, string>;

function absorb(jar: Jar, res: Response): void {
  for (const c of res.headers.getSetCookie()) {
    const pair = c.split(";")[0] ?? "";
    const i = pair.indexOf("=");
    if (i > 0) jar.set(pair.slice(0, i).trim(), pair.slice(i + 1).trim());
  }
}
const cookieHeader = (jar: Jar) => [...jar].map(([k, v]) => `${k}=${v}`).join("; ");

function sessionCookie(res: Response): string | undefined {
  for (const c of res.headers.getSetCookie()) {
    const m = /^\s*([^=;]+)=([^;]*)/.exec(c);
    if (m?.[1]?.endsWith("broker_session") && m[2] && !/max-age=0\b/i.test(c)) return m[2];
  }
  return undefined;
}

/**
 * Follows `start` (a broker URL, or a Response from it) through the provider to the broker's
 * callback and returns the callback's response (not followed). `who` signs in at the provider.
 */
async function throughProvider(first: Response, who?: string): Promise<{ res: Response; callbackUrl: URL; brokerJar: Jar }> {
  if (who) idp.nextLogin(who);
  if (first.status !== 302 && first.status !== 303) throw new Error(`broker did not redirect: ${first.status} ${await first.text()}`);
  const brokerJar: Jar = new Map(); // the broker's cookies (the flow cookie binds the state to this "browser")
  absorb(brokerJar, first);
  const providerJar: Jar = new Map(); // a browser's cookies for the provider's origin
  let url = new URL(first.headers.get("location")!, broker.apiUrl);
  expect(url.origin).toBe(idp.issuer);
  seen.push(url.searchParams.get("state") ?? "");
  for (let hop = 0; hop < 10; hop++) {
    if (url.origin !== idp.issuer) break;
    const res = await fetch(url, { redirect: "manual", headers: providerJar.size ? { cookie: cookieHeader(providerJar) } : {} });
    absorb(providerJar, res);
    const loc = res.headers.get("location");
    if (!loc) throw new Error(`provider stopped at ${url.pathname}: ${res.status} ${await res.text()}`);
    url = new URL(loc, url);
  }
  expect(url.origin + url.pathname).toBe(`${broker.apiUrl}/v1/auth/oidc/callback`);
  seen.push(url.searchParams.get("code") ?? "", url.searchParams.get("state") ?? "");
  const res = await fetch(url, { redirect: "manual", headers: { cookie: cookieHeader(brokerJar) } });
  return { res, callbackUrl: url, brokerJar };
}

const login = (query = "") => fetch(`${broker.apiUrl}/v1/auth/oidc/login${query}`, { redirect: "manual" });

async function signIn(who: string): Promise<{ res: Response; token: string | undefined }> {
  const { res } = await throughProvider(await login(), who);
  return { res, token: sessionCookie(res) };
}

/** Generic refusal: 401 HTML, no session cookie. Returns the page for comparisons. */
async function expectRefusal(res: Response): Promise<string> {
  expect(res.status).toBe(401);
  expect(res.headers.get("content-type")).toStartWith("text/html");
  expect(sessionCookie(res)).toBeUndefined();
  return res.text();
}

/** The page minus per-response nonces (CSP/script nonces), for "identical" comparisons. */
const normalise = (page: string) => page.replace(/nonce="[^"]*"/g, 'nonce=""');

async function whoami(token: string) {
  return broker.api("GET", "/v1/auth/whoami", undefined, token);
}

async function setAllowedDomains(domains: string[]) {
  const r = await broker.api("PATCH", "/v1/owner/settings", { allowed_domains: domains }, broker.userToken);
  expect(r.status).toBe(200);
}

const refusals: Record<string, string> = {};

describe("identity-provider sign-in against oidc-provider", () => {
  test("discovery ran at start-up: GET /v1/auth/oidc is enabled with the configured name", async () => {
    const r = await broker.api("GET", "/v1/auth/oidc");
    expect(r.body).toEqual({ enabled: true, name: "Test IdP" });
  });

  test("first sign-in with an allowed domain creates a member and a session; the second finds the same user", async () => {
    await setAllowedDomains(["allowed.test"]);
    const { res, token } = await signIn("alice@allowed.test");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/");
    expect(token).toBeString();
    const me = await whoami(token!);
    expect(me.status).toBe(200);
    expect(JSON.stringify(me.body)).toContain("alice@allowed.test");
    expect(JSON.stringify(me.body)).toContain("member");

    const again = await signIn("alice@allowed.test");
    expect(again.res.status).toBe(303);
    const me2 = await whoami(again.token!);
    expect(me2.body.user).toEqual(me.body.user);
    const ids = await broker.api("GET", "/v1/account/identities", undefined, again.token);
    expect(ids.status).toBe(200);
    expect(ids.body.identities).toHaveLength(1);
    expect(ids.body.identities[0]).toMatchObject({ email: "alice@allowed.test", issuer: idp.issuer });
  });

  test("return_to is honoured after sign-in", async () => {
    const { res } = await throughProvider(await login("?return_to=%2Faccount"), "alice@allowed.test");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/account");
  });

  test("a domain outside the allowed list is refused generically, and no user is created", async () => {
    const { res } = await throughProvider(await login(), "mallory@refused.test");
    refusals.domain = await expectRefusal(res);
    const pw = await broker.api("POST", "/v1/auth/login", { email: "mallory@refused.test", password: "whatever-password" });
    expect(pw.status).toBe(401);
  });

  test("an unverified email is refused", async () => {
    const { res } = await throughProvider(await login(), "eve@allowed.test");
    refusals.unverified = await expectRefusal(res);
  });

  test("an existing password user's email, not linked, gets the same rejection as any other failure", async () => {
    await setAllowedDomains([]); // no domain rule in the way: only the account rule refuses
    const { res } = await throughProvider(await login(), "owner@example.com");
    refusals.existingEmail = await expectRefusal(res);

    idp.denyNext();
    const denied = await throughProvider(await login());
    expect(denied.callbackUrl.searchParams.get("error")).toBe("access_denied");
    refusals.providerError = await expectRefusal(denied.res);

    const replay = await fetch(denied.callbackUrl, { redirect: "manual", headers: { cookie: cookieHeader(denied.brokerJar) } }); // state already used
    refusals.reusedState = await expectRefusal(replay);

    const bodies = new Set(Object.values(refusals).map(normalise));
    expect(Object.keys(refusals)).toEqual(["domain", "unverified", "existingEmail", "providerError", "reusedState"]);
    expect(bodies.size).toBe(1);
    // The password owner is untouched: no identity was attached to them.
    const ids = await broker.api("GET", "/v1/account/identities", undefined, broker.userToken);
    expect(ids.body.identities).toEqual([]);
  });

  let linkedId = 0;
  let ownerViaIdp = "";

  test("a signed-in user links a provider identity (POST /v1/auth/oidc/link with a bearer session), then signs in through it", async () => {
    const start = await fetch(`${broker.apiUrl}/v1/auth/oidc/link`, {
      method: "POST",
      redirect: "manual",
      headers: { authorization: `Bearer ${broker.userToken}` },
    });
    expect(start.status).toBe(303);
    const { res } = await throughProvider(start, "owner.work@corp.test");
    expect(res.status).toBe(303);
    expect(res.headers.get("location")).toBe("/account?linked=1");
    expect(sessionCookie(res)).toBeUndefined(); // linking does not sign anyone in

    const ids = await broker.api("GET", "/v1/account/identities", undefined, broker.userToken);
    expect(ids.status).toBe(200);
    expect(ids.body.identities).toHaveLength(1);
    expect(ids.body.identities[0]).toMatchObject({ issuer: idp.issuer, email: "owner.work@corp.test" });
    expect(typeof ids.body.identities[0].created_at).toBe("string");
    linkedId = ids.body.identities[0].id;

    // corp.test is not an allowed domain (none are listed now) — a linked identity is no signup, so it signs in.
    await setAllowedDomains(["allowed.test"]);
    const { res: back, token } = await signIn("owner.work@corp.test");
    expect(back.status).toBe(303);
    expect(token).toBeString();
    const me = await whoami(token!);
    expect(JSON.stringify(me.body)).toContain("owner@example.com");
    ownerViaIdp = token!;
  });

  test("linking needs a session", async () => {
    const r = await fetch(`${broker.apiUrl}/v1/auth/oidc/link`, { method: "POST", redirect: "manual" });
    expect(r.status).toBe(401);
  });

  test("another user cannot link an identity that belongs to someone else", async () => {
    const alice = (await signIn("alice@allowed.test")).token!;
    const start = await fetch(`${broker.apiUrl}/v1/auth/oidc/link`, { method: "POST", redirect: "manual", headers: { authorization: `Bearer ${alice}` } });
    const { res } = await throughProvider(start, "owner.work@corp.test");
    expect(normalise(await expectRefusal(res))).toBe(normalise(refusals.domain!));
    const mine = await broker.api("GET", "/v1/account/identities", undefined, alice);
    expect(mine.body.identities.map((i: any) => i.email)).toEqual(["alice@allowed.test"]);
  });

  test("the session cookie from the callback opens the console: GET / lists the owner's vault", async () => {
    const page = await fetch(`${broker.apiUrl}/`, { headers: { cookie: `broker_session=${ownerViaIdp}`, accept: "text/html" } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(broker.vault);
    expect(html).not.toContain('type="password"'); // not the sign-in form
  });

  test("unlinking: DELETE /v1/account/identities/:id, then that identity no longer signs in (generic refusal)", async () => {
    const other = await broker.api("DELETE", `/v1/account/identities/${linkedId}`, undefined, (await signIn("alice@allowed.test")).token);
    expect(other.status).toBe(404); // not Alice's
    const del = await broker.api("DELETE", `/v1/account/identities/${linkedId}`, undefined, broker.userToken);
    expect(del.status).toBe(204);
    expect((await broker.api("GET", "/v1/account/identities", undefined, broker.userToken)).body.identities).toEqual([]);
    // corp.test is not allowed, so the now-unknown identity cannot sign up either.
    const { res } = await throughProvider(await login(), "owner.work@corp.test");
    await expectRefusal(res);
  });

  test("a provider-only user cannot unlink their only identity", async () => {
    const alice = (await signIn("alice@allowed.test")).token!;
    const ids = await broker.api("GET", "/v1/account/identities", undefined, alice);
    const r = await broker.api("DELETE", `/v1/account/identities/${ids.body.identities[0].id}`, undefined, alice);
    expect(r.status).toBe(409);
  });

  test("CLI: cli_port/cli_nonce → 303 to 127.0.0.1:<port>/callback?code=…, the code is exchanged once for a session", async () => {
    const cliNonce = randomBytes(32).toString("base64url");
    const port = 49152 + (randomBytes(2).readUInt16BE() % 10000);
    const { res } = await throughProvider(await login(`?cli_port=${port}&cli_nonce=${cliNonce}`), "carol@allowed.test");
    expect(res.status).toBe(303);
    expect(sessionCookie(res)).toBeUndefined();
    const to = new URL(res.headers.get("location")!);
    expect(`${to.protocol}//${to.host}${to.pathname}`).toBe(`http://127.0.0.1:${port}/callback`);
    const code = to.searchParams.get("code")!;
    expect(code).toMatch(/^[A-Za-z0-9_-]{43}$/);
    seen.push(code);

    const wrongNonce = await broker.api("POST", "/v1/auth/oidc/cli-exchange", { code: "x".repeat(43), cli_nonce: cliNonce });
    expect(wrongNonce.status).toBe(401);
    const ok = await broker.api("POST", "/v1/auth/oidc/cli-exchange", { code, cli_nonce: cliNonce });
    expect(ok.status).toBe(200);
    expect(ok.body.user.email).toBe("carol@allowed.test");
    const me = await whoami(ok.body.token);
    expect(me.status).toBe(200);
    seen.push(ok.body.token);
    const twice = await broker.api("POST", "/v1/auth/oidc/cli-exchange", { code, cli_nonce: cliNonce });
    expect(twice.status).toBe(401);
  });

  test("CLI: a code presented with a different cli_nonce is refused", async () => {
    const cliNonce = randomBytes(32).toString("base64url");
    const { res } = await throughProvider(await login(`?cli_port=50123&cli_nonce=${cliNonce}`), "carol@allowed.test");
    const code = new URL(res.headers.get("location")!).searchParams.get("code")!;
    seen.push(code);
    const r = await broker.api("POST", "/v1/auth/oidc/cli-exchange", { code, cli_nonce: randomBytes(32).toString("base64url") });
    expect(r.status).toBe(401);
  });

  test("a provider-only user's password sign-in fails like an unknown email", async () => {
    const r = await broker.api("POST", "/v1/auth/login", { email: "alice@allowed.test", password: "any password at all" });
    const unknown = await broker.api("POST", "/v1/auth/login", { email: "nobody@allowed.test", password: "any password at all" });
    expect(r.status).toBe(401);
    expect(r.body).toEqual(unknown.body);
  });

  test("no code, state, session token or provider token reaches the log or the database", async () => {
    expect(idp.issued.length).toBeGreaterThan(5);
    const secrets = [...seen, ...idp.issued].filter((s) => s.length >= 16);
    expect(secrets.length).toBeGreaterThan(20);
    for (const line of broker.logLines) for (const s of secrets) if (line.includes(s)) throw new Error(`a sign-in secret is in the log: ${line.slice(0, 200)}`);
    // The database: provider tokens (ID, access) and raw states/codes are never stored.
    const dataDir = dataDirOf(broker);
    const dbFiles = readdirSync(dataDir).filter((f) => /\.(db|sqlite)(-wal)?$/.test(f));
    expect(dbFiles.length).toBeGreaterThan(0);
    for (const f of dbFiles) {
      const raw = Buffer.from(await Bun.file(join(dataDir, f)).arrayBuffer()).toString("latin1");
      for (const s of idp.issued) expect(raw.includes(s)).toBe(false);
      for (const s of seen.filter((x) => x.length >= 16)) expect(raw.includes(s)).toBe(false);
    }
  });
});

function dataDirOf(b: Broker): string {
  const line = b.logLines.find((l) => l.includes('"listening"') || l.includes("listening"));
  const m = line && /"data_dir":"([^"]+)"/.exec(line);
  if (!m?.[1]) throw new Error("data_dir not in the start-up log");
  return m[1];
}

test("a provider that puts the email only in userinfo (OIDC's default) still signs people up", async () => {
  const [mainIdp, mainBroker] = [idp, broker];
  const pki = await createTestPki();
  idp = await startOidcProvider({
    users: USERS,
    clientId: "broker-userinfo",
    clientSecret: randomBytes(24).toString("base64url"),
    redirectUris: [],
    emailInUserinfoOnly: true,
  });
  broker = await startBroker({ caPem: pki.caPem, env: idp.env({ BROKER_OIDC_NAME: "Userinfo IdP" }) });
  try {
    idp.setRedirectUris([`${broker.apiUrl}/v1/auth/oidc/callback`]);
    await setAllowedDomains(["allowed.test"]);
    const { res, token } = await signIn("alice@allowed.test");
    expect(res.status).toBe(303);
    expect((await whoami(token!)).body.user.email).toBe("alice@allowed.test");
    for (const t of idp.issued.map((x) => String(x))) for (const line of broker.logLines) expect(line).not.toContain(t);
  } finally {
    await broker.stop();
    await idp.stop();
    [idp, broker] = [mainIdp, mainBroker];
  }
});
