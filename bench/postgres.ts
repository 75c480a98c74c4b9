// PostgreSQL for the bench: a throwaway cluster from the test helper (initdb in a temp dir, loopback
// port, fsync off), one database per broker. Absent server binaries skip the PostgreSQL rows with a
// note instead of failing the run. Also reads the server's CPU time and counts what the change feed
// sends on its channel.

import { SQL } from "bun";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CHANGES_CHANNEL } from "../src/store/index.ts";
import { CLK_TCK } from "./broker.ts";
import { findPgBin, startPgCluster, type PgCluster } from "../tests/helpers/postgres.ts";

export type { PgCluster };

export const PG_MISSING_NOTE = "PostgreSQL rows skipped: server binaries (initdb, pg_ctl, postgres) not found; apt-get install postgresql";

/** A cluster, or a sentence saying why there is none. */
export async function startBenchCluster(): Promise<PgCluster | string> {
  if (!findPgBin()) return PG_MISSING_NOTE;
  return startPgCluster();
}

export interface ChannelCounter {
  /** Heartbeats (each instance's `{"t":"beat"}` to itself) and change announcements since the last reset. */
  counts(): { beats: number; changes: number };
  reset(): void;
  stop(): Promise<void>;
}

/**
 * Listens on the change channel from a connection of its own: every NOTIFY the broker sends arrives
 * here too, so the heartbeat traffic is counted where it happens (it is not a read of any table).
 */
export async function countChannel(url: string): Promise<ChannelCounter> {
  const sql = new SQL({ url, max: 1 });
  let beats = 0;
  let changes = 0;
  const sub = await sql.listen(CHANGES_CHANNEL, (payload: string) => {
    if (payload.includes('"t":"beat"')) beats++;
    else changes++;
  });
  return {
    counts: () => ({ beats, changes }),
    reset() {
      beats = 0;
      changes = 0;
    },
    async stop() {
      await sub.unlisten().catch(() => {});
      await sql.close({ timeout: 1 });
    },
  };
}

/** utime + stime (ms) of the cluster's postmaster and its live children (backends, background workers). */
export function serverCpuMs(cluster: PgCluster): number {
  const postmaster = Number(readFileSync(join(cluster.dir, "data", "postmaster.pid"), "utf8").split("\n")[0]);
  let total = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // exited meanwhile
    }
    // after "pid (comm) ": ppid is at index 1, utime and stime at 11 and 12
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(entry) === postmaster || Number(f[1]) === postmaster) total += ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK;
  }
  return total;
}
