// Runs the compiled dist/broker as users do: a subprocess with its own environment and data dir.
// Builds the binary first when it is missing or stale (npm test builds it before running the suite).

import { copyFileSync, existsSync, mkdtempSync, readdirSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const DIST = join(ROOT, "dist", "broker");

/** The newest modification time of any file under src/ (a binary older than it is stale). */
function newestSource(dir = join(ROOT, "src")): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

export function builtBinary(): string {
  // Rebuilt when missing or older than the sources, so a test run alone never exercises yesterday's binary.
  if (!existsSync(DIST) || statSync(DIST).mtimeMs < newestSource()) {
    const r = Bun.spawnSync([process.execPath, "build.ts"], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0) throw new Error("bun build.ts failed");
  }
  return DIST;
}

/** A copy of the binary alone in a fresh directory: proves it needs no node_modules beside it. */
export function isolatedBinary(): { bin: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "broker-bin-"));
  const bin = join(dir, "broker");
  copyFileSync(builtBinary(), bin);
  Bun.spawnSync(["chmod", "755", bin]);
  return { bin, dir };
}

export function tempDir(prefix = "broker-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** A minimal environment: nothing from the developer's shell leaks into the binary under test. */
export function cleanEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: extra.HOME ?? tempDir("broker-home-"), ...extra };
}

export async function runBinary(bin: string, args: string[], opts: { env: Record<string, string>; stdin?: string; cwd?: string }): Promise<RunResult> {
  const proc = Bun.spawn([bin, ...args], {
    env: opts.env,
    cwd: opts.cwd,
    stdin: opts.stdin === undefined ? "ignore" : new TextEncoder().encode(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { exitCode, stdout, stderr };
}

export interface ServerProcess {
  readonly url: string;
  readonly logs: () => string;
  stop(): Promise<number>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Starts `broker server` on an ephemeral port and waits for its "listening" log line. */
export async function startBinaryServer(bin: string, env: Record<string, string>, cwd?: string): Promise<ServerProcess> {
  const proc = Bun.spawn([bin, "server"], { env: { BROKER_PORT: "0", BROKER_PROXY_PORT: "0", ...env }, cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const logs = output.text();
    const m = /"event":"listening","api":"(http:\/\/[^"]+)"/.exec(logs);
    if (m?.[1]) {
      const url = m[1];
      const stop = async () => {
        proc.kill("SIGTERM");
        return proc.exited;
      };
      return { url, logs: output.text, stop, [Symbol.asyncDispose]: async () => void (await stop()) };
    }
    if (proc.exitCode !== null) throw new Error(`broker server exited with ${proc.exitCode}:\n${logs}`);
    await Bun.sleep(25);
  }
  proc.kill("SIGKILL");
  throw new Error(`broker server did not start in time:\n${output.text()}`);
}

/** Everything a process writes to stdout and stderr, kept as it arrives (and after it dies). */
export function collectOutput(proc: { stdout: ReadableStream<Uint8Array>; stderr: ReadableStream<Uint8Array> }): { text(): string } {
  let text = "";
  const decoder = new TextDecoder();
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    const reader = stream.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  return { text: () => text };
}

/** A port on 127.0.0.1 that was free a moment ago (bound, then released). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

export function expectOk(r: RunResult): RunResult {
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return r;
}

/** The binary's server on a fixed port whose BROKER_PUBLIC_URL is itself, so invite and approval links reach it. */
export function startSelfAddressedServer(bin: string, cwd: string): Promise<ServerProcess> {
  const port = freePort();
  return startBinaryServer(
    bin,
    cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data"), BROKER_PORT: String(port), BROKER_PUBLIC_URL: `http://127.0.0.1:${port}` }),
    cwd,
  );
}
