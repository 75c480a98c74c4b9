// Real clients through the transparent proxy to hosts the vault refuses: with unmatched_hosts = deny,
// curl and Python requests see the 403 `forbidden` body with its proposal_hint (not just "CONNECT
// tunnel failed"); a disabled service gives 403 `service_disabled`. Nothing reaches an upstream.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { requireBinary, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;

beforeAll(async () => {
  env = await startTunnelEnv();
  const b = env.broker;
  const patch = await b.api("PATCH", `/v1/vaults/${b.vault}`, { unmatched_hosts: "deny" }, b.userToken);
  if (patch.status !== 200) throw new Error(`PATCH vault: ${patch.status}`);
});
afterAll(async () => {
  await env?.stop();
});

async function run(cmd: string[], extraEnv: Record<string, string> = {}) {
  const home = join(env.dir, "home");
  mkdirSync(home, { recursive: true });
  const proc = Bun.spawn(cmd, {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8", ...extraEnv },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code };
}

async function pythonReady(): Promise<boolean> {
  if (!requireBinary("python3", "python3-requests")) return false;
  if ((await run(["python3", "-c", "import requests"])).code === 0) return true;
  if (process.env.CI === "true") throw new Error("python3 requests is missing: apt-get install python3-requests (listed in .ci/run)");
  return false;
}

const PYTHON = "import requests,sys\nr=requests.post(sys.argv[1], data=b'secret-body')\nprint(r.status_code)\nprint(r.text)";

describe("unmatched_hosts = deny through real clients", () => {
  test.each([
    ["--http1.1", "1\\.1"],
    ["--http2", "2"],
  ])("curl %s sees 403 forbidden with the proposal_hint in the body", async (protocol, version) => {
    if (!requireBinary("curl", "curl")) return;
    const r = await run(["curl", "-sS", "-i", protocol, "--proxy", env.proxyUrl, "--cacert", env.caFile, "https://denied.example/v1/things?x=1"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(r.stdout).toMatch(new RegExp(`\r\nHTTP/${version} 403 `));
    const body = JSON.parse(r.stdout.slice(r.stdout.lastIndexOf("\r\n\r\n") + 4));
    expect(body.error).toBe("forbidden");
    expect(JSON.stringify(body.proposal_hint)).toContain("denied.example");
  });

  test("Python requests sees 403 forbidden with the proposal_hint; the body goes nowhere", async () => {
    if (!(await pythonReady())) return;
    const before = env.upstream.received.length;
    const r = await run(["python3", "-c", PYTHON, "https://denied.example/upload"], { HTTPS_PROXY: env.proxyUrl, REQUESTS_CA_BUNDLE: env.caFile });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const [status, ...rest] = r.stdout.split("\n");
    expect(status).toBe("403");
    const body = JSON.parse(rest.join("\n"));
    expect(body.error).toBe("forbidden");
    expect(JSON.stringify(body.proposal_hint)).toContain("denied.example");
    expect(env.upstream.received.length).toBe(before);
  });

  test("the refusal is audited like /proxy's", async () => {
    let record: any;
    for (let i = 0; i < 40 && !record; i++) {
      record = (await env.broker.auditLogs()).find((l) => l.host === "denied.example" && l.ingress === "transparent");
      if (!record) await Bun.sleep(100);
    }
    expect(record).toBeDefined();
    expect(record.status).toBe(403);
    expect(record.error).toBe("forbidden");
  });
});

describe("a disabled service through real clients", () => {
  test("curl and Python requests see 403 service_disabled; the upstream sees nothing", async () => {
    const b = env.broker;
    const patch = await b.api("PATCH", `/v1/vaults/${b.vault}/services/${encodeURIComponent(env.authority)}`, { enabled: false }, b.userToken);
    expect(patch.status).toBe(200);
    try {
      const before = env.upstream.received.length;
      if (requireBinary("curl", "curl")) {
        const r = await run(["curl", "-sS", "--proxy", env.proxyUrl, "--cacert", env.caFile, "-w", "\n%{http_code}", `https://${env.authority}/off`]);
        expect(r.code).toBe(0);
        const lines = r.stdout.split("\n");
        expect(lines.at(-1)).toBe("403");
        expect(JSON.parse(lines.slice(0, -1).join("\n")).error).toBe("service_disabled");
      }
      if (await pythonReady()) {
        const r = await run(["python3", "-c", PYTHON, `https://${env.authority}/off`], { HTTPS_PROXY: env.proxyUrl, REQUESTS_CA_BUNDLE: env.caFile });
        expect(r.code).toBe(0);
        const [status, ...rest] = r.stdout.split("\n");
        expect(status).toBe("403");
        expect(JSON.parse(rest.join("\n")).error).toBe("service_disabled");
      }
      expect(env.upstream.received.length).toBe(before);
    } finally {
      await b.api("PATCH", `/v1/vaults/${b.vault}/services/${encodeURIComponent(env.authority)}`, { enabled: true }, b.userToken);
    }
  });
});
