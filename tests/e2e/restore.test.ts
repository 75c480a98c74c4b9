// `broker restore` with the compiled binary: a broker gets a credential, is backed up, gets 40 more, is killed
// with SIGKILL (leaving a -wal that holds them); restore refuses while a broker runs, then puts the backup in
// place with the old files moved aside, and the broker started again serves exactly the backup's one credential.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanEnv, collectOutput, freePort, isolatedBinary, runBinary, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { callApi } from "./proxy-fixture.ts";

const OWNER = { email: "owner@example.com", password: `correct horse battery ${crypto.randomUUID()}` };
const VAULT = "restored";
let bin: string;
let dir: string;
let dataDir: string;
let env: Record<string, string>;
const killLater: { kill(sig?: number | NodeJS.Signals): void }[] = [];

beforeAll(() => {
  bin = isolatedBinary().bin;
  dir = tempDir("broker-restore-");
  dataDir = join(dir, "data");
  env = cleanEnv({ BROKER_DATA_DIR: dataDir, BROKER_PORT: String(freePort()), BROKER_PROXY_PORT: String(freePort()), BROKER_RATELIMIT_PROFILE: "off" });
}, 120_000);

afterAll(() => {
  for (const p of killLater) p.kill("SIGKILL");
});

const must = async (apiUrl: string, method: string, path: string, body: unknown, token: string, status: number) => {
  const r = await callApi(apiUrl, method, path, body, token);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

/** `broker server` as a process this test can SIGKILL; resolves once it listens. */
async function startKillable(): Promise<{ url: string; proc: ReturnType<typeof Bun.spawn> }> {
  const proc = Bun.spawn([bin, "server"], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  killLater.push(proc);
  const output = collectOutput(proc as { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> });
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const m = /"event":"listening","api":"(http:\/\/[^"]+)"/.exec(output.text());
    if (m?.[1]) return { url: m[1], proc };
    if (proc.exitCode !== null) throw new Error(`broker server exited with ${proc.exitCode}:\n${output.text()}`);
    await Bun.sleep(25);
  }
  throw new Error(`broker server did not start in time:\n${output.text()}`);
}

test("after a SIGKILL, restore puts the backup back, moves the old files aside, and the broker serves exactly the backup", async () => {
  const backup = join(dir, "backup.db");
  const { url, proc } = await startKillable();
  const { token } = await must(url, "POST", "/v1/auth/register", OWNER, "", 201);
  await must(url, "POST", "/v1/vaults", { name: VAULT }, token, 201);
  await must(url, "PUT", `/v1/vaults/${VAULT}/credentials/FIRST`, { value: "kept-by-the-backup" }, token, 200);
  const backedUp = await runBinary(bin, ["backup", backup], { env });
  expect({ exitCode: backedUp.exitCode, stderr: backedUp.stderr }).toEqual({ exitCode: 0, stderr: "" });
  for (let i = 0; i < 40; i++) await must(url, "PUT", `/v1/vaults/${VAULT}/credentials/LATER_${i}`, { value: `after-${i}` }, token, 200);

  // While the broker runs, restore refuses and changes nothing.
  const refused = await runBinary(bin, ["restore", backup], { env });
  expect(refused.exitCode).toBe(1);
  expect(refused.stderr).toContain("a broker is running on");
  expect(refused.stderr).toContain("nothing was changed");
  expect(readdirSync(dataDir).some((f) => f.includes("before-restore"))).toBe(false);

  proc.kill("SIGKILL");
  await proc.exited;
  expect(existsSync(join(dataDir, "broker.db-wal"))).toBe(true); // the 40 credentials sit in the -wal

  // A file that is not a broker store is refused before anything moves.
  const junk = join(dir, "junk.db");
  writeFileSync(junk, "not a database");
  const bad = await runBinary(bin, ["restore", junk], { env });
  expect(bad.exitCode).toBe(1);
  expect(bad.stderr).toContain("nothing was changed");
  expect(readdirSync(dataDir).some((f) => f.includes("before-restore"))).toBe(false);

  const restored = await runBinary(bin, ["restore", backup], { env });
  expect({ exitCode: restored.exitCode, stderr: restored.stderr }).toEqual({ exitCode: 0, stderr: "" });
  expect(restored.stdout).toContain(`Restored ${backup} as ${join(dataDir, "broker.db")} (mode 0600`);
  expect(restored.stdout).toContain("To undo");
  const movedAside = readdirSync(dataDir).filter((f) => f.includes("before-restore"));
  // The audit journal goes with the store it was counted against (its unwritten records are the replaced store's).
  const journalAside = movedAside.filter((f) => f.startsWith("audit-journal.jsonl.before-restore-"));
  expect(journalAside).toHaveLength(1);
  expect(existsSync(join(dataDir, "audit-journal.jsonl"))).toBe(false);
  const aside = movedAside.filter((f) => f.startsWith("broker.db")).sort();
  expect(aside).toHaveLength(3);
  expect(aside[0]).toMatch(/^broker\.db\.before-restore-\d{8}T\d{6}Z$/);
  expect(aside.slice(1)).toEqual([`${aside[0]}-shm`, `${aside[0]}-wal`]);
  expect(statSync(join(dataDir, aside[0]!)).size).toBeGreaterThan(0);
  expect(statSync(join(dataDir, `${aside[0]}-wal`)).size).toBeGreaterThan(0);
  for (const f of movedAside) expect(restored.stdout).toContain(`mv ${join(dataDir, f)} ${join(dataDir, f.replace(/\.before-restore-[^-]+/, ""))}`);
  expect(existsSync(join(dataDir, "broker.db-wal"))).toBe(false);
  expect(statSync(join(dataDir, "broker.db")).mode & 0o777).toBe(0o600);

  await using again = await startBinaryServer(bin, env);
  const login = await must(again.url, "POST", "/v1/auth/login", OWNER, "", 200);
  const listed = await must(again.url, "GET", `/v1/vaults/${VAULT}/credentials`, undefined, login.token, 200);
  expect(listed.credentials.map((c: { key: string }) => c.key)).toEqual(["FIRST"]);
}, 120_000);
