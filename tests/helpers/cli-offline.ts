// Runs the CLI's main() in-process with BROKER_ADDR pointing nowhere and no config dir, collecting
// what it writes: for commands that must refuse before any request (reaching the network would fail
// with a different message).

import { main } from "../../src/cli/index.ts";
import type { RunResult } from "./binary.ts";

export async function runOffline(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  // BROKER_ADDR points nowhere: reaching the network would fail with a different message.
  const saved = { addr: process.env.BROKER_ADDR, dir: process.env.BROKER_CONFIG_DIR };
  process.env.BROKER_ADDR = "http://127.0.0.1:9";
  process.env.BROKER_CONFIG_DIR = "/nonexistent/broker-cli-test";
  try {
    const code = await main(args, { out: (t) => void (out += t), err: (t) => void (err += t) });
    return { code, out, err };
  } finally {
    for (const [k, v] of [
      ["BROKER_ADDR", saved.addr],
      ["BROKER_CONFIG_DIR", saved.dir],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/**
 * `runOffline` shaped like `runBinary`'s result, for the end-to-end files: help text and argument errors
 * need no process of their own (the compiled entry point stays covered by the files' other runs).
 */
export async function runInProcess(args: string[]): Promise<RunResult> {
  const r = await runOffline(args);
  return { exitCode: r.code, stdout: r.out, stderr: r.err };
}
