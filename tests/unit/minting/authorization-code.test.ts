// Redeeming a connected account's authorization code (minting/authorization-code.ts) against a stand-in
// upstream: the request (form, PKCE verifier, client_secret_basic or _post, JSON asked for), the refresh token
// kept and the access token dropped, and every failure told in words that carry nothing the provider sent:
// a refusal (also GitHub's 200 with an error member), no refresh token, an unusable one, an unreachable endpoint.

import { describe, expect, test } from "bun:test";
import { UpstreamUnreachable } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { compileNetPolicy, type Upstream } from "../../../src/egress/index.ts";

type OutboundRequest = Parameters<Upstream["send"]>[1];
import { redeemAuthorizationCode, type AuthorizationCode } from "../../../src/minting/index.ts";

const CODE: AuthorizationCode = {
  tokenUrl: "https://github.com/login/oauth/access_token",
  clientId: "Iv1.client",
  clientSecret: new Secret("sec+ret/with=chars"),
  clientAuth: "basic",
  code: new Secret("the-code"),
  codeVerifier: new Secret("v".repeat(43)),
  redirectUri: "https://broker.example.com/connect/callback",
};

function standIn(status: number, json: unknown) {
  const sent: { host: string; port: number; req: OutboundRequest; body: string }[] = [];
  const noted: string[] = [];
  const upstream = {
    async send(dest: { host: string; port: number }, req: OutboundRequest) {
      sent.push({ host: dest.host, port: dest.port, req, body: await new Response(req.body).text() });
      return { status, statusText: "", headers: [["content-type", "application/json"]], body: new TextEncoder().encode(JSON.stringify(json)) };
    },
  } as unknown as Upstream;
  const deps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [] }),
    resolver: async () => ["140.82.112.3"],
    noteSent: (values: readonly Secret[]) => noted.push(...values.map((v) => v.reveal())),
  };
  return { deps, sent, noted };
}

describe("the request", () => {
  test("client_secret_basic: the code, its verifier and the redirect URI in the form, the client in Authorization", async () => {
    const s = standIn(200, { access_token: "gho_access", refresh_token: "ghr_refresh", token_type: "bearer", expires_in: 28800 });
    const out = await redeemAuthorizationCode(s.deps, CODE);
    expect("refreshToken" in out && out.refreshToken.reveal()).toBe("ghr_refresh");
    expect(JSON.stringify(out)).not.toContain("gho_access");
    const [{ host, port, req, body }] = s.sent as [(typeof s.sent)[number]];
    expect({ host, port, method: req.method, target: req.target }).toEqual({
      host: "github.com",
      port: 443,
      method: "POST",
      target: "/login/oauth/access_token",
    });
    expect(Object.fromEntries(new URLSearchParams(body))).toEqual({
      grant_type: "authorization_code",
      code: "the-code",
      redirect_uri: "https://broker.example.com/connect/callback",
      code_verifier: "v".repeat(43),
    });
    const basic = `Basic ${Buffer.from("Iv1.client:sec%2Bret%2Fwith%3Dchars").toString("base64")}`;
    expect(req.headers).toContainEqual(["Authorization", basic]);
    expect(req.headers).toContainEqual(["Accept", "application/json"]);
    expect(s.noted).toEqual(["the-code", basic.slice("Basic ".length)]); // echo needles, noted before it goes
  });

  test("client_secret_post: the client's id and secret in the form, no Authorization header", async () => {
    const s = standIn(200, { refresh_token: "r" });
    await redeemAuthorizationCode(s.deps, { ...CODE, clientAuth: "post" });
    const { req, body } = s.sent[0]!;
    expect(req.headers.some(([k]: [string, string]) => k === "Authorization")).toBe(false);
    expect(new URLSearchParams(body).get("client_secret")).toBe("sec+ret/with=chars");
    expect(new URLSearchParams(body).get("client_id")).toBe("Iv1.client");
  });
});

describe("failures, in words without values", () => {
  test.each([
    [400, { error: "invalid_grant", error_description: "code gho_echoed is bad" }, "refused the authorization code (HTTP 400, invalid_grant)"],
    [200, { error: "bad_verification_code", error_description: "The code passed is incorrect or expired." }, "refused the authorization code (HTTP 200)"],
    [200, { access_token: "gho_only" }, "issued no refresh token"],
    [200, { refresh_token: "bad\nvalue" }, "issued a refresh token the broker cannot use"],
    [500, { message: "oops" }, "refused the authorization code (HTTP 500)"],
  ])("HTTP %d %j", async (status, json, words) => {
    const out = await redeemAuthorizationCode(standIn(status, json).deps, CODE);
    expect("failure" in out && out.failure).toContain(words);
    expect(JSON.stringify(out)).not.toMatch(/gho_|echoed|incorrect/);
  });

  test("an answer without a length (chunked) is let go once past 64 KiB, not read whole", async () => {
    const s = standIn(200, {});
    let pulled = 0;
    let cancelled = false;
    const endless = new ReadableStream<Uint8Array>({
      pull(ctrl) {
        pulled += 16_384;
        ctrl.enqueue(new Uint8Array(16_384).fill(0x20));
      },
      cancel() {
        cancelled = true;
      },
    });
    (s.deps.upstream as { send: unknown }).send = async () => ({ status: 200, statusText: "", headers: [["content-type", "application/json"]], body: endless });
    expect(await redeemAuthorizationCode(s.deps, CODE)).toEqual({ failure: "the token endpoint github.com sent an answer larger than 65536 bytes" });
    expect(cancelled).toBe(true);
    expect(pulled).toBeLessThan(128 * 1024);
  });

  test("an unreachable token endpoint", async () => {
    const s = standIn(200, {});
    (s.deps.upstream as { send: unknown }).send = async () => {
      throw new UpstreamUnreachable("cannot connect to github.com:443");
    };
    expect(await redeemAuthorizationCode(s.deps, CODE)).toEqual({ failure: "the token endpoint github.com could not be reached" });
  });
});
