// The CLI's API client: headers it sends, secrets revealed only onto the wire, and the error
// envelope turned into a message plus a hint. Real envelopes come from the in-process API.

import { describe, expect, test } from "bun:test";
import { ApiFailure, apiPath, createClient, serialiseBody, vaultPath } from "../../../src/cli/kit/client.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { Secret } from "../../../src/secret.ts";
import { VERSION } from "../../../src/version.ts";
import { createApi } from "../../../src/server/app.ts";
import { createTestApi } from "../../helpers/api.ts";

function recorder(status = 200, body: unknown = {}) {
  const seen: Request[] = [];
  const fetch = async (req: Request) => {
    seen.push(req);
    return Response.json(body, { status });
  };
  return { seen, fetch };
}

async function failureOf(p: Promise<unknown>): Promise<ApiFailure | CliFailure> {
  try {
    await p;
  } catch (err) {
    return err as ApiFailure;
  }
  throw new Error("expected a failure");
}

describe("requests", () => {
  test("X-Vault is sent on vault-scoped calls with agent tokens only", async () => {
    const r = recorder();
    await createClient({ addr: "http://b", token: new Secret("av_agt_x"), fetch: r.fetch }).request("GET", vaultPath("v1", "credentials"), { vault: "v1" });
    await createClient({ addr: "http://b", token: new Secret("av_sess_x"), fetch: r.fetch }).request("GET", vaultPath("v1", "credentials"), { vault: "v1" });
    await createClient({ addr: "http://b", token: new Secret("av_agt_x"), fetch: r.fetch }).request("GET", "/v1/agents");
    expect(r.seen.map((q) => q.headers.get("x-vault"))).toEqual(["v1", null, null]);
    expect(r.seen[0]?.headers.get("authorization")).toBe("Bearer av_agt_x");
  });

  test('every call names the CLI and its version in User-Agent (the Account page\'s "broker CLI 0.1.0")', async () => {
    const r = recorder();
    await createClient({ addr: "http://b", fetch: r.fetch }).request("POST", "/v1/auth/login", { body: {}, anonymous: true });
    expect(r.seen[0]?.headers.get("user-agent")).toBe(`broker-cli/${VERSION}`);
  });

  test("anonymous calls carry no token", async () => {
    const r = recorder();
    await createClient({ addr: "http://b", token: new Secret("av_sess_x"), fetch: r.fetch }).request("POST", "/v1/auth/login", { body: {}, anonymous: true });
    expect(r.seen[0]?.headers.has("authorization")).toBe(false);
  });

  test("Secrets in a body are revealed on the wire only; elsewhere they stay redacted", async () => {
    const body = { email: "a@b.c", password: new Secret("pw-123"), nested: { value: new Secret("v") } };
    expect(serialiseBody(body)).toBe('{"email":"a@b.c","password":"pw-123","nested":{"value":"v"}}');
    expect(JSON.stringify(body)).not.toContain("pw-123");
  });

  test("path segments are encoded, so hosts and names cannot change the route", () => {
    expect(vaultPath("v1", "services", "*.example.com:8443")).toBe("/v1/vaults/v1/services/*.example.com%3A8443");
    expect(apiPath("v1", "agents", "../x")).toBe("/v1/agents/..%2Fx");
  });
});

describe("failures", () => {
  test("a refused connection names the address and suggests `broker server`", async () => {
    const fetch = async () => {
      throw Object.assign(new Error("Unable to connect"), { code: "ConnectionRefused" });
    };
    const err = await failureOf(createClient({ addr: "http://127.0.0.1:9", fetch }).request("GET", "/v1/vaults"));
    expect(err.message).toBe("cannot reach the broker at http://127.0.0.1:9: connection refused");
    expect(err.hint).toContain("is the server running at http://127.0.0.1:9? start it with `broker server`");
  });

  test("401 hints depend on where the token came from", async () => {
    const r = recorder(401, { error: "unauthorized", message: "missing, invalid or expired token" });
    const none = await failureOf(createClient({ addr: "http://b", fetch: r.fetch }).request("GET", "/x"));
    const file = await failureOf(createClient({ addr: "http://b", token: new Secret("t"), tokenSource: "file", fetch: r.fetch }).request("GET", "/x"));
    const env = await failureOf(createClient({ addr: "http://b", token: new Secret("t"), tokenSource: "env", fetch: r.fetch }).request("GET", "/x"));
    expect(none.hint).toContain("not logged in");
    expect(file.hint).toContain("log in again with `broker auth login`");
    expect(env.hint).toContain("BROKER_SESSION_TOKEN");
    expect(file).toMatchObject({ status: 401, code: "unauthorized", message: "missing, invalid or expired token (401 unauthorized)" });
  });

  test("429 says how long to wait; a body that is not the envelope still fails clearly", async () => {
    const limited = await failureOf(
      createClient({ addr: "http://b", fetch: recorder(429, { error: "rate_limited", message: "slow down", retry_after: 7 }).fetch }).request("GET", "/x"),
    );
    expect(limited.hint).toBe("wait 7 s and try again");
    const html = async () => new Response("<html>bad gateway</html>", { status: 502, statusText: "Bad Gateway" });
    const err = await failureOf(createClient({ addr: "http://b", fetch: html }).request("GET", "/x"));
    expect(err).toMatchObject({ status: 502, code: "http_502", message: "Bad Gateway (502 http_502)" });
  });

  test("real envelopes from the API: field names and messages come through", async () => {
    const t = await createTestApi();
    const app = createApi({ domain: t.domain, log: createMemoryLogger() });
    const client = createClient({ addr: "http://broker.test", fetch: (req) => app.request(req) });
    const short = await failureOf(client.request("POST", "/v1/auth/register", { body: { email: "a@b.c", password: new Secret("short") }, anonymous: true }));
    expect(short).toBeInstanceOf(ApiFailure);
    expect(short).toMatchObject({ status: 400, code: "invalid_request" });
    const reg = await client.request<{ token: string; user: { role: string } }>("POST", "/v1/auth/register", {
      body: { email: "a@b.c", password: new Secret("long enough pw") },
    });
    expect(reg.user.role).toBe("owner");
    const authed = createClient({ addr: "http://broker.test", token: new Secret(reg.token), tokenSource: "file", fetch: (req) => app.request(req) });
    const missing = await failureOf(authed.request("GET", vaultPath("nope"), { vault: "nope" }));
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    expect(missing.hint).toContain("broker vault list");
    expect(await authed.request("DELETE", apiPath("v1", "auth", "sessions", "no-such"), {}).catch((e: ApiFailure) => e.status)).toBe(404);
  });
});
