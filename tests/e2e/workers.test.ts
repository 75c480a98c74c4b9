// `broker server --workers 2` (issue 40 acceptance), compiled binary, on SQLite and on PostgreSQL: both workers serve
// the same two ports; a credential change and a revocation made through one worker are honoured by requests landing on
// the other within one second. Each test pins one keep-alive connection to each worker (found by /health's `worker`),
// changes through one and checks, a second later, through the other; the time the change took to be seen is printed
// (measured, not asserted). The tunnel's fresh connections, whichever worker takes them, refuse a revoked agent.
// No output carries the credential.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtBinary, cleanEnv, collectOutput } from "../helpers/binary.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { oneConnectionPerWorker as pinnedPerWorker, type Pinned } from "../helpers/pinned-connection.ts";

const FIRST = `sk-workers-first-${crypto.randomUUID()}`;
const SECOND = `sk-workers-second-${crypto.randomUUID()}`;
const outputs: string[] = [];
let upstream: TestUpstream;
let pg: SharedPgCluster | undefined;
const dirs: string[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  if (!pgMissing) pg = await sharedPgCluster();
});
afterAll(async () => {
  await upstream?.close();
  await pg?.release();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  for (const o of outputs) {
    expect(o.includes(FIRST)).toBe(false);
    expect(o.includes(SECOND)).toBe(false);
  }
});

interface Running {
  readonly url: string;
  readonly proxyPort: number;
  logs(): string;
  stop(): Promise<number>;
}

/** `broker server --workers 2`, waiting for the supervisor's `workers_listening`. */
async function startWorkers(extra: Record<string, string>): Promise<Running> {
  const dir = mkdtempSync(join(tmpdir(), "broker-workers-"));
  dirs.push(dir);
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  const env = cleanEnv({
    HOME: dir,
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_METRICS: "true",
    ...extra,
  });
  const proc = Bun.spawn([builtBinary(), "server", "--workers", "2"], { env, cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const stop = async () => {
    if (proc.exitCode === null) proc.kill("SIGTERM");
    const code = await proc.exited;
    outputs.push(output.text());
    return code;
  };
  const deadline = Date.now() + 40_000;
  while (Date.now() < deadline) {
    const m = /"event":"workers_listening","workers":2,"api":"(http:\/\/[^"]+)","proxy":"[^"]*:(\d+)"/.exec(output.text());
    if (m) return { url: m[1]!, proxyPort: Number(m[2]), logs: output.text, stop };
    if (proc.exitCode !== null) throw new Error(`broker exited with ${proc.exitCode}:\n${output.text()}`);
    await Bun.sleep(25);
  }
  await stop();
  throw new Error(`the workers did not start in time:\n${output.text()}`);
}

/** A pinned connection to each worker, each /health saying there are two. */
const oneConnectionPerWorker = (base: string) => pinnedPerWorker(base, outputs, (of) => expect(of).toBe(2));

const injected = () => upstream.received.at(-1)?.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1];

async function scenario(extra: Record<string, string>) {
  const broker = await startWorkers(extra);
  try {
    const { one, two } = await oneConnectionPerWorker(broker.url);
    const reg = await one.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "owner password 123" } });
    expect(reg.status).toBe(201);
    const owner = reg.body.token as string;
    expect((await one.call("POST", "/v1/vaults", { token: owner, body: { name: "ops" } })).status).toBe(201);
    expect((await one.call("PUT", "/v1/vaults/ops/credentials/KEY", { token: owner, body: { value: FIRST } })).status).toBe(200);
    const host = `127.0.0.1:${upstream.port}`;
    expect((await one.call("POST", "/v1/vaults/ops/services", { token: owner, body: { host, auth: { type: "bearer", token: "KEY" } } })).status).toBe(201);
    const invite = await one.call("POST", "/v1/vaults/ops/agent-invites", { token: owner, body: { name: "bot", role: "proxy" } });
    expect(invite.status).toBe(201);
    const redeemed = await fetch(invite.body.invite_url, { method: "POST" });
    const agent = ((await redeemed.json()) as { token: string }).token;

    // Worker 2 caches the plan (and the agent's session) with the first value.
    const through = (conn: Pinned) => conn.call("GET", `/proxy/${host}/whoami`, { token: agent, vault: "ops" });
    expect((await through(two)).status).toBe(200);
    expect(injected()).toBe(`Bearer ${FIRST}`);

    // A credential changed through worker 1 is what worker 2 injects a second later.
    const changedAt = performance.now();
    expect((await one.call("PUT", "/v1/vaults/ops/credentials/KEY", { token: owner, body: { value: SECOND } })).status).toBe(200);
    let seenAfter: number | undefined;
    while (seenAfter === undefined && performance.now() - changedAt < 1000) {
      expect((await through(two)).status).toBe(200);
      if (injected() === `Bearer ${SECOND}`) seenAfter = Math.round(performance.now() - changedAt);
    }
    await Bun.sleep(Math.max(0, 1000 - (performance.now() - changedAt)));
    expect((await through(two)).status).toBe(200);
    expect(injected()).toBe(`Bearer ${SECOND}`);

    // A revocation through worker 1 ends the agent on worker 2 a second later, and on every fresh tunnel.
    const revokedAt = performance.now();
    expect((await one.call("DELETE", "/v1/agents/bot", { token: owner })).status).toBe(204);
    let refusedAfter: number | undefined;
    while (refusedAfter === undefined && performance.now() - revokedAt < 1000) {
      if ((await through(two)).status === 401) refusedAfter = Math.round(performance.now() - revokedAt);
    }
    await Bun.sleep(Math.max(0, 1000 - (performance.now() - revokedAt)));
    expect((await through(two)).status).toBe(401);
    for (let i = 0; i < 8; i++) {
      const curl = Bun.spawnSync([
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "--proxy",
        `http://127.0.0.1:${broker.proxyPort}`,
        "--proxy-user",
        `x:${agent}`,
        "--cacert",
        "/dev/null",
        `https://${host}/after`,
      ]);
      const said = curl.stdout.toString() + curl.stderr.toString();
      outputs.push(said);
      expect(said).toMatch(/407|CONNECT/);
    }
    console.log(
      `${extra.BROKER_DATABASE_URL ? "PostgreSQL" : "SQLite"}: a credential change seen by the other worker after ${seenAfter} ms, a revocation after ${refusedAfter} ms`,
    );
    one.close();
    two.close();
  } finally {
    expect(await broker.stop()).toBe(0);
  }
  // Both workers stopped gracefully, each saying so.
  const logs = broker.logs();
  for (const w of [1, 2]) expect(logs).toContain(`"event":"shutdown_complete","worker":${w}`);
}

describe("broker server --workers 2", () => {
  test("SQLite: a credential change and a revocation through one worker are honoured by the other within a second", () => scenario({}), 90_000);
  test.skipIf(pgMissing)(
    "PostgreSQL: a credential change and a revocation through one worker are honoured by the other within a second",
    async () => scenario({ BROKER_DATABASE_URL: await pg!.createDatabase() }),
    90_000,
  );
});
