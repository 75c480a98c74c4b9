// The minute jobs (proposal expiry, pruning ended rows and old held requests) run against a database
// that may be away: an outage is logged once, as a warning, and its end once, instead of an error line
// per job every minute for as long as it lasts. Any other failure is still an error, every time.

import { DatabaseUnavailable } from "../errors.ts";
import type { Domain } from "../identity/index.ts";
import type { Logger } from "../log.ts";
import { expireProposals, pruneEndedRows, pruneRequestApprovals } from "../workflows/index.ts";

export interface PeriodicJobs {
  /** Runs `job`, named `name` in the failure's log event (`<name>_failed`); never throws. */
  run(name: string, job: () => Promise<unknown>): Promise<void>;
}

export function periodicJobs(log: Logger): PeriodicJobs {
  let paused = false;
  return {
    async run(name, job) {
      try {
        await job();
        if (paused) log.info("periodic_jobs_resumed", {});
        paused = false;
      } catch (err) {
        if (!(err instanceof DatabaseUnavailable)) return log.error(`${name}_failed`, { err });
        if (!paused) log.warn("periodic_jobs_paused", { reason: err.reason });
        paused = true;
      }
    },
  };
}

/** Runs the sweeps now and every minute: proposal expiry each time, pruning hourly. The timer, to clear at stop. */
export function startSweeps(jobs: PeriodicJobs, domain: Domain): ReturnType<typeof setInterval> {
  let sweeps = 0;
  const sweep = () => {
    void jobs.run("proposal_expiry", () => expireProposals(domain));
    if (sweeps++ % 60 === 0) {
      void jobs.run("prune", () => pruneEndedRows(domain));
      void jobs.run("prune", () => pruneRequestApprovals(domain));
    }
  };
  sweep();
  return setInterval(sweep, 60_000);
}
