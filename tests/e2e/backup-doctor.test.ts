// `broker backup` and `broker doctor` from source against a data directory made by a real server started
// in-process: a backup taken while the server writes opens, holds the rows and is 0600; doctor is green on a
// healthy setup and names each problem with its fix otherwise.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync, existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer, type RunningServer } from "../../src/app/start.ts";
import { CHEAP_KDF } from "../helpers/api.ts";
import { cleanEnv, tempDir } from "../helpers/binary.ts";
import { callApi, findClosedPort } from "./proxy-fixture.ts";

const ROOT = join(import.meta.dir, "..", "..");
let dir: string;
let dataDir: string;
let server: RunningServer;
let token: string;
let env: Record<string, string>;

async function cli(args: string[], extra: Record<string, string> = {}) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    env: cleanEnv({ ...env, ...extra }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, exitCode };
}

beforeAll(async () => {
  dir = tempDir("broker-backup-doctor-");
  dataDir = join(dir, "data");
  const config = loadConfig({ BROKER_DATA_DIR: dataDir, BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_RATELIMIT_PROFILE: "off" });
  server = await startServer({ config, log: createMemoryLogger(), masterPassword: undefined, passwordKdf: CHEAP_KDF });
  const reg = await callApi(server.apiUrl, "POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" });
  token = reg.body.token;
  const port = new URL(server.apiUrl).port;
  env = { BROKER_DATA_DIR: dataDir, BROKER_PORT: port, BROKER_PROXY_PORT: String(await findClosedPort()) };
}, 30_000);

afterAll(async () => {
  await server?.stop();
});

test("backup while the server writes: the copy opens, holds the rows, is 0600, and an existing target is refused", async () => {
  let writing = true;
  let created = 0;
  const writer = (async () => {
    while (writing) {
      const r = await callApi(server.apiUrl, "POST", "/v1/vaults", { name: `v${created}` }, token);
      if (r.status === 201) created++;
    }
  })();
  await Bun.sleep(100);
  const target = join(dir, "copy.db");
  const r = await cli(["backup", target]);
  writing = false;
  await writer;
  expect(r.stderr).toBe("");
  expect(r.exitCode).toBe(0);
  expect(r.stdout).toContain(`Wrote ${target}`);
  expect(r.stdout).toContain("no master password");
  expect(statSync(target).mode & 0o777).toBe(0o600);
  const copy = new Database(target, { readonly: true });
  const vaults = (copy.query("SELECT COUNT(*) AS n FROM vaults").get() as { n: number }).n;
  const users = (copy.query("SELECT COUNT(*) AS n FROM users").get() as { n: number }).n;
  const keyring = copy.query("SELECT mode FROM keyring").get() as { mode: string };
  copy.close();
  expect(users).toBe(1);
  expect(vaults).toBeGreaterThan(0);
  expect(vaults).toBeLessThanOrEqual(created);
  expect(keyring.mode).toBe("plain");

  const again = await cli(["backup", target]);
  expect(again.exitCode).toBe(1);
  expect(again.stderr).toContain("already exists");
  expect(statSync(target).mode & 0o777).toBe(0o600);

  const pg = await cli(["backup", join(dir, "pg.db")], { BROKER_DATABASE_URL: "postgres://u:p@127.0.0.1:1/broker" });
  expect(pg.exitCode).toBe(1);
  expect(pg.stderr).toContain("pg_dump");
  expect(existsSync(join(dir, "pg.db"))).toBe(false);
}, 30_000);

test("doctor on a healthy setup exits 0 and sees the running broker", async () => {
  const r = await cli(["doctor", "--json"]);
  expect(r.exitCode).toBe(0);
  const out = JSON.parse(r.stdout);
  expect(out.ok).toBe(true);
  const messages = out.checks.map((c: { level: string; check: string; message: string }) => `${c.level} ${c.check}: ${c.message}`);
  expect(messages.some((m: string) => m.startsWith("ok port BROKER_PORT") && m.includes("running broker"))).toBe(true);
  expect(messages.some((m: string) => m.startsWith("ok root CA") && m.includes("days to expiry"))).toBe(true);
  expect(messages.some((m: string) => m.startsWith("ok database") && m.includes("current"))).toBe(true);
  expect(out.checks.every((c: { level: string }) => c.level !== "problem")).toBe(true);
}, 30_000);

test("doctor names a 0755 data dir, private ranges, a metadata allowlist and an unreachable PostgreSQL, each with its fix", async () => {
  chmodSync(dataDir, 0o755);
  try {
    const r = await cli(["doctor"], { BROKER_ALLOW_PRIVATE_RANGES: "true", BROKER_NETWORK_ALLOWLIST: "169.254.0.0/16" });
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/problem\s+data directory: .* is 0755/);
    expect(r.stdout).toContain(`fix: chmod 700 ${dataDir}`);
    expect(r.stdout).toMatch(/warning\s+network guard: BROKER_ALLOW_PRIVATE_RANGES=true/);
    expect(r.stdout).toMatch(/problem\s+network guard: BROKER_NETWORK_ALLOWLIST entry 169\.254\.0\.0\/16 covers 169\.254\.169\.254/);
  } finally {
    chmodSync(dataDir, 0o700);
  }
  const port = await findClosedPort();
  const pg = await cli(["doctor", "--json"], { BROKER_DATABASE_URL: `postgres://broker:hunter2secret@127.0.0.1:${port}/broker` });
  expect(pg.exitCode).toBe(1);
  expect(pg.stdout).not.toContain("hunter2secret");
  const db = JSON.parse(pg.stdout).checks.find((c: { check: string }) => c.check === "database");
  expect(db.level).toBe("problem");
  expect(db.message).toContain("cannot reach the database");
  expect(db.fix).toContain("BROKER_DATABASE_URL");
}, 30_000);
