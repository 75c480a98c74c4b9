// `broker doctor`'s look at workers (issue 40, `broker server --workers N`): how many are set against the cores this
// host gives the broker, and audit journals that workers beyond the configured count left behind with records the
// database may lack (the broker's first worker writes them when it starts next).

import { readdirSync, readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import type { Config } from "../../config.ts";
import type { Finding } from "./doctor-checks.ts";

const WORKER_JOURNAL = /^audit-journal-(\d+)\.jsonl$/;

export function checkWorkers(config: Pick<Config, "workers" | "dataDir">): Finding[] {
  const cores = availableParallelism();
  const findings: Finding[] = [];
  if (config.workers > cores)
    findings.push({
      check: "workers",
      level: "warning",
      message: `${config.workers} workers on ${cores} core(s): the extra ones compete for the same cores and add memory, not throughput`,
      fix: `set BROKER_WORKERS (or --workers) to at most ${cores}, or auto`,
    });
  else
    findings.push({
      check: "workers",
      level: "ok",
      message: config.workers === 1 ? `1 process (${cores} core(s) available)` : `${config.workers} workers on ${cores} core(s)`,
    });
  let names: string[] = [];
  try {
    names = readdirSync(config.dataDir);
  } catch {
    return findings; // the data directory check says why
  }
  for (const name of names) {
    const id = Number(WORKER_JOURNAL.exec(name)?.[1]);
    if (!id || id <= config.workers) continue;
    // The first line names the journal; any line after it is a record.
    const records = readFileSync(`${config.dataDir}/${name}`, "utf8")
      .split("\n")
      .slice(1)
      .some((l) => l.trim() !== "");
    if (records)
      findings.push({
        check: "workers",
        level: "warning",
        message: `${name} was worker ${id}'s audit journal and holds records that may not be in the database yet`,
        fix: "start the broker: its first worker writes what other workers' journals hold before it serves",
      });
  }
  return findings;
}
