// When each vault's head passed which seq (app/audit-head-history.ts): every record up to a head seen longer ago than
// the checkpoint interval plus the grace must be signed by now; nothing younger is claimed, nothing is claimed for a
// vault never seen, and old samples are dropped once a newer one is old enough.

import { expect, test } from "bun:test";
import { createHeadHistory } from "../../../src/app/audit-head-history.ts";

const EVERY = 300_000;
const GRACE = 10_000;

test("the highest seq seen at least the interval plus the grace ago", () => {
  const h = createHeadHistory({ everyMs: EVERY, graceMs: GRACE });
  const t0 = 1_000_000;
  expect(h.signedThrough(1, t0)).toBeUndefined();
  h.observe(1, 10, t0);
  h.observe(1, 25, t0 + 60_000);
  h.observe(1, 20, t0 + 61_000); // a lower seq seen later (another instance's stale read) changes nothing
  h.observe(2, 7, t0);
  expect(h.signedThrough(1, t0 + EVERY + GRACE - 1)).toBeUndefined();
  expect(h.signedThrough(1, t0 + EVERY + GRACE)).toBe(10);
  expect(h.signedThrough(1, t0 + 60_000 + EVERY + GRACE)).toBe(25);
  // Once a newer sample is old enough the older one goes, and later reads keep the newer answer.
  expect(h.signedThrough(1, t0 + 10 * EVERY)).toBe(25);
  expect(h.signedThrough(2, t0 + EVERY + GRACE)).toBe(7);
  expect(h.signedThrough(3, t0 + 10 * EVERY)).toBeUndefined();
});

test("observations closer than the spacing (a second, or a 64th of the interval) share a sample, dated by the latest of them: a seq is never dated before it was seen", () => {
  const h = createHeadHistory({ everyMs: EVERY, graceMs: GRACE });
  const spacing = EVERY / 64;
  for (let i = 0; i < 1000; i++) h.observe(1, i + 1, 1_000 + i); // 1000 writes within one second
  h.observe(1, 2000, 1_000 + spacing);
  // Seq 1000 was seen at 1,999: not claimed a moment before that is old enough, claimed once it is.
  expect(h.signedThrough(1, 1_998 + EVERY + GRACE)).toBeUndefined();
  expect(h.signedThrough(1, 1_999 + EVERY + GRACE)).toBe(1000);
  expect(h.signedThrough(1, 1_000 + spacing + EVERY + GRACE)).toBe(2000);
  // A long interval (a wide spacing) dates nothing early either.
  const slow = createHeadHistory({ everyMs: 1_800_000, graceMs: GRACE });
  slow.observe(1, 1, 0);
  slow.observe(1, 100, 20_000); // inside the 28 s spacing
  expect(slow.signedThrough(1, 1_800_000 + GRACE)).toBeUndefined();
  expect(slow.signedThrough(1, 20_000 + 1_800_000 + GRACE)).toBe(100);
});

test("after a day of writes never read (samples dropped as they come) the answer is still exact", () => {
  const h = createHeadHistory({ everyMs: 60_000, graceMs: GRACE });
  let last = 0;
  for (let t = 0; t < 24 * 3_600_000; t += 100) h.observe(1, ++last, t); // a day of ten writes a second, never read
  expect(h.signedThrough(1, 24 * 3_600_000)).toBeGreaterThan(last - (70_000 + 1_000) / 100 - 10);
});
