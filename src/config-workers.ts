// BROKER_WORKERS (issue 40): how many processes serve the API and proxy ports together (`broker server --workers N`),
// and, inside a worker the supervisor started, which one it is. A leaf like every config file: reads the environment,
// names each problem.

import { availableParallelism } from "node:os";

/** More processes than this is a typo, not a host. */
export const MAX_WORKERS = 64;

/** Set by the supervisor on each worker it starts (never by people): "<id>/<count>", e.g. "2/4". */
export const WORKER_ENV = "BROKER_WORKER";

/** Which worker of how many this process is; absent when it serves alone. */
export interface WorkerRole {
  readonly id: number;
  readonly count: number;
}

/** BROKER_WORKERS: a whole number from 1, or `auto` (one per core this process may use). */
export function readWorkers(raw: string | undefined, problems: string[]): number {
  if (raw === undefined || raw.trim() === "") return 1;
  const text = raw.trim().toLowerCase();
  if (text === "auto") return Math.min(MAX_WORKERS, Math.max(1, availableParallelism()));
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_WORKERS) {
    problems.push(`BROKER_WORKERS: must be auto or a whole number from 1 to ${MAX_WORKERS} (got ${JSON.stringify(raw)})`);
    return 1;
  }
  return n;
}

/** The supervisor's BROKER_WORKER mark; a malformed one is a problem (someone set it by hand). */
export function readWorkerRole(raw: string | undefined, problems: string[]): WorkerRole | undefined {
  if (raw === undefined || raw === "") return undefined;
  const m = /^(\d{1,2})\/(\d{1,2})$/.exec(raw);
  const id = Number(m?.[1]);
  const count = Number(m?.[2]);
  if (!m || id < 1 || count < 2 || id > count || count > MAX_WORKERS) {
    problems.push(`${WORKER_ENV}: set by broker server --workers for its workers, never by hand (got ${JSON.stringify(raw)})`);
    return undefined;
  }
  return { id, count };
}
