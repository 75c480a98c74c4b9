// The pipe between the supervisor of `broker server --workers N` and each worker: the worker's standard input. The
// supervisor writes one line as it starts the worker (which worker it is, and the master password if there is one) and
// holds the pipe open for as long as it runs. The worker reads that line before anything else: without it, BROKER_WORKER
// was set by hand (refused: such a process would share its ports with any process of its user and skip the sweeps).
// When the pipe closes, the supervisor is gone (a SIGKILL or a crash tells its children nothing else), and the worker
// stops rather than serve on as an orphan nobody will stop or restart. The line must come within HELLO_DEADLINE_MS:
// a supervisor writes it as it starts the worker, before the worker reads anything, so an input that stays open and
// silent (a pipe someone holds, `sleep infinity |`) is a hand-set BROKER_WORKER too, refused rather than waited on.

import { isatty } from "node:tty";
import type { WorkerRole } from "../config.ts";
import { Secret } from "../secret.ts";

/** Refused: this process was not started by a supervisor (BROKER_WORKER set by hand). */
export class NotAWorker extends Error {}

const HAND_SET = "BROKER_WORKER is set by broker server --workers for the workers it starts, never by hand; unset it";

/** How long a worker waits for the supervisor's line (already in the pipe when a supervisor started it). */
export const HELLO_DEADLINE_MS = 5000;

/** The line the supervisor writes on worker `role`'s standard input. */
export function workerHello(role: WorkerRole, masterPassword: Secret | undefined): string {
  // reveal: onto the worker's standard input only, never its environment or arguments
  return `${JSON.stringify({ broker_worker: `${role.id}/${role.count}`, ...(masterPassword && { master_password: masterPassword.reveal() }) })}\n`;
}

export interface SupervisorLink {
  readonly masterPassword: Secret | undefined;
  /** Resolves when the supervisor's end of the pipe closes: the supervisor is gone. */
  readonly gone: Promise<void>;
  /** Stops watching (the worker is stopping anyway), so the pipe keeps no process alive. */
  close(): void;
}

/**
 * Reads the supervisor's line from standard input (`opts.input` in tests); throws NotAWorker when there is none: a
 * terminal, a closed input, or nothing within `opts.deadlineMs`. What the input held is never part of the error.
 */
export async function joinSupervisor(role: WorkerRole, opts: { input?: ReadableStream<Uint8Array>; deadlineMs?: number } = {}): Promise<SupervisorLink> {
  if (!opts.input && isatty(0)) throw new NotAWorker(HAND_SET);
  const deadlineMs = opts.deadlineMs ?? HELLO_DEADLINE_MS;
  const reader = (opts.input ?? Bun.stdin.stream()).getReader();
  const decoder = new TextDecoder();
  let text = "";
  let late = false;
  let hello: Hello | undefined;
  // Cancelling ends the pending read (done), so nothing of this input keeps the refused process alive.
  const timer = setTimeout(() => {
    late = true;
    void reader.cancel().catch(() => {});
  }, deadlineMs);
  try {
    for (let nl = -1; nl < 0; nl = text.indexOf("\n")) {
      const r = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (late) throw new NotAWorker(`${HAND_SET} (no word from a supervisor on standard input within ${deadlineMs / 1000} s)`);
      if (r.done) throw new NotAWorker(HAND_SET);
      text += decoder.decode(r.value, { stream: true });
      if (text.length > 1 << 20) throw new NotAWorker(HAND_SET);
    }
    hello = readHello(text.slice(0, text.indexOf("\n")));
    if (hello?.broker_worker !== `${role.id}/${role.count}`) throw new NotAWorker(HAND_SET);
  } catch (err) {
    void reader.cancel().catch(() => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
  const masterPassword = typeof hello.master_password === "string" && hello.master_password ? new Secret(hello.master_password) : undefined;
  let closed = false;
  const gone = (async () => {
    // Nothing more is written; the read ends when the supervisor's end closes.
    while (!closed) {
      const r = await reader.read().catch(() => ({ done: true as const }));
      if (r.done) return;
    }
  })();
  return {
    masterPassword,
    gone,
    close() {
      closed = true;
      void reader.cancel().catch(() => {});
    },
  };
}

interface Hello {
  readonly broker_worker?: unknown;
  readonly master_password?: unknown;
}

function readHello(line: string): Hello | undefined {
  try {
    const hello: unknown = JSON.parse(line);
    return hello && typeof hello === "object" ? hello : undefined;
  } catch {
    return undefined;
  }
}
