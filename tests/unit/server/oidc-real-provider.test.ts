// Identity-provider sign-in rules that need an empty instance or the domain's internals, against a REAL
// OpenID provider (tests/helpers/oidc-provider.ts) and the in-process API (tests/helpers/api.ts):
//   - sign-in through the provider is refused while no user exists (the first user registers with a password);
//   - password sign-in for a provider-only user runs the dummy hash: counted through the domain's hashing
//     gate and Argon2id calls (the all-zero dummy salt), never by wall-clock time.
// The redirect chain is followed with fetch at the provider, and the callback is handed to the in-process API.

import { afterAll, afterEach, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { createTestApi, type TestApi } from "../../helpers/api.ts";
import { startOidcProvider, type TestOidcProvider } from "../../helpers/oidc-provider.ts";
import { Secret } from "../../../src/secret.ts";
import * as kdf from "../../../src/crypto/kdf.ts";
import { createOidcClient } from "../../../src/identity/index.ts";
import { type HashGate } from "../../../src/crypto/index.ts";

const REDIRECT = "http://broker.test/v1/auth/oidc/callback";
let idp: TestOidcProvider;

beforeAll(async () => {
  idp = await startOidcProvider({
    users: [
      { sub: "s-first", email: "first@example.com", email_verified: true },
      { sub: "s-pat", email: "pat@example.com", email_verified: true },
    ],
    clientId: "unit",
    clientSecret: "unit-secret-0123456789",
    redirectUris: [REDIRECT],
  });
});
afterAll(() => idp.stop());

async function newApi(): Promise<TestApi> {
  const oidc = await createOidcClient({
    issuer: idp.issuer,
    clientId: idp.clientId,
    clientSecret: new Secret(idp.clientSecret),
    name: "Unit IdP",
    scopes: "openid email profile",
    redirectUri: REDIRECT,
  });
  return createTestApi({ oidc });
}

/** GET /v1/auth/oidc/login → provider (followed with fetch) → the callback, answered by the in-process API. */
async function signInThroughProvider(api: TestApi, email: string) {
  idp.nextLogin(email);
  const start = await api.call("GET", "/v1/auth/oidc/login");
  expect(start.status).toBe(302);
  const flowCookie = start.headers
    .getSetCookie()
    .map((c) => c.split(";")[0])
    .join("; ");
  let url = new URL(start.headers.get("location")!);
  let providerCookies = "";
  while (url.origin === idp.issuer) {
    const res = await fetch(url, { redirect: "manual", headers: providerCookies ? { cookie: providerCookies } : {} });
    const set = res.headers
      .getSetCookie()
      .map((c) => c.split(";")[0])
      .join("; ");
    if (set) providerCookies = set;
    url = new URL(res.headers.get("location")!, url);
  }
  expect(url.origin + url.pathname).toBe(REDIRECT);
  return api.call("GET", url.pathname + url.search, { headers: { cookie: flowCookie, accept: "text/html" } });
}

const sessionOf = (res: { headers: Headers }) => res.headers.getSetCookie().find((c) => /broker_session=[^;]+/.test(c) && !/max-age=0\b/i.test(c));

describe("identity-provider sign-in with a real provider (in-process API)", () => {
  test("refused while no user exists; after the owner registers with a password, the same person signs up", async () => {
    const api = await newApi();
    const refused = await signInThroughProvider(api, "first@example.com");
    expect(refused.status).toBe(401);
    expect(sessionOf(refused)).toBeUndefined();
    expect(await api.store.users.count()).toBe(0);

    const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
    expect(reg.status).toBe(201);
    const ok = await signInThroughProvider(api, "first@example.com");
    expect(ok.status).toBe(303);
    expect(sessionOf(ok)).toBeDefined();
    expect((await api.store.users.byEmail("first@example.com"))?.role).toBe("member");
  });

  describe("password sign-in of a provider-only user runs the dummy hash", () => {
    const spies: { mockRestore(): void }[] = [];
    afterEach(() => spies.splice(0).forEach((s) => s.mockRestore()));

    test("one gated hash and one Argon2id over the dummy salt, the same as an unknown email; a real user's over their own salt", async () => {
      const api = await newApi();
      expect((await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } })).status).toBe(201);
      expect((await signInThroughProvider(api, "pat@example.com")).status).toBe(303); // pat: provider-only

      let gated = 0;
      const gate: HashGate = api.domain.hashing;
      (api.domain as { hashing: HashGate }).hashing = { run: (work) => (gated++, gate.run(work)) };
      const derive = spyOn(kdf, "deriveKey");
      spies.push(derive);

      const attempt = async (email: string, password: string) => {
        gated = 0;
        derive.mockClear();
        const r = await api.call("POST", "/v1/auth/login", { body: { email, password } });
        const salts = derive.mock.calls.map((c) => Buffer.from(c[1]).toString("hex"));
        return { status: r.status, body: r.body, gated, salts };
      };
      const zero = (s: string) => /^0+$/.test(s);

      const providerOnly = await attempt("pat@example.com", "a guess at a password");
      const unknown = await attempt("nobody@example.com", "a guess at a password");
      const wrongPw = await attempt("owner@example.com", "not the password");

      expect(providerOnly.status).toBe(401);
      expect(providerOnly.body).toEqual(unknown.body);
      expect(providerOnly.body).toEqual(wrongPw.body);
      expect(providerOnly.gated).toBe(1);
      expect(providerOnly.salts).toHaveLength(1);
      expect(zero(providerOnly.salts[0]!)).toBe(true); // the dummy hash
      expect(unknown).toMatchObject({ gated: 1 });
      expect(unknown.salts.map(zero)).toEqual([true]);
      expect(wrongPw.gated).toBe(1);
      expect(wrongPw.salts.map(zero)).toEqual([false]); // a real verification over the owner's salt
    });
  });
});
