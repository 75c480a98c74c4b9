// The in-memory record of what a session met at the transparent proxy: each blind host once, in order,
// CONNECTs counted, bounded in sessions and hosts, and a waiting reader woken by a new host.

import { expect, test } from "bun:test";
import { createSessionActivity } from "../../../src/egress/index.ts";

const at = (host: string, port = 443) => ({ host, port });

test("blind hosts are listed once each, in order; every CONNECT is counted", async () => {
  const log = createSessionActivity(() => 1_000);
  log.note("s1", at("api.example.com"), "intercept");
  log.note("s1", at("other.example"), "blind");
  log.note("s1", at("other.example"), "blind");
  log.note("s1", at("127.0.0.1", 8443), "blind");
  log.note("s1", at("denied.example"), "refuse");
  const seen = await log.read("s1");
  expect(seen.connects).toBe(5);
  expect(seen.unmatched.map((u) => u.name)).toEqual(["other.example", "127.0.0.1:8443"]);
  expect(await log.read("unknown")).toEqual({ connects: 0, unmatched: [] });
});

test("bounded: the oldest session goes first, and a session keeps at most its share of hosts", async () => {
  const log = createSessionActivity(() => 0, { maxSessions: 2, maxHostsPerSession: 2 });
  for (const s of ["a", "b", "c"]) log.note(s, at("x.example"), "blind");
  expect((await log.read("a")).connects).toBe(0);
  for (const h of ["1.example", "2.example", "3.example"]) log.note("c", at(h), "blind");
  expect((await log.read("c")).unmatched.map((u) => u.name)).toEqual(["x.example", "1.example"]);
});

test("a reader waiting for more than it has seen is woken by a new host, or answered when the wait ends", async () => {
  const log = createSessionActivity(() => 0);
  log.note("s", at("first.example"), "blind");
  const started = Date.now();
  const waiting = log.read("s", { after: 1, waitMs: 5_000 });
  setTimeout(() => log.note("s", at("second.example"), "blind"), 50);
  expect((await waiting).unmatched.map((u) => u.name)).toEqual(["first.example", "second.example"]);
  expect(Date.now() - started).toBeLessThan(2_000);
  const quiet = await log.read("s", { after: 2, waitMs: 100 });
  expect(quiet.unmatched).toHaveLength(2);
  // A host already unseen by the reader answers at once.
  expect((await log.read("s", { after: 0, waitMs: 5_000 })).unmatched).toHaveLength(2);
});
