// One process per audit journal. A journal is emptied once everything in it has reached the database (as its writer
// knows it), so two processes appending to one file (two brokers started on one data directory) could each empty
// records the other has not written yet. Each journal (the broker's, or a worker's of `--workers N`: each its own)
// therefore has a lock file beside it, `<journal>.lock`, created with O_EXCL and naming its holder: the pid and that
// process's start time (so a pid the system has since given to another process is not taken for the broker). A lock
// whose holder is gone (a `kill -9`, a crash, a power loss) is stale and taken over; one whose holder lives refuses
// the start. A clean stop removes it. *Why a file, not a kernel lock:* Bun has no flock, and the pid check is what
// lets the refusal name the broker to stop.
//
// Taking a stale lock over is itself a race (two brokers restarted together after a crash): each moves the stale file
// aside under a name of its own, and only the one that moved what it judged stale deletes it; one that moved a lock
// another broker has just made puts it back (a hard link, which fails rather than overwrite), then looks again.

import { closeSync, existsSync, linkSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";

/** Another live process holds the journal: this one must not start. */
export class DataDirBusy extends Error {
  constructor(
    readonly pid: number,
    readonly dataDir: string,
  ) {
    super(`another broker (pid ${pid}) is serving data directory ${dataDir}; stop it or use another data directory (BROKER_DATA_DIR)`);
  }
}

export interface JournalLock {
  /** The pid named by a stale lock this one replaced (a broker that did not stop cleanly), if any. */
  readonly tookOverFrom?: number;
  /** Removes the lock (only while it is still this process's). */
  release(): void;
}

interface Holder {
  readonly pid: number;
  /** /proc's start time of the process, in clock ticks since boot; null where there is no /proc. */
  readonly start: string | null;
}

/**
 * Takes the lock of `journalFile` in `dataDir` (which exists); throws DataDirBusy when a live process holds it, and the
 * file system's error when the lock cannot be made (a full disk).
 */
export function lockJournal(dataDir: string, journalFile: string): JournalLock {
  const path = join(dataDir, `${journalFile}.lock`);
  const mine = `${JSON.stringify({ pid: process.pid, start: startTimeOf(process.pid) } satisfies Holder)}\n`;
  let tookOverFrom: number | undefined;
  for (let attempt = 0; attempt < 8; attempt++) {
    if (create(path, mine)) {
      let held = true;
      return {
        ...(tookOverFrom !== undefined && { tookOverFrom }),
        release() {
          if (!held) return;
          held = false;
          try {
            if (readText(path) === mine) unlinkSync(path);
          } catch {} // gone or unreadable: not this process's to remove
        },
      };
    }
    const found = readSettled(path);
    if (found === undefined) continue; // removed meanwhile
    const holder = parse(found);
    if (holder && alive(holder)) throw new DataDirBusy(holder.pid, dataDir);
    const aside = `${path}.stale-${process.pid}`;
    try {
      renameSync(path, aside);
    } catch {
      continue; // someone else moved it first
    }
    if (readText(aside) === found) {
      if (holder) tookOverFrom = holder.pid;
    } else {
      try {
        linkSync(aside, path); // a lock made meanwhile, put back
      } catch {}
    }
    unlinkSync(aside);
  }
  throw new Error(`cannot lock ${path}: it keeps changing; is another broker starting on data directory ${dataDir}?`);
}

/** Creates the lock holding `text`, or false when one exists. */
function create(path: string, text: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o600);
  } catch (err) {
    if ((err as { code?: unknown }).code === "EEXIST") return false;
    throw err;
  }
  try {
    writeSync(fd, text);
  } catch (err) {
    unlinkSync(path); // an empty lock would only delay the next start
    throw err;
  } finally {
    closeSync(fd);
  }
  return true;
}

/** The file's text; undefined when it is not there (any other failure throws: a directory in its place). */
function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return undefined;
    throw err;
  }
}

/** The lock's text; one being written (created, not yet filled) gets a moment to be complete. */
function readSettled(path: string): string | undefined {
  let text = readText(path);
  for (let i = 0; i < 10 && text !== undefined && !text.endsWith("\n"); i++) {
    Bun.sleepSync(5);
    text = readText(path);
  }
  return text;
}

function parse(text: string): Holder | undefined {
  try {
    const h = JSON.parse(text) as Partial<Holder>;
    if (typeof h.pid !== "number" || !Number.isInteger(h.pid) || h.pid < 1) return undefined;
    return { pid: h.pid, start: typeof h.start === "string" ? h.start : null };
  } catch {
    return undefined;
  }
}

/** Whether the lock's holder still runs: its pid lives (not a zombie) and, where /proc says, started when the lock says. */
function alive(holder: Holder): boolean {
  const stat = procStat(holder.pid);
  if (stat) return stat.state !== "Z" && stat.state !== "X" && (holder.start === null || stat.start === holder.start);
  if (existsSync("/proc/self/stat")) return false; // /proc lists every process: this one is gone
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: unknown }).code === "EPERM"; // another user's process
  }
}

function startTimeOf(pid: number): string | null {
  return procStat(pid)?.start ?? null;
}

/** Fields of /proc/<pid>/stat: the state (3rd) and the start time (22nd), read after the command name's ")". */
function procStat(pid: number): { state: string; start: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined; // no such process (or no /proc)
  }
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return fields.length > 19 ? { state: fields[0]!, start: fields[19]! } : undefined;
}
