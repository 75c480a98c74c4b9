// Running a child the way `vault run` does, outside or inside containment: stdio inherited, SIGINT,
// SIGTERM and SIGHUP passed on, and its outcome as a shell reports it (the exit code, or 128 plus
// the number of the signal that ended it).

const SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;
const NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };

/** Throws what Bun.spawn throws when the command cannot start (not found). */
export async function runSupervised(command: string[], env: Record<string, string | undefined>): Promise<number> {
  // Handlers go in before the child exists: a signal in between must not end this process (and skip
  // what the caller does afterwards, such as revoking a session); it is passed on once there is a child.
  let child: ReturnType<typeof Bun.spawn> | undefined;
  let pending: NodeJS.Signals | undefined;
  const handlers = SIGNALS.map((s) => [s, () => (child ? child.kill(s) : (pending = s))] as const);
  for (const [s, h] of handlers) process.on(s, h);
  try {
    child = Bun.spawn(command, { env, stdio: ["inherit", "inherit", "inherit"] });
    if (pending) child.kill(pending);
    const code = await child.exited;
    return child.signalCode ? 128 + (NUMBERS[String(child.signalCode)] ?? 0) : code;
  } finally {
    for (const [s, h] of handlers) process.off(s, h);
  }
}
