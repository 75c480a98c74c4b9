// Workload identity end to end (issue 39): the CLI from source, with no broker token at all, runs
// `broker vault run --identity-token-file <file> -- curl …` (and the same with BROKER_IDENTITY_TOKEN_FILE) against an
// in-process broker with its transparent proxy; the platform token (signed by a test issuer whose JWKS is served over
// HTTPS on loopback under the CA the broker trusts) is exchanged for a session, curl's request reaches the upstream
// with the credential injected, and the session is revoked when the command exits. A refused token is explained, and
// neither the credential nor any token appears in any output or log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startTestIssuer, type TestIssuer } from "../helpers/workload-issuer.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
const SECRET = `sk_workload_${crypto.randomUUID()}`;
const outputs: string[] = [];
const platformTokens: string[] = [];
let upstream: TestUpstream;
let issuer: TestIssuer;
let broker: Broker;
let dir = "";
let service = "";

async function cli(args: string[], env: Record<string, string> = {}) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, BROKER_CONFIG_DIR: join(dir, "config"), BROKER_ADDR: broker.apiUrl, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  outputs.push(stdout, stderr);
  return { code, stdout, stderr };
}

function tokenFile(name: string, token: string): string {
  platformTokens.push(token);
  const path = join(dir, name);
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  return path;
}

const github = (over: Record<string, unknown> = {}) => ({
  aud: "https://broker.example",
  sub: "repo:org/repo:ref:refs/heads/main",
  repository: "org/repo",
  ref: "refs/heads/main",
  environment: "production",
  job_workflow_ref: "org/repo/.github/workflows/deploy.yml@refs/heads/main",
  jti: crypto.randomUUID(),
  ...over,
});

const hasCurl = Bun.which("curl") !== null;

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { ips: ["127.0.0.1"] } });
  issuer = await startTestIssuer({ pki: upstream.pki });
  broker = await startBroker({ caPem: upstream.pki.caPem, tunnel: true });
  service = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(service, { type: "bearer", token: "API_KEY" });
  dir = mkdtempSync(join(tmpdir(), "broker-identity-run-"));
  const owner = broker.userToken;
  expect((await broker.api("POST", "/v1/workload-issuers", { name: "github", issuer: issuer.url, audiences: ["https://broker.example"] }, owner)).status).toBe(
    201,
  );
  const binding = { name: "deploy", vault: broker.vault, conditions: { repository: "org/repo", ref: "refs/heads/main", environment: "production" } };
  expect((await broker.api("POST", "/v1/workload-issuers/github/bindings", binding, owner)).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await expectNoLeak(broker, SECRET, outputs);
  for (const t of platformTokens) {
    const signature = t.split(".")[2]!;
    for (const o of outputs) expect(o).not.toContain(signature);
    for (const l of broker.logLines) expect(l).not.toContain(signature);
  }
  await broker?.stop();
  await issuer?.close();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("vault run with the platform's identity", () => {
  test.skipIf(!hasCurl)(
    "--identity-token-file: curl's request gets the credential injected; the session ends with the command",
    async () => {
      const file = tokenFile("gh.jwt", await issuer.sign(github()));
      const before = upstream.received.length;
      const run = await cli(["vault", "run", "--identity-token-file", file, "--", "curl", "-sS", `https://${service}/deploy`]);
      expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: "" });
      expect(run.stdout).toContain('"url":"/deploy"');
      expect(upstream.received.length).toBe(before + 1);
      const seen = upstream.received.at(-1)!;
      expect(seen.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k))).toEqual([["authorization", `Bearer ${SECRET}`]]);
      // The audit names the binding's agent; the session was revoked at exit, so the Agents page counts none live.
      await Bun.sleep(400);
      const audit = await broker.auditLogs();
      expect(audit.find((r: { path: string }) => r.path === "/deploy")).toMatchObject({ principal_name: "wl-github-deploy", status: 200 });
      const agents = await broker.api("GET", "/v1/agents", undefined, broker.userToken);
      expect(agents.body.agents.find((a: { name: string }) => a.name === "wl-github-deploy")).toMatchObject({ sessions: 0 });
    },
    60_000,
  );

  test.skipIf(!hasCurl)(
    "BROKER_IDENTITY_TOKEN_FILE does the same; a token the binding does not admit is refused and says why",
    async () => {
      const file = tokenFile("env.jwt", await issuer.sign(github()));
      const ok = await cli(["vault", "run", "--", "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", `https://${service}/env`], {
        BROKER_IDENTITY_TOKEN_FILE: file,
      });
      expect({ code: ok.code, stdout: ok.stdout }).toEqual({ code: 0, stdout: "200" });
      const wrong = tokenFile("wrong.jwt", await issuer.sign(github({ ref: "refs/heads/feature" })));
      const refused = await cli(["vault", "run", "--identity-token-file", wrong, "--", "true"]);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("no binding of issuer github admits");
      const expired = tokenFile("old.jwt", await issuer.sign(github(), { now: Date.now() - 3_600_000 }));
      const late = await cli(["vault", "run", "--identity-token-file", expired, "--", "true"]);
      expect(late.stderr).toContain("expired");
    },
    60_000,
  );

  test.skipIf(!hasCurl)(
    "a token the platform rotates while the command runs renews its session past the first token's expiry",
    async () => {
      const file = tokenFile("rotating.jwt", await issuer.sign(github(), { ttlSec: 12 }));
      const run = cli([
        "vault",
        "run",
        "--identity-token-file",
        file,
        "--",
        "sh",
        "-c",
        `sleep 14; curl -sS -o /dev/null -w '%{http_code}' https://${service}/late`,
      ]);
      await Bun.sleep(1_000);
      const fresh = await issuer.sign(github(), { ttlSec: 600 });
      platformTokens.push(fresh);
      writeFileSync(file, fresh);
      const done = await run;
      expect({ code: done.code, stdout: done.stdout, stderr: done.stderr }).toEqual({ code: 0, stdout: "200", stderr: "" });
      expect(broker.logLines.some((l) => l.includes("workload_exchange") && l.includes('"renewed":true'))).toBe(true);
    },
    60_000,
  );

  test.skipIf(!hasCurl)(
    "the owner's CLI adds a Kubernetes issuer and binding; a projected service-account token then signs in",
    async () => {
      const owner = { BROKER_SESSION_TOKEN: broker.userToken, BROKER_CONFIG_DIR: join(dir, "owner") };
      const k8s = await startTestIssuer({ pki: upstream.pki, alg: "ES256" });
      try {
        const add = await cli(["workload-issuer", "add", "k8s", "--issuer", k8s.url, "--jwks-url", k8s.jwksUrl, "--audience", "broker"], owner);
        expect({ code: add.code, stderr: add.stderr }).toEqual({ code: 0, stderr: "" });
        const bind = await cli(
          [
            "workload-binding",
            "add",
            "k8s",
            "pods",
            "--vault",
            broker.vault,
            "--claim",
            "kubernetes.io/namespace=ci",
            "--claim",
            "kubernetes.io/serviceaccount/name=deployer",
            "--claim",
            "kubernetes.io/serviceaccount/name=ops-*",
          ],
          owner,
        );
        expect({ code: bind.code, stderr: bind.stderr }).toEqual({ code: 0, stderr: "" });
        expect(bind.stdout).toContain("agent wl-k8s-pods");
        const list = await cli(["workload-binding", "list"], owner);
        expect(list.stdout).toContain("kubernetes.io/serviceaccount/name=deployer|ops-*");
        expect(list.stdout).toContain("deploy");
        const issuers = await cli(["workload-issuer", "list", "--json"], owner);
        expect(JSON.parse(issuers.stdout).map((i: { name: string }) => i.name)).toEqual(["github", "k8s"]);
        const claims = {
          aud: ["broker"],
          sub: "system:serviceaccount:ci:ops-7",
          "kubernetes.io": { namespace: "ci", pod: { name: "runner", uid: "p" }, serviceaccount: { name: "ops-7", uid: "s" } },
        };
        const file = tokenFile("k8s.jwt", await k8s.sign(claims));
        const run = await cli([
          "vault",
          "run",
          "--identity-token-file",
          file,
          "--",
          "curl",
          "-sS",
          "-o",
          "/dev/null",
          "-w",
          "%{http_code}",
          `https://${service}/pod`,
        ]);
        expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({ code: 0, stdout: "200", stderr: "" });
        const other = tokenFile("k8s-other.jwt", await k8s.sign({ ...claims, "kubernetes.io": { namespace: "prod", serviceaccount: { name: "ops-7" } } }));
        expect((await cli(["vault", "run", "--identity-token-file", other, "--", "true"])).stderr).toContain("no binding of issuer k8s admits");
        expect((await cli(["workload-issuer", "remove", "k8s"], owner)).code).toBe(0);
      } finally {
        await k8s.close();
      }
    },
    60_000,
  );
});
