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

  test.skipIf(!hasCurl)(
    "audit records name the workload (issuer and subject), the chain verifies, and the Agents page lists the workloads seen",
    async () => {
      const sub = "repo:org/repo:environment:production";
      const curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", `https://${service}/audited`];
      const run = await cli(agentEnv, ["vault", "run", "--identity-token-file", tokenFile("gh-audit.jwt", await gh.sign(github())), "--", ...curl]);
      expect({ code: run.exitCode, stdout: run.stdout }).toEqual({ code: 0, stdout: "200" });
      // The audit writer batches: wait for the record.
      let records: any[] = [];
      for (let i = 0; i < 50 && !records.some((r) => r.path === "/audited"); i++) {
        if (i) await Bun.sleep(100);
        const logs = await cli(owner, ["logs", "--vault", "deploy", "--json", "--host", service]);
        expectOk(logs);
        records = JSON.parse(logs.stdout);
      }
      const audited = records.find((r) => r.path === "/audited");
      expect(audited).toMatchObject({ principal_name: "wl-github-ci", workload: { issuer: gh.url, subject: sub } });
      const table = await cli(owner, ["logs", "--vault", "deploy", "--host", service]);
      expect(table.stdout).toContain("WORKLOAD");
      expect(table.stdout).toContain(sub);
      // The hash chain covers the workload: export and verify offline.
      const file = join(tempDir(), "audit.jsonl");
      expectOk(await cli(owner, ["audit", "export", "--vault", "deploy", "--output", file]));
      const exported = (await Bun.file(file).text()).split("\n").filter((l) => l.includes('"type":"record"'));
      expect(exported.some((l) => l.includes(`"workload_subject":"${sub}"`) && l.includes(`"workload_issuer":"${gh.url}"`))).toBe(true);
      const verified = await cli(owner, ["audit", "verify", "--from-export", file]);
      expect({ code: verified.exitCode, err: verified.stderr }).toEqual({ code: 0, err: "" });
      const online = await cli(owner, ["audit", "verify", "--vault", "deploy"]);
      expect({ code: online.exitCode, err: online.stderr }).toEqual({ code: 0, err: "" });
      // The console's Agents page lists the workload under its binding's agent.
      const page = await fetch(`${server.url}/vaults/deploy/agents`, { headers: { cookie: `broker_session=${owner.BROKER_SESSION_TOKEN}` } });
      const html = await page.text();
      outputs.push(html);
      expect(page.status).toBe(200);
      expect(html).toContain("Workloads seen");
      expect(html).toContain(sub);
      expect(html).toContain("wl-github-ci");
    },
    60_000,
  );

  test("an issuer whose keys are given as a file, requiring a jti; its keys replaced with workload-issuer update", async () => {
    // An issuer the broker cannot reach: its keys come from a file, its server is gone before any exchange.
    const offline = await startTestIssuer({ pki: upstream.pki, alg: "ES256" });
    const keys = join(tempDir(), "cluster-jwks.json");
    writeFileSync(keys, JSON.stringify(offline.keySet()));
    await offline.close();
    const added = await cli(owner, [
      "workload-issuer",
      "add",
      "cluster",
      "--issuer",
      offline.url,
      "--jwks-file",
      keys,
      "--audience",
      "broker",
      "--require-jti",
      "--json",
    ]);
    expectOk(added);
    expect(JSON.parse(added.stdout)).toMatchObject({ name: "cluster", jwks_url: null, require_jti: true, jwks_kids: [expect.any(String)] });
    expectOk(await cli(owner, ["workload-binding", "add", "cluster", "jobs", "--vault", "deploy", "--claim", "sub=system:serviceaccount:jobs:*"]));
    const claims = { aud: "broker", sub: "system:serviceaccount:jobs:runner" };
    const withJti = await offline.sign({ ...claims, jti: crypto.randomUUID() });
    tokenFile("cluster-1.jwt", withJti);
    const ok = await exchange(withJti);
    expect(ok.status).toBe(200);
    secrets.push(ok.body.access_token);
    const noJti = await offline.sign(claims);
    tokenFile("cluster-2.jwt", noJti);
    expectEnvelope(await exchange(noJti), /requires a token id \(jti\)/);

    // A private key in the file is refused by name, before anything is stored.
    const { privateKey } = await import("jose").then((j) => j.generateKeyPair("ES256", { extractable: true }));
    const leaked = join(tempDir(), "private-jwks.json");
    writeFileSync(leaked, JSON.stringify({ keys: [await (await import("jose")).exportJWK(privateKey)] }));
    const refused = await cli(owner, ["workload-issuer", "update", "cluster", "--jwks-file", leaked]);
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toContain("private part");

    // Rotated: the new file replaces the keys; the binding stays; a token under the old key no longer verifies.
    await offline.rotate();
    writeFileSync(keys, JSON.stringify(offline.keySet()));
    const updated = await cli(owner, ["workload-issuer", "update", "cluster", "--jwks-file", keys, "--no-require-jti", "--json"]);
    expectOk(updated);
    expect(JSON.parse(updated.stdout)).toMatchObject({ require_jti: false, audiences: ["broker"] });
    const fresh = await offline.sign(claims);
    tokenFile("cluster-3.jwt", fresh);
    const again = await exchange(fresh);
    expect(again.status).toBe(200);
    secrets.push(again.body.access_token);
    const stale = await offline.sign({ ...claims, jti: crypto.randomUUID() }, { kid: JSON.parse(added.stdout).jwks_kids[0] });
    tokenFile("cluster-4.jwt", stale);
    expectEnvelope(await exchange(stale), /key id|signature/);
    const bindings = await cli(owner, ["workload-binding", "list", "cluster", "--json"]);
    expect(JSON.parse(bindings.stdout).map((b: { name: string }) => b.name)).toEqual(["jobs"]);
  });
});
