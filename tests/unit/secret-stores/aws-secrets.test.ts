// AWS Secrets Manager client (issue 36) against a stand-in server written from the API reference
// (tests/helpers/secret-stores/aws-server.ts), reached through the broker's own upstream TLS client and
// network guard. The stand-in checks every SigV4 signature itself; botocore verifies a captured request
// and signs one the stand-in accepts; the official SDK's GetSecretValueCommand reads from it.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { compileNetPolicy, createUpstream, type Upstream } from "../../../src/egress/index.ts";
import { createAwsSecretsClient, versionSelector, type AwsConnection } from "../../../src/secret-stores/aws-secrets.ts";
import type { StoreHttpDeps } from "../../../src/secret-stores/store-http.ts";
import { SecretStoreError, type SecretStoreClient } from "../../../src/secret-stores/types.ts";
import { Secret } from "../../../src/secret.ts";
import { findBotocorePython } from "../../helpers/aws-upstream.ts";
import { startAwsSecretsServer, verifySigV4, type AwsSecretsServer } from "../../helpers/secret-stores/aws-server.ts";

const REGION = "eu-west-1";
const ACCESS_KEY = "AKIDSECRETSSTORE01";
const SECRET_KEY = `aws-secret-key-sentinel-${crypto.randomUUID()}`;
const SESSION_TOKEN = `aws-session-token-sentinel-${crypto.randomUUID()}`;
const VALUE = `stored-value-sentinel-${crypto.randomUUID()}`;
const HELPERS = resolve(import.meta.dir, "../../helpers");

let server: AwsSecretsServer;
let upstream: Upstream;
let deps: StoreHttpDeps;
let tmp: string;
/** The stand-in's clock (a test with a clock of its own moves both). */
let serverNow: () => number = Date.now;
/** Everything the tests printed or caught: searched for sentinels at the end. */
const shown: string[] = [];

beforeAll(async () => {
  server = await startAwsSecretsServer({
    region: REGION,
    now: () => serverNow(),
    keys: [
      { accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY, sessionToken: SESSION_TOKEN },
      { accessKeyId: "AKIDLONGTERM0001", secretAccessKey: SECRET_KEY },
    ],
  });
  upstream = createUpstream({ ca: [server.pki.caPem], connectTimeoutMs: 3000 });
  deps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] }),
    resolver: async () => ["127.0.0.1"],
  };
  tmp = mkdtempSync(join(tmpdir(), "broker-aws-secrets-"));
});

afterAll(() => {
  server.stop();
  upstream.close();
  rmSync(tmp, { recursive: true, force: true });
});

const keysAuth = (sessionToken = true): AwsConnection["auth"] => ({
  kind: "keys",
  accessKeyId: new Secret(ACCESS_KEY),
  secretAccessKey: new Secret(SECRET_KEY),
  ...(sessionToken && { sessionToken: new Secret(SESSION_TOKEN) }),
});

function client(auth: AwsConnection["auth"] = keysAuth(), opts: Parameters<typeof createAwsSecretsClient>[2] = {}): SecretStoreClient {
  return createAwsSecretsClient(deps, { region: REGION, endpoint: server.url, stsEndpoint: server.url, auth }, opts);
}

async function failure(p: Promise<unknown>): Promise<SecretStoreError> {
  try {
    await p;
  } catch (err) {
    shown.push(String(err), (err as Error).message, Bun.inspect(err));
    if (err instanceof SecretStoreError) return err;
    throw err;
  }
  throw new Error("expected a SecretStoreError");
}

const header = (h: [string, string][], name: string) => h.find(([k]) => k.toLowerCase() === name)?.[1];

test("a version that looks like a VersionId selects it; anything else is a staging label", () => {
  expect(versionSelector("AWSCURRENT")).toEqual({ VersionStage: "AWSCURRENT" });
  expect(versionSelector("AWSPREVIOUS")).toEqual({ VersionStage: "AWSPREVIOUS" });
  expect(versionSelector("blue")).toEqual({ VersionStage: "blue" });
  expect(versionSelector("EXAMPLE1-90ab-cdef-fedc-ba987SECRET1".toLowerCase())).toEqual({ VersionStage: "example1-90ab-cdef-fedc-ba987secret1" });
  const id = crypto.randomUUID();
  expect(versionSelector(id)).toEqual({ VersionId: id });
});

test("reads the latest value with a signed AWS JSON 1.1 GetSecretValue and says which version it read", async () => {
  const first = server.put("app/db", "old-value");
  const second = server.put("app/db", VALUE);
  const before = server.counts.getSecretValue;
  const read = await client().read({ path: "app/db" });
  shown.push(Bun.inspect(read), JSON.stringify(read), String(read.value));
  expect(read.value.reveal()).toBe(VALUE);
  expect(read.version).toBe(second);
  expect(read.version).not.toBe(first);
  expect(server.counts.getSecretValue).toBe(before + 1);
  const req = server.captured.at(-1)!;
  expect(req.method).toBe("POST");
  expect(req.target).toBe("/");
  expect(header(req.headers, "x-amz-target")).toBe("secretsmanager.GetSecretValue");
  expect(header(req.headers, "content-type")).toBe("application/x-amz-json-1.1");
  expect(header(req.headers, "x-amz-security-token")).toBe(SESSION_TOKEN);
  expect(header(req.headers, "authorization")).toMatch(
    new RegExp(
      `^AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/\\d{8}/${REGION}/secretsmanager/aws4_request, SignedHeaders=[^,]*x-amz-target[^,]*, Signature=[0-9a-f]{64}$`,
    ),
  );
  expect(JSON.parse(req.body)).toEqual({ SecretId: "app/db" });
  for (const [, v] of req.headers) expect(v).not.toContain(SECRET_KEY);
  expect(req.body).not.toContain(SECRET_KEY);
  // by ARN too (the server resolves both)
  expect((await client().read({ path: server.arnOf("app/db") })).value.reveal()).toBe(VALUE);
});

test("reads by VersionId, by AWSPREVIOUS and by a custom staging label", async () => {
  const v1 = server.put("app/versions", "one");
  const v2 = server.put("app/versions", "two");
  const v3 = server.put("app/versions", "three");
  server.stage("app/versions", "blue", v1);
  const c = client();
  expect(await c.read({ path: "app/versions", version: v1 }).then((r) => [r.value.reveal(), r.version])).toEqual(["one", v1]);
  expect(JSON.parse(server.captured.at(-1)!.body)).toEqual({ SecretId: "app/versions", VersionId: v1 });
  expect(await c.read({ path: "app/versions", version: "AWSPREVIOUS" }).then((r) => [r.value.reveal(), r.version])).toEqual(["two", v2]);
  expect(JSON.parse(server.captured.at(-1)!.body)).toEqual({ SecretId: "app/versions", VersionStage: "AWSPREVIOUS" });
  expect(await c.read({ path: "app/versions", version: "AWSCURRENT" }).then((r) => r.version)).toBe(v3);
  expect(await c.read({ path: "app/versions", version: "blue" }).then((r) => [r.value.reveal(), r.version])).toEqual(["one", v1]);
  const gone = await failure(c.read({ path: "app/versions", version: crypto.randomUUID() }));
  expect(gone.kind).toBe("not_found");
});

test("a field is the string value of that key of a JSON SecretString", async () => {
  const v = server.put("app/json", JSON.stringify({ username: "svc", password: VALUE, port: 5432 }));
  const c = client();
  const read = await c.read({ path: "app/json", field: "password" });
  expect(read.value.reveal()).toBe(VALUE);
  expect(read.version).toBe(v);
  expect((await c.read({ path: "app/json", field: "username" })).value.reveal()).toBe("svc");
  const missing = await failure(c.read({ path: "app/json", field: "nope" }));
  expect(missing.kind).toBe("not_found");
  expect(missing.message).toContain("nope");
  expect((await failure(c.read({ path: "app/json", field: "port" }))).kind).toBe("invalid");
  server.put("app/plain", VALUE);
  const notJson = await failure(c.read({ path: "app/plain", field: "password" }));
  expect(notJson.kind).toBe("invalid");
  expect(notJson.message).not.toContain(VALUE);
});

test("a binary secret (SecretBinary, base64 on the wire) reads as its bytes' text; its JSON fields too", async () => {
  const v = server.put("app/binary", new TextEncoder().encode(VALUE));
  const read = await client().read({ path: "app/binary" });
  expect(read.value.reveal()).toBe(VALUE);
  expect(read.version).toBe(v);
  server.put("app/binary-json", new TextEncoder().encode(JSON.stringify({ key: VALUE })));
  expect((await client().read({ path: "app/binary-json", field: "key" })).value.reveal()).toBe(VALUE);
  server.put("app/binary-raw", new Uint8Array([0xff, 0xfe, 0x00, 0x80]));
  expect((await failure(client().read({ path: "app/binary-raw" }))).kind).toBe("invalid");
});

test("errors map to not_found, denied and unreachable, naming the code and path, never the server's message", async () => {
  const c = client();
  const nf = await failure(c.read({ path: "app/missing" }));
  expect(nf.kind).toBe("not_found");
  expect(nf.message).toContain("app/missing");
  expect(nf.message).toContain("ResourceNotFoundException");
  expect(nf.message).not.toContain("can't find");

  server.put("app/locked", VALUE);
  server.denied.add("app/locked");
  const denied = await failure(c.read({ path: "app/locked" }));
  expect(denied.kind).toBe("denied");
  expect(denied.message).toContain("AccessDeniedException");
  expect(denied.message).not.toContain("not authorized");

  const unknownKey = await failure(
    client({ kind: "keys", accessKeyId: new Secret("AKIDUNKNOWN00001"), secretAccessKey: new Secret(SECRET_KEY) }).read({ path: "app/db" }),
  );
  expect(unknownKey.kind).toBe("denied");
  expect(unknownKey.message).toContain("UnrecognizedClientException");

  server.failing = true;
  try {
    const down = await failure(c.read({ path: "app/db" }));
    expect(down.kind).toBe("unreachable");
    expect(down.status).toBe(500);
  } finally {
    server.failing = false;
  }

  const closed = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  const closedPort = closed.port;
  closed.stop(true);
  const gone = await failure(
    createAwsSecretsClient(deps, { region: REGION, endpoint: `https://localhost:${closedPort}`, auth: keysAuth() }).read({ path: "app/db" }),
  );
  expect(gone.kind).toBe("unreachable");
});

test("a bad signature is refused with AWS's InvalidSignatureException shape and reads as denied", async () => {
  const refusedBefore = server.counts.refused;
  const wrong = await failure(
    client({ kind: "keys", accessKeyId: new Secret(ACCESS_KEY), secretAccessKey: new Secret("not-the-key"), sessionToken: new Secret(SESSION_TOKEN) }).read({
      path: "app/db",
    }),
  );
  expect(wrong.kind).toBe("denied");
  expect(wrong.message).toContain("InvalidSignatureException");
  expect(wrong.message).not.toContain("calculated");
  expect(server.counts.refused).toBe(refusedBefore + 1);

  // the raw answer is AWS's: 400, x-amzn-ErrorType, {"__type","message"}
  const res = await fetch(`${server.url}/`, {
    method: "POST",
    headers: {
      "content-type": "application/x-amz-json-1.1",
      "x-amz-target": "secretsmanager.GetSecretValue",
      "x-amz-date": "20260101T000000Z",
      authorization: `AWS4-HMAC-SHA256 Credential=${ACCESS_KEY}/20260101/${REGION}/secretsmanager/aws4_request, SignedHeaders=host;x-amz-date, Signature=${"0".repeat(64)}`,
    },
    body: JSON.stringify({ SecretId: "app/db" }),
    tls: { ca: server.pki.caPem },
  } as RequestInit);
  expect(res.status).toBe(400);
  expect(res.headers.get("x-amzn-errortype")).toBeTruthy();
  const body = (await res.json()) as { __type: string; message: string };
  expect(["InvalidSignatureException", "UnrecognizedClientException"]).toContain(body.__type);

  // a body changed after signing fails the server's own check
  await client().read({ path: "app/db" });
  const good = server.captured.at(-1)!;
  const ok = verifySigV4(
    { method: good.method, target: good.target, headers: good.headers, body: new TextEncoder().encode(good.body) },
    () => ({ accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY, sessionToken: SESSION_TOKEN }),
    { region: REGION, service: "secretsmanager", now: Date.now() },
  );
  expect(ok).toBeUndefined();
  const tampered = verifySigV4(
    { method: good.method, target: good.target, headers: good.headers, body: new TextEncoder().encode(good.body.replace("app/db", "app/dc")) },
    () => ({ accessKeyId: ACCESS_KEY, secretAccessKey: SECRET_KEY, sessionToken: SESSION_TOKEN }),
    { region: REGION, service: "secretsmanager", now: Date.now() },
  );
  expect(tampered?.code).toBe("InvalidSignatureException");
});

const botocore = findBotocorePython();

test.skipIf(!botocore.python)("botocore verifies a captured request's signature, and the server accepts one botocore signed", async () => {
  await client().read({ path: "app/db" });
  const req = server.captured.at(-1)!;
  const script = `
import sys, json, datetime
sys.path.insert(0, ${JSON.stringify(HELPERS)})
from aws_sigv4_check import verify_signature, Refused
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
spec = json.load(sys.stdin)
now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
out = {}
try:
    verify_signature(spec["config"], spec["method"], spec["target"], spec["headers"], spec["body_hash"], now)
    out["verified"] = True
except Refused as r:
    out["verified"] = False
    out["code"] = r.code
    out["reason"] = r.reason
try:
    verify_signature(dict(spec["config"], secret_key="not-the-key"), spec["method"], spec["target"], spec["headers"], spec["body_hash"], now)
    out["wrong_key_verified"] = True
except Refused as r:
    out["wrong_key_verified"] = False
c = spec["config"]
signed = AWSRequest(method="POST", url=spec["url"], data=spec["body"].encode(), headers={"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": "secretsmanager.GetSecretValue"})
SigV4Auth(Credentials(c["access_key"], c["secret_key"], c["session_token"]), "secretsmanager", c["region"]).add_auth(signed)
out["signed"] = dict(signed.headers.items())
json.dump(out, sys.stdout)
`;
  const config = { access_key: ACCESS_KEY, secret_key: SECRET_KEY, session_token: SESSION_TOKEN, region: REGION, service: "secretsmanager" };
  const body = JSON.stringify({ SecretId: "app/db" });
  const p = Bun.spawn([botocore.python!, "-B", "-c", script], {
    stdin: new TextEncoder().encode(
      JSON.stringify({
        config,
        method: req.method,
        target: req.target,
        headers: req.headers,
        body_hash: createHash("sha256").update(req.body).digest("hex"),
        url: `${server.url}/`,
        body,
      }),
    ),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`botocore script failed: ${err}`);
  const result = JSON.parse(out) as { verified: boolean; code?: string; reason?: string; signed: Record<string, string> };
  expect(result).toMatchObject({ verified: true, wrong_key_verified: false });
  // botocore's own signing, sent as is: the stand-in's independent verifier accepts it
  const res = await fetch(`${server.url}/`, { method: "POST", headers: result.signed, body, tls: { ca: server.pki.caPem } } as RequestInit);
  const answer = (await res.json()) as { SecretString?: string };
  expect(res.status).toBe(200);
  expect(answer.SecretString).toBe(VALUE);
});

/** The official SDK: from the project if it is a dependency, else from AWS_SM_SDK_DIR (a scratch npm install). */
function sdkEntry(): string | undefined {
  for (const from of [import.meta.dir, process.env.AWS_SM_SDK_DIR].filter((d): d is string => !!d)) {
    try {
      return Bun.resolveSync("@aws-sdk/client-secrets-manager", from);
    } catch {}
  }
  return undefined;
}
const sdk = sdkEntry();
if (!sdk) console.warn("skipping the @aws-sdk/client-secrets-manager test: not installed (devDependency, or AWS_SM_SDK_DIR)");

test.skipIf(!sdk)("the official SDK's GetSecretValueCommand reads from the stand-in: by default, by VersionId and by stage, and gets its errors", async () => {
  const v1 = server.put("sdk/secret", "sdk-one");
  const v2 = server.put("sdk/secret", VALUE);
  const scriptPath = join(tmp, "sdk.mjs");
  writeFileSync(
    scriptPath,
    `import { SecretsManagerClient, GetSecretValueCommand } from ${JSON.stringify(sdk)};
const c = new SecretsManagerClient({
  region: ${JSON.stringify(REGION)},
  endpoint: ${JSON.stringify(server.url)},
  credentials: { accessKeyId: ${JSON.stringify(ACCESS_KEY)}, secretAccessKey: process.env.SK, sessionToken: process.env.ST },
  maxAttempts: 1,
});
const out = {};
const latest = await c.send(new GetSecretValueCommand({ SecretId: "sdk/secret" }));
out.latest = [latest.SecretString, latest.VersionId, latest.VersionStages];
const byId = await c.send(new GetSecretValueCommand({ SecretId: "sdk/secret", VersionId: ${JSON.stringify(v1)} }));
out.byId = [byId.SecretString, byId.VersionId];
const prev = await c.send(new GetSecretValueCommand({ SecretId: "sdk/secret", VersionStage: "AWSPREVIOUS" }));
out.prev = [prev.SecretString, prev.VersionId];
const bin = await c.send(new GetSecretValueCommand({ SecretId: "app/binary" }));
out.binary = Buffer.from(bin.SecretBinary).toString();
try { await c.send(new GetSecretValueCommand({ SecretId: "sdk/missing" })); } catch (e) { out.missing = e.name; }
const bad = new SecretsManagerClient({ region: ${JSON.stringify(REGION)}, endpoint: ${JSON.stringify(server.url)}, maxAttempts: 1,
  credentials: { accessKeyId: ${JSON.stringify(ACCESS_KEY)}, secretAccessKey: "wrong", sessionToken: process.env.ST } });
try { await bad.send(new GetSecretValueCommand({ SecretId: "sdk/secret" })); } catch (e) { out.badSignature = e.name; }
console.log(JSON.stringify(out));
`,
  );
  const caFile = join(tmp, "ca.pem");
  writeFileSync(caFile, server.pki.caPem);
  const before = server.counts.getSecretValue;
  const p = Bun.spawn([process.execPath, scriptPath], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", NODE_EXTRA_CA_CERTS: caFile, SK: SECRET_KEY, ST: SESSION_TOKEN, AWS_EC2_METADATA_DISABLED: "true" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`SDK script failed: ${err}`);
  const result = JSON.parse(out.trim().split("\n").at(-1)!);
  expect(result).toEqual({
    latest: [VALUE, v2, ["AWSCURRENT"]],
    byId: ["sdk-one", v1],
    prev: ["sdk-one", v1],
    binary: VALUE,
    missing: "ResourceNotFoundException",
    badSignature: "InvalidSignatureException",
  });
  expect(server.counts.getSecretValue).toBe(before + 5);
});

test("environment credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, read at each read", async () => {
  const env: Record<string, string | undefined> = { AWS_ACCESS_KEY_ID: ACCESS_KEY, AWS_SECRET_ACCESS_KEY: SECRET_KEY, AWS_SESSION_TOKEN: SESSION_TOKEN };
  const c = client({ kind: "environment" }, { env });
  expect((await c.read({ path: "app/db" })).value.reveal()).toBe(VALUE);
  expect(header(server.captured.at(-1)!.headers, "x-amz-security-token")).toBe(SESSION_TOKEN);
  expect(c.sentValues().map((s) => s.reveal())).toEqual([SESSION_TOKEN]);
  // long-term keys: no session token sent
  env.AWS_ACCESS_KEY_ID = "AKIDLONGTERM0001";
  delete env.AWS_SESSION_TOKEN;
  expect((await c.read({ path: "app/db" })).value.reveal()).toBe(VALUE);
  expect(header(server.captured.at(-1)!.headers, "x-amz-security-token")).toBeUndefined();
  // nothing in the environment
  const none = await failure(client({ kind: "environment" }, { env: {} }).read({ path: "app/db" }));
  expect(none.kind).toBe("invalid");
  expect(none.message).toContain("AWS_WEB_IDENTITY_TOKEN_FILE");
});

test("web identity: AssumeRoleWithWebIdentity with the token file (re-read at each exchange), credentials kept until shortly before Expiration", async () => {
  const clock = { now: Date.now() };
  serverNow = () => clock.now;
  const tokenFile = join(tmp, "web-identity-token");
  const role = "arn:aws:iam::123456789012:role/broker-reader";
  const tokenA = `web-identity-a-${crypto.randomUUID()}`;
  const tokenB = `web-identity-b-${crypto.randomUUID()}`;
  server.acceptWebIdentity(tokenA, role);
  server.acceptWebIdentity(tokenB, role);
  writeFileSync(tokenFile, `${tokenA}\n`);
  const env = { AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: role, AWS_ROLE_SESSION_NAME: "broker-test" };
  const reads: string[] = [];
  const c = client(
    { kind: "environment" },
    {
      env,
      now: () => clock.now,
      readFile: async (p) => {
        reads.push(p);
        return Bun.file(p).text();
      },
    },
  );
  const assumeBefore = server.counts.assumeRole;
  const [r1, r2] = await Promise.all([c.read({ path: "app/db" }), c.read({ path: "app/json", field: "password" })]);
  expect(r1.value.reveal()).toBe(VALUE);
  expect(r2.value.reveal()).toBe(VALUE);
  expect(server.counts.assumeRole).toBe(assumeBefore + 1); // one exchange for both
  const sts = server.captured.findLast((r) => r.body.includes("Action=AssumeRoleWithWebIdentity"))!;
  const form = new URLSearchParams(sts.body);
  expect(Object.fromEntries(form)).toMatchObject({ Action: "AssumeRoleWithWebIdentity", Version: "2011-06-15", RoleArn: role, RoleSessionName: "broker-test" });
  expect(form.get("WebIdentityToken")).toBe(tokenA);
  const sm = server.captured.at(-1)!;
  expect(header(sm.headers, "authorization")).toContain("Credential=ASIA");
  const tempToken = header(sm.headers, "x-amz-security-token")!;
  expect(tempToken).toStartWith("sts-");
  expect(c.sentValues().map((s) => s.reveal())).toEqual(expect.arrayContaining([tokenA, tempToken]));

  // within the hour: cached, no exchange
  clock.now += 30 * 60_000;
  server.stsDurationSeconds = 3600;
  expect((await c.read({ path: "app/db" })).value.reveal()).toBe(VALUE);
  expect(server.counts.assumeRole).toBe(assumeBefore + 1);
  expect(reads.length).toBe(1);

  // shortly before Expiration: a new exchange, with the file read again (rotated by the platform)
  writeFileSync(tokenFile, tokenB);
  clock.now += 26 * 60_000;
  expect((await c.read({ path: "app/db" })).value.reveal()).toBe(VALUE);
  expect(server.counts.assumeRole).toBe(assumeBefore + 2);
  expect(reads.length).toBe(2);
  expect(server.webIdentityTokens.at(-1)).toBe(tokenB);
  expect(c.sentValues().map((s) => s.reveal())).toEqual(expect.arrayContaining([tokenA, tokenB]));

  // a token STS refuses: denied, named by code only
  writeFileSync(tokenFile, "not-a-token-sts-knows");
  const refused = await failure(
    client({ kind: "environment" }, { env: { AWS_WEB_IDENTITY_TOKEN_FILE: tokenFile, AWS_ROLE_ARN: role } }).read({ path: "app/db" }),
  );
  expect(refused.kind).toBe("denied");
  expect(refused.message).toContain("InvalidIdentityToken");
  expect(refused.message).not.toContain("verification key");
  const unreadable = await failure(
    client({ kind: "environment" }, { env: { AWS_WEB_IDENTITY_TOKEN_FILE: join(tmp, "absent"), AWS_ROLE_ARN: role } }).read({ path: "app/db" }),
  );
  expect(unreadable.kind).toBe("invalid");
  serverNow = Date.now;
});

test("the network guard refuses a blocked address before anything is sent", async () => {
  const total = server.counts.total;
  // a fresh upstream: the guard judges addresses when dialling, and the shared one holds a checked keep-alive connection
  const fresh = createUpstream({ ca: [server.pki.caPem], connectTimeoutMs: 3000 });
  const guarded = createAwsSecretsClient(
    { upstream: fresh, policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [] }), resolver: async () => ["127.0.0.1"] },
    { region: REGION, endpoint: server.url, auth: keysAuth() },
  );
  const blocked = await failure(guarded.read({ path: "app/db" }));
  expect(blocked.message).toContain("blocked by the network guard");
  const metadata = await failure(
    createAwsSecretsClient(
      { upstream: fresh, policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: ["169.254.0.0/16"] }), resolver: async () => ["169.254.169.254"] },
      { region: REGION, endpoint: "https://secretsmanager.example.test", auth: keysAuth() },
    ).read({ path: "app/db" }),
  );
  expect(metadata.message).toContain("blocked by the network guard");
  expect(server.counts.total).toBe(total);
  fresh.close();
  const plain = await failure(
    createAwsSecretsClient(deps, { region: REGION, endpoint: `http://localhost:${server.port}`, auth: keysAuth() }).read({ path: "x" }),
  );
  expect(plain.kind).toBe("invalid");
});

test("sentValues names the session token, never the secret key; nothing printed holds a value, key or token", async () => {
  const c = client();
  await c.read({ path: "app/db" });
  const sent = c.sentValues().map((s) => s.reveal());
  expect(sent).toEqual([SESSION_TOKEN]);
  expect(sent).not.toContain(SECRET_KEY);
  shown.push(Bun.inspect(c), Bun.inspect(c.sentValues()), String(c.sentValues()), JSON.stringify(c.sentValues()));
  shown.push(Bun.inspect(keysAuth()), JSON.stringify(keysAuth()));
  const all = shown.join("\n");
  expect(all.length).toBeGreaterThan(0);
  for (const needle of [VALUE, SECRET_KEY, SESSION_TOKEN]) expect(all).not.toContain(needle);
});
