// What the CLI says when a person gets something wrong (issue 16, item 6), run from source against an
// in-process broker: each error names what was not found and the command that lists what exists, and
// no hint points at a command or flag that would not help.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
let upstream: TestUpstream;
let broker: Broker;
let home: string;

async function cli(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, BROKER_CONFIG_DIR: join(home, "config"), BROKER_ADDR: broker.apiUrl, ...opts.env },
    stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

async function ok(args: string[], stdin?: string): Promise<{ stdout: string; stderr: string }> {
  const r = await cli(args, { stdin });
  if (r.code !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.code}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["api.test"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("api.test", ["127.0.0.1"]);
  home = mkdtempSync(join(tmpdir(), "broker-cli-messages-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("CLI messages", () => {
  test("rejecting a proposal twice says it was decided and how to see it, not 'pick another name'", async () => {
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host: "api.test", auth: { type: "bearer", token: "API_KEY" } }], credentials: [{ key: "API_KEY" }], message: "m" },
      broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    const id = String(filed.body.id);
    await ok(["proposal", "reject", id]);
    const again = await cli(["proposal", "reject", id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain("already decided");
    expect(again.stderr).toContain(`nothing changed; \`broker proposal show ${id}\` shows how it was decided`);
    expect(again.stderr).not.toContain("pick another name");
  });

  test("a missing credential, proposal or service names what was not found and the command that lists them", async () => {
    const cred = await cli(["credential", "get", "NOPE"]);
    expect(cred.stderr).toContain("no credential NOPE in this vault");
    expect(cred.stderr).toContain(`\`broker credential list\` shows the keys in vault ${broker.vault}`);
    const prop = await cli(["proposal", "approve", "99"]);
    expect(prop.stderr).toContain(`there is no proposal 99 in vault ${broker.vault}: \`broker proposal list\` shows them`);
    const svc = await cli(["service", "remove", "x"]);
    expect(svc.stderr).toContain("no service for x in this vault");
    expect(svc.stderr).toContain(`\`broker service list\` shows the hosts in vault ${broker.vault}`);
    for (const r of [cred, prop, svc]) {
      expect(r.code).toBe(1);
      expect(r.stderr).not.toContain("broker vault list");
    }
    // A vault that does not exist is still told against `broker vault list`.
    expect((await cli(["credential", "get", "NOPE", "--vault", "no-such-vault"])).stderr).toContain("`broker vault list` shows your vaults");
  });

  test("a wrong password at login says the email or password is wrong, not 'you are not logged in'", async () => {
    const typed = `not the password ${crypto.randomUUID()}`;
    const r = await cli(["auth", "login", "--email", "owner@example.com", "--password-stdin"], {
      stdin: `${typed}\n`,
      env: { BROKER_CONFIG_DIR: join(home, "other-config") },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("the email or password is wrong");
    expect(r.stderr).not.toContain("not logged in");
    // The password typed is repeated nowhere: not by the CLI, not in the broker's logs or audit.
    expect(r.stdout).not.toContain(typed);
    expect(r.stderr).not.toContain(typed);
    await expectNoLeak(broker, typed, [r.stdout, r.stderr]);
  });

  test("service add with a URL says to drop the scheme and names the host", async () => {
    const r = await cli(["service", "add", "https://api.github.com", "--auth", "bearer", "--token", "GITHUB_TOKEN"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('"https://api.github.com" is a URL, not a host');
    expect(r.stderr).toContain("drop the scheme: broker service add api.github.com …");
    expect((await cli(["service", "add", "https://api.github.com/user", "--auth", "bearer", "--token", "T"])).stderr).toContain(
      "drop the scheme and the path: broker service add api.github.com …",
    );
  });

  test("service add --token with a key the vault lacks warns, and still adds", async () => {
    const r = await ok(["service", "add", "warn.test", "--auth", "bearer", "--token", "NOT_A_KEY"]);
    expect(r.stdout).toContain("Added warn.test");
    expect(r.stderr).toContain(`warning: vault ${broker.vault} has no credential NOT_A_KEY yet; set it with \`broker credential set NOT_A_KEY\``);
    await ok(["credential", "set", "HAVE_KEY"], "v\n");
    expect((await ok(["service", "add", "quiet.test", "--auth", "bearer", "--token", "HAVE_KEY"])).stderr).toBe("");
  });

  test("broker logs cuts a long path with … instead of padding every row; --json keeps it whole", async () => {
    const host = `api.test:${upstream.port}`;
    await ok(["service", "add", host, "--auth", "passthrough"]);
    const long = `/${"segment/".repeat(20)}end`;
    await broker.proxy(host, long).then((res) => res.arrayBuffer());
    await broker.proxy(host, "/short").then((res) => res.arrayBuffer());
    for (let i = 0; i < 100 && (await broker.auditLogs()).length < 2; i++) await Bun.sleep(50); // the audit queue flushes in batches
    const r = await ok(["logs"]);
    const rows = r.stdout.trimEnd().split("\n");
    expect(rows.some((l) => l.includes("…"))).toBe(true);
    expect(r.stdout).not.toContain(long);
    expect(Math.max(...rows.map((l) => l.length))).toBeLessThan(160);
    expect(r.stderr).toContain("--json shows every value in full");
    expect((await ok(["logs", "--json"])).stdout).toContain(long);
  });
});

test("vault run -- node on a Node that ignores NODE_USE_ENV_PROXY warns with the fix (Node 20 here, when present)", async () => {
  const version = Bun.which("node") ? Bun.spawnSync(["node", "--version"]).stdout.toString().trim() : "";
  const r = await cli(["vault", "run", "--", "node", "-e", ""]);
  if (/^v(1\d|20|21|23)\./.test(version)) expect(r.stderr).toContain(`is Node ${version}, which ignores NODE_USE_ENV_PROXY`);
  else expect(r.stderr).not.toContain("ignores NODE_USE_ENV_PROXY");
  expect((await cli(["vault", "run", "--", "true"])).stderr).not.toContain("NODE_USE_ENV_PROXY");
});

test("a protected server started without its password names what `broker server` reads, not --password-stdin", async () => {
  const data = mkdtempSync(join(tmpdir(), "broker-locked-"));
  try {
    const env = { BROKER_DATA_DIR: data, BROKER_PORT: "0", BROKER_PROXY_PORT: "0" };
    const master = `a long master password ${crypto.randomUUID()}`;
    const set = await cli(["master-password", "set", "--password-stdin"], { stdin: `${master}\n${master}\n`, env });
    expect(set.code).toBe(0);
    const r = await cli(["server"], { env });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("protected by a master password");
    expect(r.stderr).toContain("set BROKER_MASTER_PASSWORD (or BROKER_MASTER_PASSWORD_FILE), or start it on a terminal to be prompted");
    expect(r.stderr).not.toContain("--password-stdin");
    // The master password typed is repeated by neither command.
    for (const out of [set.stdout, set.stderr, r.stdout, r.stderr]) expect(out).not.toContain(master);
  } finally {
    rmSync(data, { recursive: true, force: true });
  }
});
