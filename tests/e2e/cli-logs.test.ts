// `broker logs [--follow]` as the compiled binary: one audit record per proxied request, shown as
// a table or JSON, never with query strings or credential values.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { cleanEnv, isolatedBinary, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

const { bin, dir } = isolatedBinary();
const SECRET = `sk-logs-${crypto.randomUUID()}`;
const config = join(tempDir("broker-cli-"), "config");
let server: ServerProcess;
let upstream: TestUpstream;
let session = "";

const env = () => cleanEnv({ BROKER_CONFIG_DIR: config, BROKER_ADDR: server.url });
async function cli(args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: env(), stdin, cwd: dir });
  if (r.exitCode !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.exitCode}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  upstream = await startUpstream();
  const caFile = join(tempDir(), "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  server = await startBinaryServer(
    bin,
    cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data"), BROKER_NETWORK_ALLOWLIST: "127.0.0.1", BROKER_UPSTREAM_CA_FILE: caFile }),
    dir,
  );
  await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], "logs owner password\n");
  await cli(["vault", "create", "main"]);
  await cli(["vault", "use", "main"]);
  await cli(["credential", "set", "API_KEY"], SECRET);
  await cli(["service", "add", `127.0.0.1:${upstream.port}`, "--auth", "bearer", "--token", "API_KEY"]);
  const owner = JSON.parse(await Bun.file(join(config, "cli.json")).text()).token as string;
  const res = await fetch(`${server.url}/v1/sessions`, {
    method: "POST",
    headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
    body: JSON.stringify({ vault: "main" }),
  });
  session = ((await res.json()) as { token: string }).token;
});

afterAll(async () => {
  await server.stop();
  await upstream.close();
});

async function proxied(path: string): Promise<number> {
  const res = await fetch(`${server.url}/proxy/127.0.0.1:${upstream.port}${path}`, { headers: { authorization: `Bearer ${session}` } });
  await res.arrayBuffer();
  return res.status;
}

test("one record per proxied request, newest last, without query strings", async () => {
  expect(await proxied("/first?token=hidden")).toBe(200);
  expect(await proxied("/second")).toBe(200);
  await Bun.sleep(500);
  const table = (await cli(["logs"])).stdout;
  expect(table).toMatch(/GET 127\.0\.0\.1:\d+\/first\s+200/);
  expect(table.indexOf("/first")).toBeLessThan(table.indexOf("/second"));
  expect(table).toContain("owner@example.com"); // who asked, by name (the session was minted by the owner)
  expect(table).not.toMatch(/\buser:\d/);
  const json = JSON.parse((await cli(["logs", "--json"])).stdout) as { path: string; credential_keys: string[]; ingress: string }[];
  expect(json.map((r) => r.path)).toEqual(["/first", "/second"]);
  expect(json[0]).toMatchObject({ credential_keys: ["API_KEY"], ingress: "explicit" });
  for (const text of [table, JSON.stringify(json), server.logs()]) {
    expect(text).not.toContain("hidden");
    expect(text).not.toContain(SECRET);
  }
});

test("--follow prints records that arrive later", async () => {
  const proc = Bun.spawn([bin, "logs", "--follow", "--limit", "1"], { env: env(), cwd: dir, stdout: "pipe", stderr: "pipe" });
  await Bun.sleep(800);
  expect(await proxied("/later")).toBe(200);
  let out = "";
  const reader = proc.stdout.getReader();
  const deadline = Date.now() + 8000;
  let pending = reader.read(); // kept across timeouts: a dropped read would swallow its chunk
  while (!out.includes("/later") && Date.now() < deadline) {
    const chunk = await Promise.race([pending, Bun.sleep(500).then(() => undefined)]);
    if (!chunk) continue;
    if (chunk.done) break;
    out += new TextDecoder().decode(chunk.value);
    pending = reader.read();
  }
  proc.kill();
  expect(out).toContain("/later");
});
