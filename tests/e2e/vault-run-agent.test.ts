// An agent's first hour with the CLI from source against an in-process broker with its transparent proxy:
// `broker agent redeem <link>` saves the agent token and its one vault, `broker vault run -- curl …` with no
// --vault reaches a loopback service through the broker with the credential injected (NO_PROXY no longer
// sends loopback around it), a curl that bypasses the proxy and fails TLS verification is told why, and a
// host that is not a service (a blind tunnel) gets one hint per host, while the command still runs.
// No credential or agent token appears in any output or log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
const SECRET = `sk_agent_run_${crypto.randomUUID()}`;
const outputs: string[] = [];
let upstream: TestUpstream;
let broker: Broker;
let dir = "";
let upstreamCa = "";
let service = "";

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The CLI from source as the agent runs it: its own HOME and config directory, nothing else of ours. */
async function agent(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: dir, BROKER_CONFIG_DIR: join(dir, "config"), ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  outputs.push(stdout, stderr);
  return { code, stdout, stderr };
}

const hasCurl = Bun.which("curl") !== null;

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["elsewhere.test"], ips: ["127.0.0.1"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem, tunnel: true });
  // The same upstream under a name no service has: reached through a blind tunnel.
  broker.dns.set("elsewhere.test", ["127.0.0.1"]);
  service = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(service, { type: "bearer", token: "API_KEY" });
  dir = mkdtempSync(join(tmpdir(), "broker-agent-run-"));
  upstreamCa = join(dir, "upstream-ca.pem");
  writeFileSync(upstreamCa, upstream.pki.caPem);
}, 60_000);

afterAll(async () => {
  const saved = dir ? (JSON.parse(readFileSync(join(dir, "config", "cli.json"), "utf8")) as { token?: string }) : {};
  await expectNoLeak(broker, SECRET, outputs);
  if (saved.token) {
    for (const o of outputs) expect(o).not.toContain(saved.token);
    for (const l of broker.logLines) expect(l).not.toContain(saved.token);
  }
  await broker?.stop();
  await upstream?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("an agent in two commands", () => {
  test("the invite page and `agent invite` name the one command; a token with one vault needs no --vault", async () => {
    const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: "page-bot" }, broker.userToken);
    const page = await fetch(inv.body.invite_url).then((r) => r.json());
    expect(page.message).toContain(`broker agent redeem ${inv.body.invite_url}`);
    expect(page.message).toContain("broker vault run -- <command>");
    const person = { BROKER_SESSION_TOKEN: broker.userToken, BROKER_ADDR: broker.apiUrl, BROKER_VAULT: broker.vault, BROKER_CONFIG_DIR: join(dir, "inviter") };
    const cli = await agent(["agent", "invite", "--name", "cli-bot"], person);
    expect(cli.code).toBe(0);
    const link = /broker agent redeem (\S+)/.exec(cli.stdout)?.[1];
    expect(link).toStartWith(`${broker.apiUrl}/invite/av_inv_`);
    expect(cli.stdout).toContain("then: broker vault run -- <command>");
    expect(cli.stdout).toContain(`Without the broker CLI: curl -X POST ${link}`);
    // No vault named anywhere: the token's only vault.
    const { BROKER_VAULT: _, ...unnamed } = person;
    const run = await agent(["vault", "run", "--", "sh", "-c", 'test -n "$HTTPS_PROXY"'], unnamed);
    expect([run.code, run.stderr]).toEqual([0, ""]);
  });

  test("redeem saves the token and its vault; vault run with no --vault reaches a loopback service with the credential", async () => {
    const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: "first-bot" }, broker.userToken);
    expect(inv.status).toBe(201);
    // A person's saved login is not replaced unasked, and the refusal does not spend the invite.
    const person = join(dir, "person");
    mkdirSync(person, { recursive: true, mode: 0o700 });
    writeFileSync(join(person, "cli.json"), JSON.stringify({ address: broker.apiUrl, token: "av_sess_someone", email: "p@example.com" }), { mode: 0o600 });
    const refused = await agent(["agent", "redeem", inv.body.invite_url], { BROKER_CONFIG_DIR: person });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("this CLI is logged in as a person (p@example.com)");
    expect(JSON.parse(readFileSync(join(person, "cli.json"), "utf8")).token).toBe("av_sess_someone");
    // No BROKER_ADDR: the link names the broker.
    const redeemed = await agent(["agent", "redeem", inv.body.invite_url]);
    expect(redeemed.code).toBe(0);
    expect(redeemed.stdout).toContain(`Redeemed: agent first-bot, proxy in vault ${broker.vault}`);
    expect(redeemed.stdout).toContain("Next: broker vault run -- <command>");
    const saved = JSON.parse(readFileSync(join(dir, "config", "cli.json"), "utf8"));
    expect(saved).toMatchObject({ address: broker.apiUrl, vault: broker.vault });
    expect(saved.token).toStartWith("av_agt_");
    // Spent: a second redemption is refused with what to do.
    const again = await agent(["agent", "redeem", inv.body.invite_url], { BROKER_CONFIG_DIR: join(dir, "other") });
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("ask for a new one");

    if (!hasCurl) return;
    const before = upstream.received.length;
    const script = `printf 'NO_PROXY=%s\\n' "\${NO_PROXY-unset}"; curl -sS https://${service}/first-hour`;
    const run = await agent(["vault", "run", "--", "sh", "-c", script]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("NO_PROXY=unset");
    expect(run.stdout).toContain('"url":"/first-hour"');
    expect(upstream.received.length).toBe(before + 1);
    const seen = upstream.received.at(-1)!;
    expect(seen.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k))).toEqual([["authorization", `Bearer ${SECRET}`]]);
    expect(run.stderr).toBe("");
  }, 60_000);

  test("a curl that goes around the proxy and fails TLS verification is told why", async () => {
    if (!hasCurl) return;
    const before = upstream.received.length;
    const run = await agent(["vault", "run", "--", "curl", "-sS", "--noproxy", "*", `https://${service}/direct`]);
    expect(run.code).toBe(60);
    expect(upstream.received.length).toBe(before); // TLS failed before any request
    const hints = run.stderr.split("\n").filter((l) => l.startsWith("broker: "));
    expect(hints).toHaveLength(1);
    expect(hints[0]).toContain("exit code 60: the TLS certificate was not verified, and nothing went through the broker");
    expect(hints[0]).toContain("--noproxy");
  }, 60_000);

  test("a host that is not a service: one hint per host, while the command runs, and no credential sent", async () => {
    if (!hasCurl) return;
    const blind = `elsewhere.test:${upstream.port}`;
    const get = (path: string) => `curl -sS -o /dev/null --cacert ${upstreamCa} https://${blind}${path}`;
    const script = `${get("/a")}; sleep 3; echo MARK >&2; ${get("/b")}; ${get("/c")}`;
    const before = upstream.received.length;
    const run = await agent(["vault", "run", "--", "sh", "-c", script]);
    expect(run.code).toBe(0);
    const lines = run.stderr.split("\n");
    const hints = lines.filter((l) => l.startsWith("broker: "));
    expect(hints).toEqual([
      `broker: ${blind} is not a service of vault ${broker.vault}: it was reached through a blind tunnel, without a credential. ` +
        `To ask for access, file a proposal: POST ${broker.apiUrl}/v1/proposals (the body: curl ${broker.apiUrl}/v1/skills/agent, or a 403's proposal_hint; MCP: propose_access)`,
    ]);
    // Told while the command still ran (before its next step), not only at the end.
    expect(lines.indexOf(hints[0]!)).toBeLessThan(lines.indexOf("MARK"));
    const got = upstream.received.slice(before);
    expect(got.map((r) => r.url)).toEqual(["/a", "/b", "/c"]);
    for (const r of got) expect(r.rawHeaders.some(([k]) => /authorization/i.test(k))).toBe(false);
  }, 60_000);
});
