// The minute jobs during a database outage: one warning when it starts, one line when it ends, and any
// other failure an error every time (app/periodic-jobs.ts).

import { expect, test } from "bun:test";
import { periodicJobs } from "../../../src/app/periodic-jobs.ts";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { createMemoryLogger } from "../../../src/log.ts";

const events = (lines: string[]) => lines.map((l) => JSON.parse(l) as { level: string; event: string });

test("an outage is one warning however many jobs fail in it; its end is one line; the next outage warns again", async () => {
  const log = createMemoryLogger();
  const jobs = periodicJobs(log);
  const down = () => Promise.reject(new DatabaseUnavailable("connection refused"));
  for (let minute = 0; minute < 5; minute++) {
    await jobs.run("proposal_expiry", down);
    await jobs.run("prune", down);
  }
  await jobs.run("proposal_expiry", async () => 3);
  await jobs.run("proposal_expiry", async () => 0);
  await jobs.run("prune", down);
  expect(events(log.lines).map((e) => `${e.level} ${e.event}`)).toEqual([
    "warn periodic_jobs_paused",
    "info periodic_jobs_resumed",
    "warn periodic_jobs_paused",
  ]);
});

test("any other failure is an error, every time, named after its job", async () => {
  const log = createMemoryLogger();
  const jobs = periodicJobs(log);
  for (let i = 0; i < 2; i++) await jobs.run("prune", () => Promise.reject(new Error("disk I/O error")));
  expect(events(log.lines).map((e) => `${e.level} ${e.event}`)).toEqual(["error prune_failed", "error prune_failed"]);
});
