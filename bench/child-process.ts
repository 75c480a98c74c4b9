// What the bench does with the processes it starts (the broker, Squid, mitmproxy): keep everything they print, and
// stop them with SIGTERM, then SIGKILL if they have not left after a while.

import type { Subprocess } from "bun";

/** Reads stdout and stderr as they come; returns what they have printed so far. */
export function keepOutput(proc: Subprocess<"ignore" | "pipe" | "inherit", "pipe", "pipe">): () => string {
  let out = "";
  const decoder = new TextDecoder();
  const collect = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s) out += decoder.decode(c, { stream: true });
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  return () => out;
}

/** SIGTERM, then SIGKILL after `forceAfterMs`; resolves once it has exited. */
export async function stopProcess(proc: Subprocess, forceAfterMs = 5000): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill("SIGTERM");
  const t = setTimeout(() => proc.kill("SIGKILL"), forceAfterMs);
  await proc.exited;
  clearTimeout(t);
}
