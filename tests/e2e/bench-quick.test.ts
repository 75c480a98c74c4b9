// The benchmark smoke run (`bun run bench --quick`) as part of the suite: it drives every scenario
// (tunnel, /proxy, blind, cold, idle, HTTP/2, bulk) through the compiled binary and fails on any error or
// non-2xx response. Never on timing: machines here are noisy.

import { expect, test } from "bun:test";
import { join } from "node:path";

test("bun run bench --quick completes every scenario without errors", async () => {
  const root = join(import.meta.dir, "..", "..");
  const proc = Bun.spawn([process.execPath, "bench/run.ts", "--quick", "--no-micro"], { cwd: root, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) console.error(out.slice(-4000), err.slice(-4000));
  expect(code).toBe(0);
  expect(out).toContain("tunnel, 16 keep-alive");
  expect(out).toContain("| h2, 1 connection × 64 streams, /small |");
}, 180_000);
