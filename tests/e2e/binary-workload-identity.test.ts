// Workload identity with the compiled binary (issue 39 acceptance): `broker server` trusts a test issuer whose JWKS is
// served over HTTPS on loopback (under the CA in BROKER_UPSTREAM_CA_FILE); the owner adds the issuer and bindings with
// the CLI; `broker vault run --identity-token-file` exchanges a GitHub-Actions-shaped token and curl's request gets the
// credential injected; the issuer rotates its keys mid-test and a token under the new key is accepted after the
// broker fetches the key set again; a Kubernetes-shaped token matches its binding; a token with the wrong audience, a
// wrong claim, an expired one, `alg: none`, an HS256 forgery keyed with the public key and a reused `jti` are each
// refused with the envelope. No credential, platform token or session token appears in any output or log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { cleanEnv, expectOk, isolatedBinary, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startTestIssuer, type TestIssuer } from "../helpers/workload-issuer.ts";

const { bin, dir } = isolatedBinary();
const SECRET = `sk_binary_workload_${crypto.randomUUID()}`;
const GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";
const outputs: string[] = [];
const secrets: string[] = [SECRET];
let upstream: TestUpstream;
let gh: TestIssuer;
let k8s: TestIssuer;
let server: ServerProcess;
let owner: Record<string, string>;
let agentEnv: Record<string, string>;
let service = "";
const hasCurl = Bun.which("curl") !== null;

async function cli(env: Record<string, string>, args: string[]): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: { ...env, PATH: process.env.PATH ?? "/usr/bin:/bin" }, cwd: dir });
  outputs.push(r.stdout, r.stderr);
  return r;
}

async function api(method: string, path: string, body: unknown, token?: string) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${server.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (res.status >= 400) outputs.push(text); // a refusal must echo nothing; a success hands out its token by design
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

function tokenFile(name: string, token: string): string {
  secrets.push(token.split(".")[2] || token.split(".")[1]!);
  const path = join(dir, name);
  writeFileSync(path, token, { mode: 0o600 });
  return path;
}

const github = (over: Record<string, unknown> = {}) => ({
  aud: "https://broker.example",
  sub: "repo:org/repo:environment:production",
  repository: "org/repo",
  ref: "refs/heads/main",
  environment: "production",
  job_workflow_ref: "org/repo/.github/workflows/deploy.yml@refs/heads/main",
  run_id: "42",
  jti: crypto.randomUUID(),
  ...over,
});

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { ips: ["127.0.0.1"] } });
  gh = await startTestIssuer({ pki: upstream.pki });
  k8s = await startTestIssuer({ pki: upstream.pki, alg: "ES256" });
  service = `127.0.0.1:${upstream.port}`;
  const caFile = join(tempDir(), "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(tempDir(), "data"),
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
      BROKER_WORKLOAD_JWKS_COOLDOWN_MS: "0",
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  const reg = await api("POST", "/v1/auth/register", { email: "owner@example.com", password: "owner password 123" });
  expect(reg.status).toBe(201);
  secrets.push(reg.body.token);
  owner = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-owner-"), "config"), BROKER_ADDR: server.url, BROKER_SESSION_TOKEN: reg.body.token });
  agentEnv = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-wl-"), "config"), BROKER_ADDR: server.url });
  expect((await api("POST", "/v1/vaults", { name: "deploy" }, reg.body.token)).status).toBe(201);
  expect((await api("PUT", "/v1/vaults/deploy/credentials/API_KEY", { value: SECRET }, reg.body.token)).status).toBe(200);
  expect((await api("POST", "/v1/vaults/deploy/services", { host: service, auth: { type: "bearer", token: "API_KEY" } }, reg.body.token)).status).toBe(201);
  expectOk(await cli(owner, ["workload-issuer", "add", "github", "--issuer", gh.url, "--audience", "https://broker.example"]));
  expectOk(
    await cli(owner, [
      "workload-binding",
      "add",
      "github",
      "ci",
      "--vault",
      "deploy",
      "--claim",
      "repository=org/repo",
      "--claim",
      "sub=repo:org/repo:environment:*",
      "--claim",
      "environment=production",
    ]),
  );
  expectOk(await cli(owner, ["workload-issuer", "add", "k8s", "--issuer", k8s.url, "--jwks-url", k8s.jwksUrl, "--audience", "broker"]));
  expectOk(
    await cli(owner, [
      "workload-binding",
      "add",
      "k8s",
      "pods",
      "--vault",
      "deploy",
      "--claim",
      "kubernetes.io/namespace=ci",
      "--claim",
      "kubernetes.io/serviceaccount/name=deployer",
    ]),
  );
}, 120_000);

afterAll(async () => {
  const logs = server ? server.logs() : "";
  await server?.stop();
  await Promise.all([gh?.close(), k8s?.close(), upstream?.close()]);
  for (const s of secrets) {
    for (const o of outputs) if (o.includes(s) && s !== SECRET) throw new Error("a token leaked into an output");
    expect(logs.includes(s)).toBe(false);
  }
  for (const o of outputs) expect(o.includes(SECRET)).toBe(false);
});

async function exchange(token: string) {
  return api("POST", "/v1/sessions/exchange", { grant_type: GRANT, subject_token: token, subject_token_type: JWT_TYPE });
}

function expectEnvelope(r: { status: number; headers: Headers; body: any }, message: RegExp) {
  expect({ status: r.status, header: r.headers.get("x-broker-error"), error: r.body?.error }).toEqual({
    status: 400,
    header: "invalid_grant",
    error: "invalid_grant",
  });
  expect(r.body.message).toMatch(message);
}

describe("the compiled broker with workload identity", () => {
  test.skipIf(!hasCurl)(
    "vault run --identity-token-file: curl's request gets the credential; keys rotated mid-test are fetched again",
    async () => {
      const curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", `https://${service}/release`];
      const first = await cli(agentEnv, ["vault", "run", "--identity-token-file", tokenFile("gh-1.jwt", await gh.sign(github())), "--", ...curl]);
      expect({ code: first.exitCode, stdout: first.stdout, stderr: first.stderr }).toEqual({ code: 0, stdout: "200", stderr: "" });
      const seen = upstream.received.at(-1)!;
      expect(seen.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k))).toEqual([["authorization", `Bearer ${SECRET}`]]);

      const fetchesBefore = gh.jwksFetches();
      await gh.rotate();
      const second = await cli(agentEnv, ["vault", "run", "--identity-token-file", tokenFile("gh-2.jwt", await gh.sign(github())), "--", ...curl]);
      expect({ code: second.exitCode, stdout: second.stdout, stderr: second.stderr }).toEqual({ code: 0, stdout: "200", stderr: "" });
      expect(gh.jwksFetches()).toBeGreaterThan(fetchesBefore);
    },
    60_000,
  );

  test("a Kubernetes-shaped token matches its binding", async () => {
    const claims = {
      aud: ["broker"],
      sub: "system:serviceaccount:ci:deployer",
      "kubernetes.io": { namespace: "ci", serviceaccount: { name: "deployer", uid: "u" } },
    };
    const token = await k8s.sign(claims);
    tokenFile("k8s.jwt", token);
    const r = await exchange(token);
    expect(r.status).toBe(200);
    secrets.push(r.body.access_token);
    expect(r.body).toMatchObject({ token_type: "Bearer", issued_token_type: "urn:ietf:params:oauth:token-type:access_token", vault: "deploy", role: "proxy" });
  });

  test("each refusal answers with the envelope: audience, claim, expiry, alg none, HS256 forgery, reused jti", async () => {
    const cases: [string, RegExp][] = [
      [await gh.sign(github({ aud: "https://other.example" })), /audience/],
      [await gh.sign(github({ repository: "org/fork", sub: "repo:org/fork:environment:production" })), /no binding/],
      [await gh.sign(github(), { now: Date.now() - 7_200_000 }), /expired/],
      [gh.unsigned(github()), /algorithm/],
      [await gh.hmacForgery(github()), /algorithm/],
    ];
    for (const [token, message] of cases) {
      tokenFile(`refused-${secrets.length}.jwt`, token);
      expectEnvelope(await exchange(token), message);
    }
    const once = await gh.sign(github({ jti: "run-42-attempt-1" }));
    tokenFile("once.jwt", once);
    const ok = await exchange(once);
    expect(ok.status).toBe(200);
    secrets.push(ok.body.access_token);
    expectEnvelope(await exchange(once), /already/);
    // The CLI says the same, and exits non-zero.
    const refused = await cli(agentEnv, ["vault", "run", "--identity-token-file", join(dir, "once.jwt"), "--", "true"]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("already");
  });
});
