// Report mode end to end (issue 39 point 5, architecture.md D33), with an in-process broker, a local HTTPS upstream
// and real clients: fetch through /proxy and curl through HTTPS_PROXY. In enforce mode a request outside the rules is
// refused and never reaches the upstream; switched to report, the same request reaches it with the credential
// injected, its audit record says would_refuse:request_not_allowed with the upstream's status, and /metrics counts
// it; a host without a service under unmatched_hosts = deny gets the blind tunnel (no credential, the upstream's own
// certificate), marked would_refuse:forbidden, while /proxy to it stays refused; switched back, refused again.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectEnvelope, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { requireBinary } from "./tunnel-fixture.ts";
import { sourceCli } from "./cli-from-source.ts";

const SECRET = `sk-report-e2e-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let broker: Broker;
let dir: string;
/** The service's host: "upstream.test:<port>"; the same upstream as "elsewhere.test:<port>" has no service. */
let service: string;
let elsewhere: string;
/** The broker's root CA and the upstream's, in one file: curl trusts an intercepted and a blind tunnel alike. */
let bundle: string;
let proxyUrl: string;
const outputs: string[] = [];

beforeAll(async () => {
  upstream = await startUpstream(
    (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ done: req.url, method: req.method }));
    },
    { names: { dns: ["upstream.test", "elsewhere.test"], ips: ["127.0.0.1"] } },
  );
  broker = await startBroker({ caPem: upstream.pki.caPem, tunnel: true, env: { BROKER_METRICS: "true" } });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  broker.dns.set("elsewhere.test", ["127.0.0.1"]);
  service = `upstream.test:${upstream.port}`;
  elsewhere = `elsewhere.test:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(service, { type: "bearer", token: "API_KEY" }, { rules: [{ methods: ["GET"], paths: ["/allowed/**"] }] });
  expect((await broker.api("PATCH", `/v1/vaults/${broker.vault}`, { unmatched_hosts: "deny" }, broker.userToken)).status).toBe(200);
  const ca = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
  dir = mkdtempSync(join(tmpdir(), "broker-report-e2e-"));
  bundle = join(dir, "ca-bundle.pem");
  writeFileSync(bundle, `${ca.trim()}\n${upstream.pki.caPem.trim()}\n`);
  proxyUrl = `http://${broker.sessionToken}:${broker.vault}@${broker.proxyAddress}`;
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function setMode(policy_mode: "enforce" | "report") {
  const res = await broker.api("PATCH", `/v1/vaults/${broker.vault}`, { policy_mode }, broker.userToken);
  expect(res.status).toBe(200);
  expect(res.body.policy_mode).toBe(policy_mode);
}

/** The newest audit record matching `match`, once the writer has written it. */
async function recordOf(match: (r: any) => boolean): Promise<any> {
  for (let i = 0; i < 50; i++) {
    const found = (await broker.auditLogs()).find(match);
    if (found) return found;
    await Bun.sleep(100);
  }
  throw new Error(`no such audit record in ${JSON.stringify(await broker.auditLogs())}`);
}

/** What reached the upstream at `url`, with its Authorization header. */
function reached(url: string): { method: string; auth: string | undefined }[] {
  return upstream.received
    .filter((r) => r.url === url)
    .map((r) => ({ method: r.method, auth: r.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1] }));
}

async function curl(args: string[]) {
  const proc = Bun.spawn(["curl", "-sS", "--proxy", proxyUrl, "--cacert", bundle, "-w", "\n%{http_code}", ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  outputs.push(stdout, stderr);
  const lines = stdout.split("\n");
  return { code, status: Number(lines.at(-1)), body: lines.slice(0, -1).join("\n"), stderr };
}

describe("report mode through /proxy (fetch)", () => {
  test("outside the rules: refused in enforce; in report it reaches the upstream with the credential, marked; refused again after enforce", async () => {
    await setMode("enforce");
    await expectEnvelope(await broker.proxy(service, "/admin/one", { method: "DELETE" }), 403, "request_not_allowed");
    expect(reached("/admin/one")).toEqual([]);

    await setMode("report");
    const res = await broker.proxy(service, "/admin/one", { method: "DELETE" });
    const text = await res.text();
    outputs.push(text);
    expect(res.status).toBe(200);
    expect(JSON.parse(text)).toEqual({ done: "/admin/one", method: "DELETE" });
    expect(reached("/admin/one")).toEqual([{ method: "DELETE", auth: `Bearer ${SECRET}` }]);
    const record = await recordOf((r) => r.path === "/admin/one" && r.status === 200);
    expect(record).toMatchObject({ ingress: "explicit", method: "DELETE", status: 200, error: "would_refuse:request_not_allowed", service });
    // The marked records, as the console's link and `broker logs --would-refuse` read them.
    const marked = await broker.api("GET", `/v1/vaults/${broker.vault}/logs?would_refuse=true`, undefined, broker.userToken);
    expect(marked.body.logs.map((r: any) => r.path)).toContain("/admin/one");
    expect(marked.body.logs.every((r: any) => r.error.startsWith("would_refuse:"))).toBe(true);

    // A host without a service stays refused on /proxy: there is no credential and no host anyone named.
    await expectEnvelope(await broker.proxy(elsewhere, "/x"), 403, "forbidden");
    expect(reached("/x")).toEqual([]);

    await setMode("enforce");
    await expectEnvelope(await broker.proxy(service, "/admin/one", { method: "DELETE" }), 403, "request_not_allowed");
    expect(reached("/admin/one").length).toBe(1);
  });
});

describe("report mode through HTTPS_PROXY (curl)", () => {
  test("a request outside the rules and a host the vault denies: refused in enforce, through and marked in report, refused again", async () => {
    if (!requireBinary("curl", "curl")) return;
    await setMode("enforce");
    const refused = await curl(["-X", "DELETE", `https://${service}/admin/two`]);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error).toBe("request_not_allowed");
    const denied = await curl([`https://${elsewhere}/blind`]);
    expect(denied.status).toBe(403);
    expect(JSON.parse(denied.body).error).toBe("forbidden");
    expect(reached("/admin/two")).toEqual([]);
    expect(reached("/blind")).toEqual([]);

    await setMode("report");
    const through = await curl(["-X", "DELETE", `https://${service}/admin/two`]);
    expect(through).toMatchObject({ code: 0, status: 200 });
    expect(JSON.parse(through.body)).toEqual({ done: "/admin/two", method: "DELETE" });
    expect(reached("/admin/two")).toEqual([{ method: "DELETE", auth: `Bearer ${SECRET}` }]);
    expect(await recordOf((r) => r.path === "/admin/two" && r.status === 200)).toMatchObject({
      ingress: "transparent",
      error: "would_refuse:request_not_allowed",
      service,
    });

    // The denied host gets the blind tunnel `tunnel` would open: the upstream's own certificate, no credential.
    const blind = await curl([`https://${elsewhere}/blind`]);
    expect(blind).toMatchObject({ code: 0, status: 200 });
    expect(reached("/blind")).toEqual([{ method: "GET", auth: undefined }]);
    expect(await recordOf((r) => r.ingress === "blind" && r.host === elsewhere)).toMatchObject({
      method: "CONNECT",
      status: 200,
      service: null,
      error: "would_refuse:forbidden",
    });

    await setMode("enforce");
    const again = await curl(["-X", "DELETE", `https://${service}/admin/two`]);
    expect(again.status).toBe(403);
    expect(JSON.parse(again.body).error).toBe("request_not_allowed");
    const deniedAgain = await curl([`https://${elsewhere}/blind`]);
    expect(JSON.parse(deniedAgain.body).error).toBe("forbidden");
    expect(reached("/admin/two").length).toBe(1);
    expect(reached("/blind").length).toBe(1);
  });
});

describe("the CLI", () => {
  test("vault set --policy-mode, service update --rules-mode and logs --would-refuse, as a person runs them", async () => {
    const home = join(dir, "cli-home");
    const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);
    await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
    await ok(["vault", "use", broker.vault]);
    expect(await ok(["vault", "set", "--policy-mode", "report"])).toContain("is in report mode");
    expect((await broker.api("GET", `/v1/vaults/${broker.vault}`, undefined, broker.userToken)).body.policy_mode).toBe("report");
    expect(await ok(["vault", "set", "--policy-mode", "enforce"])).toContain("enforces its rules");
    expect((await cli(["vault", "set"])).stderr).toContain("nothing to change");

    expect(await ok(["service", "update", service, "--rules-mode", "report"])).toContain("Its rules are in report mode");
    const res = await broker.proxy(service, "/admin/cli", { method: "POST" });
    expect(res.status).toBe(200);
    outputs.push(await res.text());
    await recordOf((r) => r.path === "/admin/cli" && r.status === 200);
    const logs = JSON.parse(await ok(["logs", "--would-refuse", "--json"])) as { path: string; error: string }[];
    expect(logs.map((r) => r.path)).toContain("/admin/cli");
    expect(logs.every((r) => r.error.startsWith("would_refuse:"))).toBe(true);
    expect(await ok(["service", "update", service, "--rules-mode", "vault"])).toContain("Its rules follow the vault's policy mode");
    await expectEnvelope(await broker.proxy(service, "/admin/cli", { method: "POST" }), 403, "request_not_allowed");
  });
});

describe("counted and kept secret", () => {
  test("/metrics counts what report mode let through by vault, service and code; the credential appears nowhere", async () => {
    const res = await fetch(`${broker.apiUrl}/metrics`);
    const text = await res.text();
    expect(text).toContain("# TYPE broker_policy_would_refuse_total counter");
    const line = (service: string, code: string) =>
      text.split("\n").find((l) => l.startsWith(`broker_policy_would_refuse_total{vault="${broker.vault}",service="${service}",code="${code}"}`));
    expect(Number(line(service, "request_not_allowed")?.split(" ").at(-1))).toBeGreaterThanOrEqual(1);
    expect(Number(line("none", "forbidden")?.split(" ").at(-1))).toBeGreaterThanOrEqual(1);
    await expectNoLeak(broker, SECRET, [...outputs, text]);
  });
});
