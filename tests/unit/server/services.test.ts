// Services over the API: canonical hosts (case, trailing dot, port 443, punycode, wildcard, IP
// literals), URL-encoded hosts in paths, auth shapes and their validation. Listing services shows
// key names, never credential values.

import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { createHarness, createVault, expectNoLeak, expectNoTokensInLogs, type Harness, register, sentinel, setCredential } from "./fixtures.ts";

let h: Harness;
let owner: string;
let secret: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  secret = sentinel("services");
  await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
});

const add = (body: Record<string, unknown>) =>
  h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { auth: { type: "bearer", token: "API_KEY" }, ...body } });
const patch = (host: string, body: unknown) => h.call("PATCH", `/v1/vaults/v1/services/${encodeURIComponent(host)}`, { token: owner, body });
const remove = (host: string) => h.call("DELETE", `/v1/vaults/v1/services/${encodeURIComponent(host)}`, { token: owner });
const hosts = async () => ((await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services as { host: string }[]).map((s) => s.host).sort();

// Every test: the credential value is in no response and no log line; no token is in the logs.
afterEach(() => {
  expectNoLeak(h, secret);
  expectNoTokensInLogs(h);
});

describe("hosts are stored in canonical form", () => {
  test.each([
    ["API.Example.COM.", "api.example.com"],
    ["api.example.com:443", "api.example.com"],
    ["api.example.com:8443", "api.example.com:8443"],
    ["*.Example.com", "*.example.com"],
    ["bücher.example", "xn--bcher-kva.example"],
    ["10.0.0.1", "10.0.0.1"],
    ["[::1]:8443", "[::1]:8443"],
  ])("%p → %p", async (input, canonical) => {
    const res = await add({ host: input, description: "d" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ host: canonical, description: "d", auth: { type: "bearer", token: "API_KEY" }, enabled: true });
    expect(await hosts()).toEqual([canonical]);
  });

  test("the same host in another spelling is a conflict; another port is not", async () => {
    expect((await add({ host: "api.example.com" })).status).toBe(201);
    for (const dup of ["API.EXAMPLE.COM", "api.example.com.", "api.example.com:443"]) {
      const res = await add({ host: dup });
      expect(res.status).toBe(409);
      expect(res.body.error).toBe("conflict");
    }
    expect((await add({ host: "api.example.com:8443" })).status).toBe(201);
    expect(await hosts()).toEqual(["api.example.com", "api.example.com:8443"]);
  });

  // "user@api.example.com": URL syntax must be refused, not silently rewritten to api.example.com.
  test.each(["*", "*.com", "a.*.com", "*.*.com", "example.com:0", "example.com:70000", "1.2.3", "", "user@api.example.com"])(
    "%p is refused with 400 naming host",
    async (host) => {
      const res = await add({ host });
      expect(res.status).toBe(400);
      expect(res.body).toEqual({ error: "invalid_request", message: expect.any(String), field: "host" });
      expect(await hosts()).toEqual([]);
    },
  );
});

describe("addressing a service by host in the path", () => {
  test("URL-encoded wildcard, port and IPv6 hosts can be updated and removed", async () => {
    for (const host of ["*.example.com", "api.example.com:8443", "[::1]:8443"]) expect((await add({ host })).status).toBe(201);
    for (const host of ["*.example.com", "api.example.com:8443", "[::1]:8443"]) {
      const res = await patch(host, { enabled: false });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ host, description: "", auth: { type: "bearer", token: "API_KEY" }, enabled: false });
    }
    expect((await remove("*.example.com")).status).toBe(204);
    expect((await remove("[::1]:8443")).status).toBe(204);
    expect(await hosts()).toEqual(["api.example.com:8443"]);
  });

  test("a non-canonical spelling in the path finds the service", async () => {
    await add({ host: "api.example.com" });
    expect((await patch("API.Example.com.", { description: "x" })).status).toBe(200);
    expect((await remove("api.example.com:443")).status).toBe(204);
    expect(await hosts()).toEqual([]);
  });

  test("unknown hosts are 404", async () => {
    expect((await patch("nope.example.com", { enabled: false })).status).toBe(404);
    expect((await remove("nope.example.com")).status).toBe(404);
  });

  test("a partial update keeps the other fields", async () => {
    await add({ host: "api.example.com", description: "first", auth: { type: "header", header: "X-Api-Key", token: "API_KEY", prefix: "Key " } });
    const res = await patch("api.example.com", { description: "second" });
    expect(res.body).toEqual({
      host: "api.example.com",
      description: "second",
      auth: { type: "header", header: "x-api-key", token: "API_KEY", prefix: "Key " },
      enabled: true,
    });
    const auth = await patch("api.example.com", { auth: { type: "passthrough" } });
    expect(auth.body).toEqual({ host: "api.example.com", description: "second", auth: { type: "passthrough" }, enabled: true });
  });
});

describe("auth shapes", () => {
  test.each([
    ["bearer", { type: "bearer", token: "API_KEY" }, { type: "bearer", token: "API_KEY" }],
    ["basic", { type: "basic", token: "API_KEY", username: "me" }, { type: "basic", token: "API_KEY", username: "me" }],
    ["basic without username", { type: "basic", token: "API_KEY" }, { type: "basic", token: "API_KEY" }],
    ["header", { type: "header", header: "X-Api-Key", token: "API_KEY" }, { type: "header", header: "x-api-key", token: "API_KEY" }],
    ["passthrough", { type: "passthrough", token: "API_KEY" }, { type: "passthrough" }],
    ["query", { type: "query", param: "key", token: "API_KEY", header: "ignored" }, { type: "query", param: "key", token: "API_KEY" }],
    ["path", { type: "path", template: "/bot{value}", token: "API_KEY" }, { type: "path", template: "/bot{value}", token: "API_KEY" }],
  ])("%s is accepted", async (_name, auth, shown) => {
    const res = await add({ host: "api.example.com", auth });
    expect(res.status).toBe(201);
    expect(res.body.auth).toEqual(shown);
    expect((await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services[0].auth).toEqual(shown);
  });

  test.each([
    ["auth.type", "missing auth", undefined],
    ["auth.type", "unknown type", { type: "oauth", token: "API_KEY" }],
    ["auth.token", "bearer without key", { type: "bearer" }],
    ["auth.token", "lower-case key", { type: "bearer", token: "lower_case" }],
    ["auth.token", "129-character key", { type: "bearer", token: "K".repeat(129) }],
    ["auth.header", "header type without header", { type: "header", token: "API_KEY" }],
    ["auth.header", "Host", { type: "header", header: "Host", token: "API_KEY" }],
    ["auth.header", "Proxy-Authorization", { type: "header", header: "Proxy-Authorization", token: "API_KEY" }],
    ["auth.header", "X-Vault", { type: "header", header: "X-Vault", token: "API_KEY" }],
    ["auth.header", "a space in the name", { type: "header", header: "Bad Header", token: "API_KEY" }],
    ["auth.prefix", "CRLF in prefix", { type: "header", header: "X-Key", token: "API_KEY", prefix: "a\r\nb" }],
    ["auth.username", "':' in username", { type: "basic", token: "API_KEY", username: "a:b" }],
    ["auth.param", "query without param", { type: "query", token: "API_KEY" }],
    ["auth.param", "'&' in param", { type: "query", param: "a&b", token: "API_KEY" }],
    ["auth.token", "query without key", { type: "query", param: "key" }],
    ["auth.template", "path without template", { type: "path", token: "API_KEY" }],
    ["auth.template", "template without {value}", { type: "path", template: "/bot", token: "API_KEY" }],
    ["auth.template", "template with ../", { type: "path", template: "/../{value}", token: "API_KEY" }],
  ])("%s: %s is refused", async (field, _why, auth) => {
    const res = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: "api.example.com", auth } });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe(field);
    expect(await hosts()).toEqual([]);
  });

  test("enabled must be a boolean; description at most 500 characters", async () => {
    expect((await add({ host: "a.example.com", enabled: "yes" })).body.field).toBe("enabled");
    expect((await add({ host: "a.example.com", description: "x".repeat(501) })).body.field).toBe("description");
    expect((await add({ host: "a.example.com", enabled: false })).body.enabled).toBe(false);
  });
});
