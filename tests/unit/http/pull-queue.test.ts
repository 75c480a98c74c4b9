// The pull queue behind upstream connections and the tunnel's client streams: order, unread,
// end and failure after the queued bytes, and backpressure with a gap between pause and resume.

import { expect, test } from "bun:test";
import { createPullQueue } from "../../../src/http/index.ts";

const bytes = (n: number) => new Uint8Array(n);

test("chunks come out in order, unread ones first, then null once the source ended", async () => {
  const q = createPullQueue({ pause() {}, resume() {} });
  const pending = q.read(); // a reader waiting before any byte arrives
  q.push(Buffer.from("a"));
  expect(Buffer.from((await pending)!).toString()).toBe("a");
  q.push(Buffer.from("b"));
  q.unread(Buffer.from("z"));
  q.end();
  expect(Buffer.from((await q.read())!).toString()).toBe("z");
  expect(Buffer.from((await q.read())!).toString()).toBe("b");
  expect(await q.read()).toBeNull();
});

test("a failure is thrown after the bytes that arrived before it, and the first failure is kept", async () => {
  const q = createPullQueue({ pause() {}, resume() {} });
  q.push(bytes(3));
  q.fail(new Error("first"));
  q.fail(new Error("second"));
  expect((await q.read())!.byteLength).toBe(3);
  await expect(q.read()).rejects.toThrow("first");
});

test("the source pauses past the high mark and resumes only below the low one", async () => {
  const calls: string[] = [];
  const q = createPullQueue({ pause: () => calls.push("pause"), resume: () => calls.push("resume") }, { high: 10, low: 4 });
  for (let i = 0; i < 4; i++) q.push(bytes(3)); // 12 > 10
  expect(calls).toEqual(["pause"]);
  await q.read(); // 9 left
  await q.read(); // 6 left: still above the low mark
  expect(calls).toEqual(["pause"]);
  await q.read(); // 3 left
  expect(calls).toEqual(["pause", "resume"]);
  expect(q.buffered).toBe(3);
  expect(q.take().length).toBe(1);
  expect(q.buffered).toBe(0);
});
