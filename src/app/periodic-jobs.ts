// The minute jobs (proposal expiry, pruning ended rows and old held requests) run against a database
// that may be away: an outage is logged once, as a warning, and its end once, instead of an error line
// per job every minute for as long as it lasts. Any other failure is still an error, every time.

import { DatabaseUnavailable } from "../errors.ts";
import type { Logger } from "../log.ts";

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
