// A worker's hello from its supervisor (app/worker-link.ts): an input that stays open but never carries the line (a
// hand-set BROKER_WORKER with a pipe someone holds) is refused once the deadline passes, never waited on forever; the
// refusal says so and echoes nothing of what the input held, and the input is let go (no pending read keeps the
// process alive). A supervisor's line is taken as before.

import { expect, test } from "bun:test";
import { joinSupervisor, NotAWorker, workerHello } from "../../../src/app/worker-link.ts";
import { Secret } from "../../../src/secret.ts";

/** An input that carries `text` and then stays open and silent; `cancelled` says whether the reader let it go. */
function openInput(text: string) {
  let cancelled = false;
  const input = new ReadableStream<Uint8Array>({
    start(controller) {
      if (text) controller.enqueue(new TextEncoder().encode(text));
    },
    cancel() {
      cancelled = true;
    },
  });
  return { input, cancelled: () => cancelled };
}

test("an open, silent input (a partial line, no newline) is refused after the deadline, naming it, echoing nothing", async () => {
  const { input, cancelled } = openInput('{"broker_worker":"2/2","master_password":"hunter2');
  const err = await joinSupervisor({ id: 2, count: 2 }, { input, deadlineMs: 100 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotAWorker);
  const message = (err as Error).message;
  expect(message).toContain("never by hand");
  expect(message).toContain("within 0.1 s");
  expect(message).not.toContain("hunter2");
  expect(cancelled()).toBe(true);
}, 5000);

test("an open input that carries nothing at all is refused after the deadline too", async () => {
  const { input, cancelled } = openInput("");
  const err = await joinSupervisor({ id: 1, count: 3 }, { input, deadlineMs: 50 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotAWorker);
  expect((err as Error).message).toContain("no word from a supervisor on standard input within 0.05 s");
  expect(cancelled()).toBe(true);
}, 5000);

test("a wrong line on an input left open is refused at once, and the input let go", async () => {
  const { input, cancelled } = openInput('{"broker_worker":"1/2"}\n');
  const err = await joinSupervisor({ id: 2, count: 2 }, { input, deadlineMs: 60_000 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(NotAWorker);
  expect((err as Error).message).not.toContain("within");
  expect(cancelled()).toBe(true);
}, 5000);

test("the supervisor's line is taken (master password included) and the link watches the pipe after the deadline", async () => {
  const { input } = openInput(workerHello({ id: 2, count: 2 }, new Secret("the master password")));
  const link = await joinSupervisor({ id: 2, count: 2 }, { input, deadlineMs: 50 });
  expect(link.masterPassword?.reveal()).toBe("the master password");
  // Past the deadline the link still stands: the pipe is open, so the supervisor is not gone.
  await Bun.sleep(100);
  const gone = await Promise.race([link.gone.then(() => "gone"), Bun.sleep(20).then(() => "open")]);
  expect(gone).toBe("open");
  link.close();
});
