// `broker server` as a process of the compiled binary, for tests that start several on one data directory or one
// port and watch which serves (tests/e2e/workers-exclusive*.test.ts): started, not waited for; its output kept.

import { request } from "node:http";
import { join } from "node:path";
import { builtBinary, cleanEnv, collectOutput } from "./binary.ts";

export interface ServerProcess {
  readonly pid: number;
  /** The exit code, once the output has been read to its end (the last line may come with the exit). */
  readonly exited: Promise<number>;
  exitCode(): number | null;
  logs(): string;
  stop(signal?: NodeJS.Signals): Promise<number>;
}

/** The environment of a server on `dataDir`: HOME beside it, both ports chosen by the kernel unless `env` says. */
export function serverEnv(dataDir: string, env: Record<string, string> = {}): Record<string, string> {
  return cleanEnv({ HOME: join(dataDir, ".."), BROKER_DATA_DIR: dataDir, BROKER_PORT: "0", BROKER_PROXY_PORT: "0", ...env });
}

/** `broker server <args>` on `dataDir` (or `argv` as given, e.g. under `unshare`). */
export function spawnServer(args: string[], dataDir: string, env: Record<string, string> = {}, argv?: string[]): ServerProcess {
  const proc = Bun.spawn(argv ?? [builtBinary(), "server", ...args], { env: serverEnv(dataDir, env), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = collectOutput(proc);
  const exited = proc.exited.then(async (code) => {
    await Bun.sleep(50); // the output read to its end
    return code;
  });
  return {
    pid: proc.pid,
    exited,
    exitCode: () => proc.exitCode,
    logs: output.text,
    stop: (signal = "SIGTERM") => {
      if (proc.exitCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** Polls until `check` holds (a deadline for the test, not a timing claim). */
export async function eventually(check: () => boolean, ms = 40_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await Bun.sleep(25);
  }
  return check();
}

/** The log line a server prints once it listens, with its API URL. */
export const LISTENING = /"event":"listening","api":"(http:\/\/[^"]+)"/;

/** /health over a connection of its own (no keep-alive): whichever listener the kernel picks answers. */
export function freshHealth(url: string): Promise<any> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/health`, { agent: false, headers: { connection: "close" } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (text += c));
      res.on("end", () => resolve(JSON.parse(text)));
    });
    req.on("error", reject);
    req.end();
  });
}
