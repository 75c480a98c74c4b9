// Azure Key Vault through the broker's own upstream TLS client and network guard (issue 36), against a
// stand-in written from Microsoft's published references (tests/helpers/secret-stores/azure-server.ts):
// the token endpoint takes only a correctly formed client-credentials request, the vault only its tokens.
// Reads of the latest and a given version and of a JSON field; the token kept, renewed before it expires
// and after a 401 (once); the 401 challenge for another resource or tenant refused; every failure mapped to
// not_found / denied / unreachable / invalid in words that hold no value, client secret, token or server text.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { compileNetPolicy, createUpstream, type Upstream } from "../../../src/egress/index.ts";
import { Secret } from "../../../src/secret.ts";
import { createAzureKeyVaultClient, bearerChallenge, type AzureKeyVaultConnection } from "../../../src/secret-stores/azure-keyvault.ts";
import { jsonObject, storeHttp, type StoreHttpDeps } from "../../../src/secret-stores/store-http.ts";
import { SecretStoreError, type SecretStoreClient } from "../../../src/secret-stores/types.ts";
import { KEYVAULT_SCOPE, startAzureServer, type AzureServer } from "../../helpers/secret-stores/azure-server.ts";

let az: AzureServer;
let upstream: Upstream;
let deps: StoreHttpDeps;
const VALUE = "db-pa$$w0rd-0f9e8d7c6b5a";
const JSON_VALUE = JSON.stringify({ username: "svc-app", password: "js0n-pw-a1b2c3d4e5", port: 5432 });

beforeAll(async () => {
  az = await startAzureServer();
  upstream = createUpstream({ ca: [az.pki.caPem], connectTimeoutMs: 2_000 });
  deps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] }),
    resolver: async () => ["127.0.0.1"],
  };
});

afterAll(async () => {
  upstream.close();
  await az.close();
});

function conn(over: Partial<AzureKeyVaultConnection> = {}): AzureKeyVaultConnection {
  return { vaultUrl: az.url, authority: az.url, tenant: az.tenant, clientId: az.clientId, clientSecret: new Secret(az.clientSecret), ...over };
}

function clock(start = 1_800_000_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

async function failure(p: Promise<unknown>): Promise<SecretStoreError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof SecretStoreError) return err;
    throw err;
  }
  throw new Error("expected a SecretStoreError");
}

/** Nothing secret, and nothing the server chose to say, in the error's message or its inspection. */
function expectClean(err: Error, client?: SecretStoreClient): void {
  const shown = `${err.message}\n${Bun.inspect(err)}\n${JSON.stringify(err)}`;
  for (const s of [
    VALUE,
    "js0n-pw-a1b2c3d4e5",
    az.clientSecret,
    ...az.issued,
    "AADSTS",
    "AKV1",
    "Trace ID",
    "was not found in this key vault",
    "disabled secret",
    "does not have secrets get permission",
    "temporarily",
  ]) {
    expect(shown).not.toContain(s);
  }
  if (client) for (const v of client.sentValues()) expect(shown).not.toContain(v.reveal());
}

/** A raw request to the token endpoint through the same guarded client, for the malformed cases. */
async function tokenRequest(body: string, contentType = "application/x-www-form-urlencoded", tenant = az.tenant) {
  const a = await storeHttp(deps, {
    method: "POST",
    url: `${az.url}/${tenant}/oauth2/v2.0/token`,
    headers: [["Content-Type", contentType]],
    body: new TextEncoder().encode(body),
  });
  return { status: a.status, json: jsonObject(a) ?? {} };
}

function form(over: Record<string, string | undefined> = {}): string {
  const base: Record<string, string | undefined> = {
    grant_type: "client_credentials",
    client_id: az.clientId,
    client_secret: az.clientSecret,
    scope: KEYVAULT_SCOPE,
    ...over,
  };
  return new URLSearchParams(Object.entries(base).filter((e): e is [string, string] => e[1] !== undefined)).toString();
}

describe("the stand-in token endpoint accepts only a correctly formed client-credentials request", () => {
  test("the well-formed request gets a bearer token with its lifetime", async () => {
    const { status, json } = await tokenRequest(form());
    expect(status).toBe(200);
    expect(json.token_type).toBe("Bearer");
    expect(json.expires_in).toBe(az.tokenLifetimeS);
    expect(typeof json.access_token).toBe("string");
  });

  test.each([
    ["wrong scope (the resource without /.default)", () => form({ scope: "https://vault.azure.net" }), undefined, undefined, 400, "invalid_scope", 1002012],
    ["wrong scope (another resource)", () => form({ scope: "https://graph.microsoft.com/.default" }), undefined, undefined, 400, "invalid_scope", 1002012],
    ["missing grant_type", () => form({ grant_type: undefined }), undefined, undefined, 400, "invalid_request", 900144],
    ["another grant type", () => form({ grant_type: "password" }), undefined, undefined, 400, "unsupported_grant_type", 70003],
    ["missing client_id", () => form({ client_id: undefined }), undefined, undefined, 400, "invalid_request", 900144],
    ["unknown client_id", () => form({ client_id: "00000000-0000-0000-0000-000000000000" }), undefined, undefined, 400, "unauthorized_client", 700016],
    ["missing client_secret", () => form({ client_secret: undefined }), undefined, undefined, 401, "invalid_client", 7000216],
    ["wrong client_secret", () => form({ client_secret: "not-the-secret" }), undefined, undefined, 401, "invalid_client", 7000215],
    ["duplicate parameter", () => `${form()}&scope=${encodeURIComponent(KEYVAULT_SCOPE)}`, undefined, undefined, 400, "invalid_request", 90014],
    [
      "JSON body instead of a form",
      () => JSON.stringify({ grant_type: "client_credentials", client_id: az.clientId, client_secret: az.clientSecret, scope: KEYVAULT_SCOPE }),
      "application/json",
      undefined,
      400,
      "invalid_request",
      900144,
    ],
    ["a form without its content type", () => form(), "text/plain", undefined, 400, "invalid_request", 900144],
    ["another tenant in the path", () => form(), undefined, "common-not-ours", 400, "invalid_request", 90002],
  ])("%s: refused in Entra's shape", async (_name, body, type, tenant, status, error, code) => {
    const issued = az.counters.tokensIssued;
    const r = await tokenRequest(body(), type, tenant);
    expect(r.status).toBe(status);
    expect(r.json.error).toBe(error);
    expect(r.json.error_codes).toEqual([code]);
    expect(String(r.json.error_description)).toStartWith(`AADSTS${code}: `);
    expect(typeof r.json.trace_id).toBe("string");
    expect(typeof r.json.correlation_id).toBe("string");
    expect(az.counters.tokensIssued).toBe(issued);
  });

  test("the vault takes only its issued tokens, with Key Vault's challenge; api-version is required", async () => {
    const name = "challenge-probe";
    az.setSecret(name, "x");
    const get = (url: string, token?: string) => storeHttp(deps, { method: "GET", url, headers: token ? [["Authorization", `Bearer ${token}`]] : [] });
    const none = await get(`${az.url}/secrets/${name}/?api-version=7.4`);
    expect(none.status).toBe(401);
    const challenge = bearerChallenge(none.headers.find(([k]) => k.toLowerCase() === "www-authenticate")![1]);
    expect(challenge).toEqual({ authorization: `${az.url}/${az.tenant}`, resource: "https://vault.azure.net" });
    expect((jsonObject(none)!.error as { code: string }).code).toBe("Unauthorized");
    expect((await get(`${az.url}/secrets/${name}/?api-version=7.4`, "forged")).status).toBe(401);
    const { json } = await tokenRequest(form());
    const missing = await get(`${az.url}/secrets/${name}/`, String(json.access_token));
    expect(missing.status).toBe(400);
    expect((jsonObject(missing)!.error as { code: string }).code).toBe("BadParameter");
    expect((await get(`${az.url}/secrets/${name}/?api-version=7.4`, String(json.access_token))).status).toBe(200);
  });
});

describe("reading", () => {
  test("the latest version and a given one, with the request Microsoft documents", async () => {
    const v1 = az.setSecret("db-password", "old-value-1");
    const v2 = az.setSecret("db-password", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    const seen = az.requests.length;
    const latest = await client.read({ path: "db-password" });
    const [login, get] = az.requests.slice(seen);
    expect(login!.method).toBe("POST");
    expect(login!.url).toBe(`/${az.tenant}/oauth2/v2.0/token`);
    expect(login!.contentType).toBe("application/x-www-form-urlencoded");
    expect(Object.fromEntries(new URLSearchParams(login!.body))).toEqual({
      grant_type: "client_credentials",
      client_id: az.clientId,
      client_secret: az.clientSecret,
      scope: "https://vault.azure.net/.default",
    });
    expect(get!.method).toBe("GET");
    expect(get!.url).toBe("/secrets/db-password/?api-version=7.4");
    expect(get!.authorization).toBe(`Bearer ${az.issued.at(-1)}`);
    expect(latest.value.reveal()).toBe(VALUE);
    expect(latest.version).toBe(v2);
    const old = await client.read({ path: "db-password", version: v1 });
    expect(az.requests.at(-1)!.url).toBe(`/secrets/db-password/${v1}?api-version=7.4`);
    expect(old.value.reveal()).toBe("old-value-1");
    expect(old.version).toBe(v1);
    expect(Bun.inspect(latest)).not.toContain(VALUE);
    expect(JSON.stringify(latest)).not.toContain(VALUE);
  });

  test("a field of a JSON value; a missing field is not_found, a plain value has no fields", async () => {
    az.setSecret("db-json", JSON_VALUE);
    az.setSecret("plain", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    expect((await client.read({ path: "db-json", field: "password" })).value.reveal()).toBe("js0n-pw-a1b2c3d4e5");
    expect((await client.read({ path: "db-json", field: "port" })).value.reveal()).toBe("5432");
    const missing = await failure(client.read({ path: "db-json", field: "nope" }));
    expect(missing.kind).toBe("not_found");
    expectClean(missing, client);
    const plain = await failure(client.read({ path: "plain", field: "password" }));
    expect(plain.kind).toBe("invalid");
    expectClean(plain, client);
  });

  test("names and versions that could leave the secrets path are refused before anything is sent", async () => {
    const client = createAzureKeyVaultClient(deps, conn());
    const before = az.counters.secretRequests;
    for (const path of ["../keys/k", "a/b", "name?api-version=1", "", "x".repeat(128)]) {
      expect((await failure(client.read({ path }))).kind).toBe("invalid");
    }
    expect((await failure(client.read({ path: "ok", version: "../x" }))).kind).toBe("invalid");
    expect(az.counters.secretRequests).toBe(before);
  });
});

describe("the access token", () => {
  test("kept between reads, renewed shortly before expires_in runs out", async () => {
    az.setSecret("cached", VALUE);
    az.tokenLifetimeS = 3600;
    const c = clock();
    const client = createAzureKeyVaultClient(deps, conn(), { now: c.now });
    const issued = az.counters.tokensIssued;
    await client.read({ path: "cached" });
    await client.read({ path: "cached" });
    c.advance(50 * 60_000); // 50 of 60 minutes: still fresh
    await client.read({ path: "cached" });
    expect(az.counters.tokensIssued).toBe(issued + 1);
    c.advance(6 * 60_000); // 56 minutes: inside the renewal margin (5 minutes before expiry)
    await client.read({ path: "cached" });
    expect(az.counters.tokensIssued).toBe(issued + 2);
    const sent = client.sentValues().map((s) => s.reveal());
    expect(sent).toContain(az.clientSecret);
    expect(sent).toContain(az.issued.at(-1)!);
  });

  test("a short-lived token is renewed at half its lifetime", async () => {
    az.setSecret("short-lived", VALUE);
    az.tokenLifetimeS = 60;
    try {
      const c = clock();
      const client = createAzureKeyVaultClient(deps, conn(), { now: c.now });
      const issued = az.counters.tokensIssued;
      await client.read({ path: "short-lived" });
      c.advance(29_000);
      await client.read({ path: "short-lived" });
      expect(az.counters.tokensIssued).toBe(issued + 1);
      c.advance(1_000);
      await client.read({ path: "short-lived" });
      expect(az.counters.tokensIssued).toBe(issued + 2);
    } finally {
      az.tokenLifetimeS = 3599;
    }
  });

  test("concurrent first reads share one login", async () => {
    az.setSecret("concurrent", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    const issued = az.counters.tokensIssued;
    await Promise.all([1, 2, 3, 4].map(() => client.read({ path: "concurrent" })));
    expect(az.counters.tokensIssued).toBe(issued + 1);
  });

  test("a 401 from the vault: one new token, one retry", async () => {
    az.setSecret("after-401", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    await client.read({ path: "after-401" });
    az.revokeTokens();
    const issued = az.counters.tokensIssued;
    const unauthorized = az.counters.unauthorized;
    expect((await client.read({ path: "after-401" })).value.reveal()).toBe(VALUE);
    expect(az.counters.tokensIssued).toBe(issued + 1);
    expect(az.counters.unauthorized).toBe(unauthorized + 1);
  });

  test("a vault that refuses even a fresh token: denied after exactly one retry", async () => {
    az.setSecret("always-401", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    await client.read({ path: "always-401" });
    const issued = az.counters.tokensIssued;
    const unauthorized = az.counters.unauthorized;
    az.refuseTokens = true;
    try {
      const err = await failure(client.read({ path: "always-401" }));
      expect([err.kind, err.status]).toEqual(["denied", 401]);
      expectClean(err, client);
    } finally {
      az.refuseTokens = false;
    }
    expect(az.counters.tokensIssued).toBe(issued + 1);
    expect(az.counters.unauthorized).toBe(unauthorized + 2);
  });

  test("a challenge for another resource or tenant gets no new token", async () => {
    az.setSecret("challenged", VALUE);
    for (const challenge of [{ resource: "https://management.azure.com" }, { authorization: `${az.url}/0badc0de-1111-4222-8333-444444444444` }]) {
      const client = createAzureKeyVaultClient(deps, conn());
      await client.read({ path: "challenged" });
      az.revokeTokens();
      az.challenge = challenge;
      const issued = az.counters.tokensIssued;
      try {
        const err = await failure(client.read({ path: "challenged" }));
        expect(err.kind).toBe("denied");
        expect(err.status).toBe(401);
        expectClean(err, client);
      } finally {
        az.challenge = {};
      }
      expect(az.counters.tokensIssued).toBe(issued);
    }
  });

  test("sentValues holds the client secret and the token, and never prints them", async () => {
    az.setSecret("sent", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    expect(client.sentValues().map((s) => s.reveal())).toEqual([az.clientSecret]);
    await client.read({ path: "sent" });
    expect(client.sentValues().map((s) => s.reveal())).toEqual([az.clientSecret, az.issued.at(-1)!]);
    const shown = `${Bun.inspect(client)}${Bun.inspect(client.sentValues())}${JSON.stringify(client.sentValues())}`;
    expect(shown).not.toContain(az.clientSecret);
    expect(shown).not.toContain(az.issued.at(-1)!);
  });
});

describe("failures, in words without values", () => {
  test("an unknown secret or version: not_found", async () => {
    const v = az.setSecret("known", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    for (const address of [{ path: "never-set" }, { path: "known", version: "0".repeat(32) }]) {
      const err = await failure(client.read(address));
      expect(err.kind).toBe("not_found");
      expect(err.status).toBe(404);
      expect(err.message).toContain("SecretNotFound");
      expectClean(err, client);
    }
    expect((await client.read({ path: "known", version: v })).version).toBe(v);
  });

  test("a disabled version and a missing permission: denied (403 Forbidden)", async () => {
    az.setSecret("disabled", VALUE);
    az.disable("disabled");
    az.setSecret("forbidden", VALUE);
    az.noPermission.add("forbidden");
    const client = createAzureKeyVaultClient(deps, conn());
    const disabled = await failure(client.read({ path: "disabled" }));
    expect([disabled.kind, disabled.status]).toEqual(["denied", 403]);
    expect(disabled.message).toContain("Forbidden/SecretDisabled");
    expectClean(disabled, client);
    const forbidden = await failure(client.read({ path: "forbidden" }));
    expect([forbidden.kind, forbidden.status]).toEqual(["denied", 403]);
    expect(forbidden.message).toContain("Forbidden/AccessDenied");
    expectClean(forbidden, client);
  });

  test("a wrong client secret: denied, saying invalid_client and nothing the server wrote", async () => {
    az.setSecret("wrong-secret", VALUE);
    const client = createAzureKeyVaultClient(deps, conn({ clientSecret: new Secret("wrong-client-secret-zzz") }));
    const err = await failure(client.read({ path: "wrong-secret" }));
    expect([err.kind, err.status]).toEqual(["denied", 401]);
    expect(err.message).toContain("invalid_client");
    expect(err.message).not.toContain("wrong-client-secret-zzz");
    expectClean(err, client);
  });

  test("a 5xx from the vault, and a stopped server: unreachable", async () => {
    az.setSecret("outage", VALUE);
    const client = createAzureKeyVaultClient(deps, conn());
    await client.read({ path: "outage" });
    az.failWith = 503;
    try {
      const err = await failure(client.read({ path: "outage" }));
      expect([err.kind, err.status]).toEqual(["unreachable", 503]);
      expectClean(err, client);
    } finally {
      az.failWith = undefined;
    }
    az.stopped = true;
    try {
      const err = await failure(client.read({ path: "outage" }));
      expect(err.kind).toBe("unreachable");
      expectClean(err, client);
      const login = await failure(createAzureKeyVaultClient(deps, conn()).read({ path: "outage" }));
      expect(login.kind).toBe("unreachable");
      expectClean(login);
    } finally {
      az.stopped = false;
    }
    expect((await client.read({ path: "outage" })).value.reveal()).toBe(VALUE);
  });

  test("the network guard refuses a blocked address before any connection", async () => {
    // A fresh upstream: a pooled keep-alive connection already went to a checked address.
    const fresh = createUpstream({ ca: [az.pki.caPem], connectTimeoutMs: 2_000 });
    const blocked: StoreHttpDeps = { upstream: fresh, resolver: deps.resolver, policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [] }) };
    const before = az.counters.tokenRequests;
    const err = await failure(createAzureKeyVaultClient(blocked, conn()).read({ path: "anything" }));
    expect(err.kind).toBe("invalid");
    expect(err.message).toContain("blocked by the network guard");
    expect(az.counters.tokenRequests).toBe(before);
    // The vault host is guarded too, even when the authority is allowed.
    const vaultBlocked: StoreHttpDeps = {
      upstream: fresh,
      policy: deps.policy,
      resolver: async (host) => (host === "vault.test" ? ["10.0.0.5"] : ["127.0.0.1"]),
    };
    const err2 = await failure(createAzureKeyVaultClient(vaultBlocked, conn({ vaultUrl: "https://vault.test" })).read({ path: "anything" }));
    expect(err2.kind).toBe("invalid");
    expect(err2.message).toContain("vault.test is blocked by the network guard");
    fresh.close();
  });

  test("http:// addresses are refused", () => {
    expect(() => createAzureKeyVaultClient(deps, conn({ vaultUrl: az.url.replace("https:", "http:") }))).toThrow(SecretStoreError);
    expect(() => createAzureKeyVaultClient(deps, conn({ authority: "http://login.example" }))).toThrow(SecretStoreError);
  });
});
