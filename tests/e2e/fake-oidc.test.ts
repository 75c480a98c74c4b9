// Self-check of the hostile fake provider (tests/helpers/fake-oidc.ts) with a reference relying party
// (oauth4webapi for the protocol, jose for the RS256 signature): the good scenario is accepted and every
// forged one is rejected by the reference, so a broker test that sees a forgery accepted is the
// broker's fault, not the fake's. Needs no broker.

import { createPublicKey } from "node:crypto";
import { afterAll, describe, expect, test } from "bun:test";
import * as oauth from "oauth4webapi";
import { createLocalJWKSet, jwtVerify } from "jose";
import { startFakeOidc, type Scenario } from "../helpers/fake-oidc.ts";

const fake = await startFakeOidc();
afterAll(() => fake.stop());

const redirectUri = "http://127.0.0.1:9/v1/auth/oidc/callback";
const opts = { [oauth.allowInsecureRequests]: true };

async function run(scenario: Scenario, tamper?: { verifier?: string | null }): Promise<{ accepted: boolean; error?: string }> {
  fake.setScenario(scenario);
  fake.setUser({ sub: "s1", email: "a@example.com" });
  try {
    const as = await oauth.processDiscoveryResponse(new URL(fake.issuer), await oauth.discoveryRequest(new URL(fake.issuer), { ...opts, algorithm: "oidc" }));
    const client: oauth.Client = { client_id: fake.clientId };
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const url = new URL(as.authorization_endpoint!);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: fake.clientId,
      redirect_uri: redirectUri,
      scope: "openid email",
      state,
      nonce,
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    }))
      url.searchParams.set(k, v);
    const back = new URL((await fetch(url, { redirect: "manual" })).headers.get("location")!);
    const params = oauth.validateAuthResponse(as, client, back.searchParams, state);
    const sent = tamper?.verifier === undefined ? verifier : tamper.verifier;
    const res =
      sent === null
        ? await fetch(as.token_endpoint!, {
            method: "POST",
            headers: { authorization: `Basic ${btoa(`${fake.clientId}:${fake.clientSecret}`)}`, "content-type": "application/x-www-form-urlencoded" },
            body: new URLSearchParams({ grant_type: "authorization_code", code: params.get("code")!, redirect_uri: redirectUri }),
          })
        : await oauth.authorizationCodeGrantRequest(as, client, oauth.ClientSecretBasic(fake.clientSecret), params, redirectUri, sent, opts);
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, res, { expectedNonce: nonce, requireIdToken: true });
    const jwks = (await (await fetch(as.jwks_uri!)).json()) as any;
    await jwtVerify(tokens.id_token!, createLocalJWKSet(jwks), { algorithms: ["RS256"], issuer: as.issuer, audience: fake.clientId });
    return { accepted: true };
  } catch (e) {
    return { accepted: false, error: e instanceof oauth.ResponseBodyError ? e.error : (e as Error).message };
  } finally {
    fake.setScenario("good");
  }
}

describe("fake OIDC provider, checked by a reference relying party", () => {
  test("good: accepted, with the verifier matched", async () => {
    expect(await run("good")).toEqual({ accepted: true });
    expect(fake.tokenRequests.at(-1)).toMatchObject({ clientAuth: "basic", verifierPresent: true, verifierMatched: true, outcome: "issued" });
  });

  for (const s of [
    "wrong-key",
    "wrong-key-unknown-kid",
    "alg-none",
    "hs256-public-key",
    "wrong-iss",
    "wrong-aud",
    "expired",
    "wrong-nonce",
    "authorize-error",
    "tampered-challenge",
  ] as const) {
    test(`${s}: rejected`, async () => {
      expect((await run(s)).accepted).toBe(false);
    });
  }

  test("the HS256 forgery is well-formed: it verifies with the published public key (SPKI PEM) as the HMAC secret", async () => {
    await run("hs256-public-key");
    const token = fake.tokenRequests.at(-1)!.idToken!;
    const jwk = ((await (await fetch(`${fake.issuer}/jwks`)).json()) as any).keys[0];
    const pem = createPublicKey({ key: jwk, format: "jwk" }).export({ format: "pem", type: "spki" }).toString();
    const { protectedHeader } = await jwtVerify(token, new TextEncoder().encode(pem), { algorithms: ["HS256"], issuer: fake.issuer, audience: fake.clientId });
    expect(protectedHeader.kid).toBe(jwk.kid);
  });

  test("a wrong or missing PKCE verifier gets invalid_grant at /token", async () => {
    expect(await run("good", { verifier: oauth.generateRandomCodeVerifier() })).toEqual({ accepted: false, error: "invalid_grant" });
    expect(fake.tokenRequests.at(-1)).toMatchObject({ verifierPresent: true, verifierMatched: false, outcome: "invalid_grant" });
    expect(await run("good", { verifier: null })).toMatchObject({ accepted: false });
    expect(fake.tokenRequests.at(-1)).toMatchObject({ verifierPresent: false, outcome: "invalid_grant" });
  });

  test("rotation: the new kid is published and the old one dropped", async () => {
    const before = ((await (await fetch(`${fake.issuer}/jwks`)).json()) as any).keys.map((k: any) => k.kid);
    await fake.rotateKeys();
    const after = ((await (await fetch(`${fake.issuer}/jwks`)).json()) as any).keys.map((k: any) => k.kid);
    expect(after.length).toBe(1);
    expect(before).not.toContain(after[0]);
    expect(await run("good")).toEqual({ accepted: true });
  });
});
