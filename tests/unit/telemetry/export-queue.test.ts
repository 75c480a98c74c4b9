// The export queue (telemetry/export-queue.ts): batches, its bound and the drops it counts, a collector
// that fails (batch kept, a pause that doubles, told once) or refuses for good (batch dropped), and the
// shutdown flush that never outlasts its grace.

import { describe, expect, test } from "bun:test";
import { createExportQueue, type ExportQueueOptions } from "../../../src/telemetry/index.ts";

interface Harness {
  sent: number[][];
  dropped: [number, string][];
  failing: unknown[];
  recovered: number;
}

function harness(overrides: Partial<ExportQueueOptions<number>> = {}) {
  const h: Harness = { sent: [], dropped: [], failing: [], recovered: 0 };
  const q = createExportQueue<number>({
    send: async (batch) => void h.sent.push([...batch]),
    maxQueued: 100,
    maxBatch: 10,
    delayMs: 20,
    minBackoffMs: 20,
    maxBackoffMs: 80,
    onFailing: (err) => h.failing.push(err),
    onRecovered: () => h.recovered++,
    onDropped: (count, reason) => h.dropped.push([count, reason]),
    ...overrides,
  });
  return { q, h };
}

const waitFor = async (cond: () => boolean, ms = 2000) => {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await Bun.sleep(5);
  }
};

describe("export queue", () => {
  test("a partial batch waits for its delay; a full one leaves at once; order is kept", async () => {
    const { q, h } = harness();
    for (let i = 0; i < 3; i++) q.push(i);
    expect(h.sent).toEqual([]);
    await waitFor(() => h.sent.length === 1);
    expect(h.sent).toEqual([[0, 1, 2]]);
    for (let i = 3; i < 28; i++) q.push(i);
    await waitFor(() => h.sent.flat().length === 28);
    expect(h.sent.flat()).toEqual(Array.from({ length: 28 }, (_, i) => i));
    expect(h.sent.every((b) => b.length <= 10)).toBe(true);
    await q.stop(100);
  });

  test("past its bound, items are dropped and counted, told once after the export under way", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const { q, h } = harness({
      maxQueued: 20,
      send: async () => {
        await gate;
      },
    });
    for (let i = 0; i < 25; i++) q.push(i);
    expect(q.queued).toBe(20);
    expect(q.droppedTotal).toBe(5);
    expect(h.dropped).toEqual([]); // no line per item
    release();
    await waitFor(() => h.dropped.length === 1);
    expect(h.dropped).toEqual([[5, "queue full"]]);
    await q.stop(100);
    expect(q.droppedTotal).toBe(5);
  });

  test("a collector that fails: the batch stays first in line, retried after a doubling pause, nothing lost", async () => {
    let failures = 3;
    const attempts: number[] = [];
    const { q, h } = harness({
      send: async (b) => {
        attempts.push(Date.now());
        if (failures-- > 0) throw new Error("ECONNREFUSED");
        h.sent.push([...b]);
      },
    });
    for (let i = 0; i < 5; i++) q.push(i);
    await waitFor(() => h.sent.length === 1);
    expect(h.sent).toEqual([[0, 1, 2, 3, 4]]);
    expect(attempts).toHaveLength(4);
    // 20, 40, 80 ms pauses (timers may fire a little late, never early)
    const gaps = attempts.slice(1).map((t, i) => t - attempts[i]!);
    expect(gaps[0]!).toBeGreaterThanOrEqual(15);
    expect(gaps[1]!).toBeGreaterThanOrEqual(35);
    expect(gaps[2]!).toBeGreaterThanOrEqual(75);
    expect(h.failing).toHaveLength(1); // told once per failure run
    expect(h.recovered).toBe(1);
    expect(q.droppedTotal).toBe(0);
    await q.stop(100);
  });

  test("a refusal the collector would repeat (400) drops that batch, counted, and the queue goes on", async () => {
    const refusal = Object.assign(new Error("Bad Request"), { code: 400 });
    let first = true;
    const { q, h } = harness({
      isPermanent: (err) => (err as { code?: number }).code === 400,
      send: async (b) => {
        if (first) {
          first = false;
          throw refusal;
        }
        h.sent.push([...b]);
      },
    });
    for (let i = 0; i < 3; i++) q.push(i);
    await waitFor(() => h.dropped.length === 1);
    expect(h.dropped).toEqual([[3, "refused by the collector"]]);
    q.push(9);
    await waitFor(() => h.sent.length === 1);
    expect(h.sent).toEqual([[9]]);
    expect(h.failing).toEqual([]);
    await q.stop(100);
  });

  test("stop sends what is queued at once, without waiting for the batch delay", async () => {
    const { q, h } = harness({ delayMs: 60_000 });
    for (let i = 0; i < 15; i++) q.push(i);
    const t0 = Date.now();
    await q.stop(1000);
    expect(Date.now() - t0).toBeLessThan(500);
    expect(h.sent.flat()).toEqual(Array.from({ length: 15 }, (_, i) => i));
    expect(q.droppedTotal).toBe(0);
    q.push(99); // after stop: counted, never sent
    expect(q.droppedTotal).toBe(1);
  });

  test("stop keeps trying a failing collector within its grace, then drops the rest and says so", async () => {
    let calls = 0;
    const { q, h } = harness({
      send: async () => {
        calls++;
        throw new Error("503");
      },
    });
    for (let i = 0; i < 12; i++) q.push(i);
    const t0 = Date.now();
    await q.stop(150);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(140);
    expect(took).toBeLessThan(600);
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(h.dropped).toEqual([[12, "shutdown"]]);
    expect(q.droppedTotal).toBe(12);
  });

  test("an export that hangs past the grace does not hold stop", async () => {
    const { q } = harness({ send: () => new Promise<void>(() => {}) });
    q.push(1);
    const t0 = Date.now();
    await q.stop(100);
    expect(Date.now() - t0).toBeLessThan(500);
    expect(q.droppedTotal).toBe(1);
  });
});
