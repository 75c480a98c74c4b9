// The Google Secret Manager client against a local stand-in (tests/helpers/secret-stores/google-server.ts)
// reached over real TLS (a throwaway CA) through the broker's upstream client and network guard. The
// stand-in's token endpoint verifies each JWT bearer assertion with jose against the service account's
// public key, and the tests below prove that verification refuses what Google refuses.

import { afterAll, beforeAll, beforeEach, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { decodeJwt, decodeProtectedHeader, SignJWT, UnsecuredJWT } from "jose";
import { compileNetPolicy, createUpstream, type Upstream } from "../../../src/egress/index.ts";
import { createGoogleSecretsClient, crc32c, type GoogleSecretsConnection } from "../../../src/secret-stores/google-secrets.ts";
import { jsonObject, storeHttp, type StoreHttpDeps } from "../../../src/secret-stores/store-http.ts";
import { SecretStoreError, type SecretStoreClient } from "../../../src/secret-stores/types.ts";
import { Secret } from "../../../src/secret.ts";
import { GOOGLE_SCOPE, startGoogleServer, type GoogleServer } from "../../helpers/secret-stores/google-server.ts";

const PROJECT = "broker-test-project";
const EMAIL = "broker-reader@broker-test-project.iam.gserviceaccount.com";
const KEY_ID = "3c1f0e9a8b7d6c5e4f3a2b1c0d9e8f7a6b5c4d3e";
const TOKEN_HOST = "oauth2.googleapis.test";
const API_HOST = "secretmanager.googleapis.test";

const clock = { t: Date.now() };
const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const privatePem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
const rogue = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey;
const roguePem = rogue.export({ type: "pkcs8", format: "pem" }).toString();

let server: GoogleServer;
let upstream: Upstream;
let deps: StoreHttpDeps;
/** Every value the tests read, and every SecretStoreError they saw: checked for leaks at the end. */
const values: string[] = [];
const errors: unknown[] = [];
const clients: SecretStoreClient[] = [];

beforeAll(async () => {
  server = await startGoogleServer({
    project: PROJECT,
    clientEmail: EMAIL,
    keyId: KEY_ID,
    publicKey,
    dns: [TOKEN_HOST, API_HOST],
    tokenHost: TOKEN_HOST,
    now: () => clock.t,
  });
  upstream = createUpstream({ ca: [server.pki.caPem], connectTimeoutMs: 2000 });
  deps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"], ownListeners: [] }),
    resolver: async () => ["127.0.0.1"],
  };
  server.addVersion("db-password", "first-value-1");
  server.addVersion("db-password", "second-value-2");
  server.addVersion("db-json", JSON.stringify({ user: "app", password: "json-field-pw", port: 5432, nested: { a: 1 }, gone: null }));
  server.addVersion("rotating", "rot-1");
  server.addVersion("rotating", "rot-2");
  server.setState("rotating", 2, "DISABLED");
  server.addVersion("forbidden", "forbidden-value");
  server.deny("forbidden");
  server.addVersion("binary", new Uint8Array([0xff, 0xfe, 0x00]));
});

afterAll(async () => {
  upstream?.close();
  await server?.close();
});

beforeEach(() => {
  server.start();
  clock.t = Date.now();
});

function keyFile(overrides: Record<string, unknown> = {}): Secret {
  return new Secret(
    JSON.stringify({
      type: "service_account",
      project_id: PROJECT,
      private_key_id: KEY_ID,
      private_key: privatePem,
      client_email: EMAIL,
      client_id: "109876543210987654321",
      auth_uri: "https://accounts.google.com/o/oauth2/auth",
      token_uri: server.tokenUri,
      ...overrides,
    }),
  );
}

function client(conn: Partial<GoogleSecretsConnection> = {}, d: StoreHttpDeps = deps): SecretStoreClient {
  const c = createGoogleSecretsClient(
    d,
    { project: PROJECT, serviceAccountKey: keyFile(), endpoint: `https://${API_HOST}:${server.port}`, ...conn },
    { now: () => clock.t },
  );
  clients.push(c);
  return c;
}

async function read(c: SecretStoreClient, path: string, more: { field?: string; version?: string } = {}) {
  const r = await c.read({ path, ...more });
  values.push(r.value.reveal());
  return { value: r.value.reveal(), version: r.version, secret: r.value };
}

async function failure(p: Promise<unknown>): Promise<SecretStoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SecretStoreError);
  errors.push(err);
  return err as SecretStoreError;
}

test("reads the latest version and a numbered one, with one token for both", async () => {
  const c = client();
  const before = { ...server.counters };
  expect(await read(c, "db-password")).toMatchObject({ value: "second-value-2", version: "2" });
  expect(await read(c, "db-password", { version: "1" })).toMatchObject({ value: "first-value-1", version: "1" });
  expect(await read(c, "db-password", { version: "latest" })).toMatchObject({ value: "second-value-2", version: "2" });
  expect(server.counters.tokensIssued - before.tokensIssued).toBe(1);
  expect(server.counters.accessed - before.accessed).toBe(3);
  // The bearer the store saw is the token the endpoint issued.
  expect(server.bearers.at(-1)).toBe(`Bearer ${server.issued.at(-1)}`);
});

test("the assertion is the documented JWT bearer grant: RS256, kid, iss, scope, aud = token_uri, one hour", async () => {
  const c = client();
  await read(c, "db-password");
  const assertion = server.assertions.at(-1)!;
  expect(decodeProtectedHeader(assertion)).toEqual({ alg: "RS256", typ: "JWT", kid: KEY_ID });
  const claims = decodeJwt(assertion);
  expect(claims).toMatchObject({ iss: EMAIL, scope: GOOGLE_SCOPE, aud: server.tokenUri });
  expect(claims.exp! - claims.iat!).toBe(3600);
  expect(claims.iat).toBe(Math.floor(clock.t / 1000));
  // Both the assertion and the token it bought are needles.
  const sent = c.sentValues().map((s) => s.reveal());
  expect(sent).toContain(assertion);
  expect(sent).toContain(server.issued.at(-1)!);
  expect(c.sentValues().every((s) => s instanceof Secret)).toBe(true);
});

test("a field of a JSON secret: strings as they are, other JSON values as JSON; a missing field is not_found", async () => {
  const c = client();
  expect(await read(c, "db-json", { field: "password" })).toMatchObject({ value: "json-field-pw", version: "1" });
  expect((await read(c, "db-json", { field: "port" })).value).toBe("5432");
  expect((await read(c, "db-json", { field: "nested" })).value).toBe('{"a":1}');
  expect((await failure(c.read({ path: "db-json", field: "nope" }))).kind).toBe("not_found");
  expect((await failure(c.read({ path: "db-json", field: "gone" }))).kind).toBe("not_found");
  const notJson = await failure(c.read({ path: "db-password", field: "password" }));
  expect(notJson.kind).toBe("invalid");
  expect(notJson.message).not.toContain("second-value-2");
});

test("the token is cached until shortly before it expires, then renewed", async () => {
  const c = client();
  const start = server.counters.tokensIssued;
  await read(c, "db-password");
  clock.t += 30 * 60_000;
  await read(c, "db-password");
  expect(server.counters.tokensIssued - start).toBe(1);
  clock.t += 29 * 60_000 + 30_000; // 59.5 minutes in: inside the renewal margin
  await read(c, "db-password");
  expect(server.counters.tokensIssued - start).toBe(2);
  clock.t += 2 * 3600_000; // long after the second token expired
  await read(c, "db-password");
  expect(server.counters.tokensIssued - start).toBe(3);
  // Each token request carried a fresh assertion, issued at the client's clock.
  expect(decodeJwt(server.assertions.at(-1)!).iat).toBe(Math.floor(clock.t / 1000));
  // The tokens that expired are no longer needles; the current one is.
  const sent = c.sentValues().map((s) => s.reveal());
  expect(sent).toContain(server.issued.at(-1)!);
  expect(sent).not.toContain(server.issued.at(-3)!);
});

test("a 401 buys one new token and retries once", async () => {
  const c = client();
  await read(c, "db-password");
  const before = { ...server.counters };
  server.revokeTokens();
  expect((await read(c, "db-password")).value).toBe("second-value-2");
  expect(server.counters.unauthenticated - before.unauthenticated).toBe(1);
  expect(server.counters.tokensIssued - before.tokensIssued).toBe(1);
  expect(server.counters.accessRequests - before.accessRequests).toBe(2);
  // The new token is cached again.
  await read(c, "db-password");
  expect(server.counters.tokensIssued - before.tokensIssued).toBe(1);
});

test("a 401 after the retry is denied, after exactly one new token (no loop)", async () => {
  const c = client();
  await read(c, "db-password");
  const before = { ...server.counters };
  server.refuseBearers(true);
  try {
    const e = await failure(c.read({ path: "db-password" }));
    expect([e.kind, e.status]).toEqual(["denied", 401]);
    expect(e.message).toContain("UNAUTHENTICATED");
  } finally {
    server.refuseBearers(false);
  }
  expect(server.counters.unauthenticated - before.unauthenticated).toBe(2);
  expect(server.counters.tokensIssued - before.tokensIssued).toBe(1);
});

test("concurrent reads share one token request", async () => {
  const c = client();
  const before = server.counters.tokensIssued;
  const all = await Promise.all([read(c, "db-password"), read(c, "db-password", { version: "1" }), read(c, "db-json", { field: "user" })]);
  expect(all.map((r) => r.value)).toEqual(["second-value-2", "first-value-1", "app"]);
  expect(server.counters.tokensIssued - before).toBe(1);
});

// The stand-in's token endpoint, asked directly: it accepts a well-formed assertion and refuses each defect.
async function askToken(assertion: string, grant = "urn:ietf:params:oauth:grant-type:jwt-bearer") {
  const answer = await storeHttp(deps, {
    method: "POST",
    url: server.tokenUri,
    headers: [["Content-Type", "application/x-www-form-urlencoded"]],
    body: new TextEncoder().encode(new URLSearchParams({ grant_type: grant, assertion }).toString()),
  });
  return { status: answer.status, json: jsonObject(answer) ?? {}, why: server.refusals.at(-1) };
}

function assertionFor(over: { aud?: string; iss?: string; scope?: string; iat?: number; exp?: number; kid?: string; key?: typeof privateKey } = {}) {
  const iat = over.iat ?? Math.floor(clock.t / 1000);
  return new SignJWT({ scope: over.scope ?? GOOGLE_SCOPE })
    .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: over.kid ?? KEY_ID })
    .setIssuer(over.iss ?? EMAIL)
    .setAudience(over.aud ?? server.tokenUri)
    .setIssuedAt(iat)
    .setExpirationTime(over.exp ?? iat + 3600)
    .sign(over.key ?? privateKey);
}

test("the token endpoint verifies for real: a correct assertion buys a token, every defect is refused", async () => {
  const ok = await askToken(await assertionFor());
  expect(ok.status).toBe(200);
  expect(ok.json).toMatchObject({ token_type: "Bearer", expires_in: 3600 });
  expect(String(ok.json.access_token)).toStartWith("ya29.");

  const t = Math.floor(clock.t / 1000);
  const cases: [string, Promise<string> | string, string, string][] = [
    ["wrong audience", assertionFor({ aud: "https://oauth2.googleapis.com/token" }), "invalid_grant", "ERR_JWT_CLAIM_VALIDATION_FAILED"],
    ["expired", assertionFor({ iat: t - 7200, exp: t - 3600 }), "invalid_grant", "ERR_JWT_EXPIRED"],
    [
      "unsigned (alg none)",
      new UnsecuredJWT({ scope: GOOGLE_SCOPE })
        .setIssuer(EMAIL)
        .setAudience(server.tokenUri)
        .setIssuedAt(t)
        .setExpirationTime(t + 3600)
        .encode(),
      "invalid_grant",
      "alg none",
    ],
    ["signed by another key", assertionFor({ key: rogue }), "invalid_grant", "ERR_JWS_SIGNATURE_VERIFICATION_FAILED"],
    ["another key id", assertionFor({ kid: "0000" }), "invalid_grant", "kid"],
    ["another issuer", assertionFor({ iss: "someone@else.iam.gserviceaccount.com" }), "invalid_grant", "ERR_JWT_CLAIM_VALIDATION_FAILED"],
    ["longer than an hour", assertionFor({ exp: t + 7200 }), "invalid_grant", "lifetime"],
    ["without the cloud-platform scope", assertionFor({ scope: "https://www.googleapis.com/auth/devstorage.read_only" }), "invalid_scope", "scope"],
    ["not a JWT", "not.a.jwt", "invalid_grant", "not a JWT"],
  ];
  for (const [name, jwt, error, why] of cases) {
    const r = await askToken(await jwt);
    expect({ name, status: r.status, error: r.json.error, why: r.why }).toEqual({ name, status: 400, error, why });
    expect(typeof r.json.error_description).toBe("string");
  }
  const grant = await askToken(await assertionFor(), "client_credentials");
  expect({ status: grant.status, error: grant.json.error }).toEqual({ status: 400, error: "unsupported_grant_type" });
});

test("the client's own assertion is refused when it is wrong: another audience, another key", async () => {
  const before = server.counters.tokenRefusals;
  // A token_uri the stand-in does not call itself (another host name): the JWT's aud does not match.
  const wrongAud = client({ tokenUri: `https://localhost:${server.port}/token` });
  const e1 = await failure(wrongAud.read({ path: "db-password" }));
  expect(e1.kind).toBe("denied");
  expect(e1.message).toContain("invalid_grant");
  expect(server.refusals.at(-1)).toBe("ERR_JWT_CLAIM_VALIDATION_FAILED");

  const wrongKey = client({ serviceAccountKey: keyFile({ private_key: roguePem }) });
  const e2 = await failure(wrongKey.read({ path: "db-password" }));
  expect(e2.kind).toBe("denied");
  expect(server.refusals.at(-1)).toBe("ERR_JWS_SIGNATURE_VERIFICATION_FAILED");
  expect(server.counters.tokenRefusals - before).toBe(2);
  // A refused assertion is still a needle: the endpoint saw it.
  expect(wrongKey.sentValues().map((s) => s.reveal())).toContain(server.assertions.at(-1)!);
});

test("errors: not found, disabled version, denied, wrong project, unavailable", async () => {
  const c = client();
  const missing = await failure(c.read({ path: "no-such-secret" }));
  expect([missing.kind, missing.status]).toEqual(["not_found", 404]);
  expect(missing.message).toContain("no-such-secret");
  expect(missing.message).toContain("NOT_FOUND");
  expect((await failure(c.read({ path: "db-password", version: "9" }))).kind).toBe("not_found");

  // latest is the most recently created version, even when it is disabled (as Google documents).
  const disabled = await failure(c.read({ path: "rotating" }));
  expect([disabled.kind, disabled.status]).toEqual(["not_found", 400]);
  expect(disabled.message).toContain("FAILED_PRECONDITION");
  expect(await read(c, "rotating", { version: "1" })).toMatchObject({ value: "rot-1", version: "1" });

  const denied = await failure(c.read({ path: "forbidden" }));
  expect([denied.kind, denied.status]).toEqual(["denied", 403]);
  expect(denied.message).toContain("PERMISSION_DENIED");
  const otherProject = await failure(client({ project: "someone-elses" }).read({ path: "db-password" }));
  expect([otherProject.kind, otherProject.status]).toEqual(["denied", 403]);

  server.failNext(1);
  const unavailable = await failure(c.read({ path: "db-password" }));
  expect([unavailable.kind, unavailable.status]).toEqual(["unreachable", 503]);
  expect((await read(c, "db-password")).value).toBe("second-value-2");

  expect((await failure(c.read({ path: "../etc/passwd" }))).kind).toBe("invalid");
  expect((await failure(c.read({ path: "db-password", version: "1/../../x" }))).kind).toBe("invalid");
  expect((await failure(c.read({ path: "binary" }))).kind).toBe("invalid"); // not UTF-8 text
});

test("the stop switch and a closed port are unreachable; the store answers again after start", async () => {
  const c = client();
  await read(c, "db-password");
  server.stop();
  const stopped = await failure(c.read({ path: "db-password" }));
  expect(stopped.kind).toBe("unreachable");
  server.start();
  expect((await read(c, "db-password")).value).toBe("second-value-2");

  const closed = await startGoogleServer({ project: PROJECT, clientEmail: EMAIL, keyId: KEY_ID, publicKey });
  const port = closed.port;
  await closed.close();
  const gone = await failure(client({ endpoint: `https://${API_HOST}:${port}`, tokenUri: `https://${TOKEN_HOST}:${port}/token` }).read({ path: "x" }));
  expect(gone.kind).toBe("unreachable");
});

test("the network guard refuses a blocked address before anything is sent", async () => {
  const before = { ...server.counters };
  const metadata = await failure(client({}, { ...deps, resolver: async () => ["169.254.169.254"] }).read({ path: "db-password" }));
  expect(metadata.kind).toBe("invalid");
  expect(metadata.message).toContain("blocked by the network guard");
  const noAllowlist = { ...deps, policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [], ownListeners: [] }) };
  const loopback = await failure(client({}, noAllowlist).read({ path: "db-password" }));
  expect(loopback.message).toContain("blocked by the network guard");
  expect(server.counters).toEqual(before);
  // Only https:// is used.
  const plain = await failure(client({ endpoint: `http://${API_HOST}:${server.port}` }).read({ path: "db-password" }));
  expect(plain.kind).toBe("invalid");
});

test("a broken key file is invalid and its text is never repeated", async () => {
  const notJson = await failure(client({ serviceAccountKey: new Secret(`{"private_key": "${privatePem.slice(0, 60)}`) }).read({ path: "db-password" }));
  expect(notJson.kind).toBe("invalid");
  const noEmail = await failure(client({ serviceAccountKey: keyFile({ client_email: undefined }) }).read({ path: "db-password" }));
  expect(noEmail.message).toContain("client_email");
  const badKey = await failure(
    client({ serviceAccountKey: keyFile({ private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }) }).read({ path: "x" }),
  );
  expect(badKey.kind).toBe("invalid");
});

test("crc32c matches the published check value", () => {
  expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
});

test("no value, private key, token, assertion or server text in any error message or inspect output", () => {
  expect(errors.length).toBeGreaterThan(15);
  const keyBody = privatePem.split("\n")[1]!;
  const needles = [
    ...values.filter((v) => v.length >= 6),
    "second-value-2",
    "json-field-pw",
    "forbidden-value",
    keyBody,
    roguePem.split("\n")[1]!,
    ...server.issued,
    ...server.assertions.filter((a) => a.length > 20),
    server.canary,
  ];
  const texts: string[] = [];
  for (const e of errors) texts.push(String(e), (e as Error).message, Bun.inspect(e), JSON.stringify(e));
  for (const c of clients) texts.push(Bun.inspect(c), Bun.inspect(c.sentValues()), JSON.stringify(c.sentValues()));
  texts.push(Bun.inspect(new Secret("x")));
  for (const text of texts) for (const n of needles) expect(text.includes(n) ? `${n.slice(0, 12)}… in ${text.slice(0, 200)}` : "").toBe("");
});
