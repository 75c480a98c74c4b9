// The snags of a newcomer's first hour, each as the user meets it (issue 34): the proposal hint for an
// IP-literal host is accepted by /v1/proposals as it is (where the network guard would reach the
// address; refused with the guard's reason where it would not), `*` is every method in the CLI's rules,
// and `--approve` alone on a service that allowed everything holds those requests and keeps the rest.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer } from "node:net";
import { cleanEnv, isolatedBinary, runBinary, tempDir } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { sourceCli } from "./cli-from-source.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let home = "";
const outputs: string[] = [];
const SECRET = `sk_first_${crypto.randomUUID()}`;
const { ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["pay.test"], ips: ["127.0.0.1"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("pay.test", ["127.0.0.1"]);
  home = mkdtempSync(join(tmpdir(), "broker-first-hour-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  await ok(["credential", "set", "PAY_KEY"], `${SECRET}\n`);
});

afterAll(async () => {
  await expectNoLeak(broker, SECRET, outputs);
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("the proposal hint for an IP-literal host", () => {
  test("is accepted as it is where the guard reaches the address, and refused with the guard's reason where it does not", async () => {
    const host = `127.0.0.1:${upstream.port}`;
    const denied = await broker.proxy(host, "/v1/x");
    expect(denied.status).toBe(403);
    const hint = (await denied.json()).proposal_hint;
    outputs.push(JSON.stringify(hint));
    const filed = await broker.api("POST", "/v1/proposals", hint.proposal, broker.sessionToken);
    expect(filed.status).toBe(201);
    const blocked = structuredClone(hint.proposal);
    blocked.services[0].host = "169.254.169.254";
    const refused = await broker.api("POST", "/v1/proposals", blocked, broker.sessionToken);
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe("services[0].host");
    expect(refused.body.message).toContain("169.254.169.254 is an address the broker will not reach");
  });
});

describe("rules as people type them", () => {
  test("--approve alone on a new service holds those requests and keeps every other method and path allowed", async () => {
    const host = `pay.test:${upstream.port}`;
    const out = await ok(["service", "add", host, "--auth", "bearer", "--token", "PAY_KEY", "--approve", "POST /v1/refunds"]);
    expect(out).toContain("POST on /v1/refunds (each request approved by a human)");
    expect(out).toContain("GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS on /**");
    const read = await broker.proxy(host, "/v1/charges");
    outputs.push(await read.clone().text());
    expect(read.status).toBe(200);
    const refund = await broker.proxy(host, "/v1/refunds", { method: "POST", body: "x=1" });
    outputs.push(await refund.clone().text());
    expect(refund.status).toBe(428);
  });

  test("`*` is every method; on a service with rules, --approve alone replaces them as the help says", async () => {
    const host = `pay.test:${upstream.port}`;
    const star = await ok(["service", "update", host, "--allow", "* /v1/**"]);
    expect(star).toContain("GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS on /v1/**");
    const replaced = await ok(["service", "update", host, "--approve", "POST /v1/refunds"]);
    expect(replaced).toContain("agents may use POST on /v1/refunds (each request approved by a human).");
  });
});

describe("the words", () => {
  test("logs --host names the column the table has", async () => {
    const help = await ok(["logs", "--help"]);
    expect(help).toContain("as in the REQUEST column, without the path");
    expect(help).not.toContain("HOST column");
  });
});

describe("start-up, with the compiled binary", () => {
  /** Starts `broker server` on free ports; resolves with its first human (non-JSON) stderr line, then stops it. */
  async function readyLine(dataDir: string): Promise<{ line: string; port: number }> {
    const { bin, dir } = isolatedBinary();
    const port = await freePort();
    const proc = Bun.spawn([bin, "server"], {
      env: cleanEnv({ BROKER_DATA_DIR: dataDir, BROKER_PORT: String(port), BROKER_PROXY_PORT: "0", BROKER_RATELIMIT_PROFILE: "off" }),
      cwd: dir,
      stdin: "ignore",
      stdout: "ignore",
      stderr: "pipe",
    });
    try {
      const reader = proc.stderr.getReader();
      let text = "";
      for (let line = ""; !line; ) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`broker server ended before its ready line:\n${text}`);
        text += new TextDecoder().decode(value);
        line = text.split("\n").find((l) => l.startsWith("broker ready")) ?? "";
        if (line) return { line, port };
      }
      throw new Error("unreachable");
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  }

  test("a fresh instance says where to create the owner account; a used one, where the console is", async () => {
    const data = join(tempDir(), "data");
    const first = await readyLine(data);
    expect(first.line).toBe(
      `broker ready: open http://127.0.0.1:${first.port}/ to create the owner account (or: broker auth register --email you@example.com)`,
    );
    // Start again, register the owner over HTTP, and read the next start's line.
    const second = await readyLineAfterRegistering(data);
    expect(second).toMatch(/^broker ready: console at http:\/\/127\.0\.0\.1:\d+\/, HTTPS_PROXY on 127\.0\.0\.1:\d+$/);
  }, 60_000);

  async function readyLineAfterRegistering(data: string): Promise<string> {
    const { bin, dir } = isolatedBinary();
    const port = await freePort();
    const env = cleanEnv({ BROKER_DATA_DIR: data, BROKER_PORT: String(port), BROKER_PROXY_PORT: "0", BROKER_RATELIMIT_PROFILE: "off" });
    const proc = Bun.spawn([bin, "server"], { env, cwd: dir, stdin: "ignore", stdout: "ignore", stderr: "ignore" });
    try {
      for (let i = 0; i < 100; i++) {
        const r = await fetch(`http://127.0.0.1:${port}/v1/auth/register`, {
          method: "POST",
          body: JSON.stringify({ email: "o@example.com", password: "correct horse battery" }),
        }).catch(() => undefined);
        if (r?.status === 201) break;
        await Bun.sleep(100);
      }
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
    return (await readyLine(data)).line;
  }
});

/** A port nobody holds right now (bound once, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe("broker doctor and a running broker", () => {
  test("checks the running broker's own settings when signed in as its owner, and says so; else this shell's, saying why", async () => {
    const { bin, dir } = isolatedBinary();
    const port = await freePort();
    const data = join(tempDir(), "data");
    const serverEnv = cleanEnv({ BROKER_DATA_DIR: data, BROKER_PORT: String(port), BROKER_PROXY_PORT: "0", BROKER_NETWORK_ALLOWLIST: "10.1.2.0/24" });
    const proc = Bun.spawn([bin, "server"], { env: serverEnv, cwd: dir, stdin: "ignore", stdout: "ignore", stderr: "ignore" });
    try {
      const home = tempDir("broker-doctor-home-");
      // This shell has no allowlist: the report must show the running broker's.
      const shell = cleanEnv({ HOME: home, BROKER_DATA_DIR: data, BROKER_PORT: String(port), BROKER_ADDR: `http://127.0.0.1:${port}` });
      for (let i = 0; i < 100 && !(await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok; i++) await Bun.sleep(100);
      const before = await runBinary(bin, ["doctor"], { env: shell });
      expect(before.stdout).toContain("settings checked: this shell's environment (no broker at");
      expect(before.stdout).toContain("allowlist: (empty)");
      const reg = await runBinary(bin, ["auth", "register", "--email", "o@example.com", "--password-stdin"], { env: shell, stdin: "correct horse battery\n" });
      expect(reg.exitCode).toBe(0);
      const after = await runBinary(bin, ["doctor"], { env: shell });
      expect(after.stdout).toContain(`settings checked: the running broker's at http://127.0.0.1:${port}`);
      expect(after.stdout).toContain("allowlist: 10.1.2.0/24");
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  }, 60_000);
});
