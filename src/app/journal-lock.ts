// One process per audit journal. A journal is emptied once everything in it has reached the database (as its writer
// knows it), so two processes appending to one file (two brokers started on one data directory) could each empty
// records the other has not written yet. Each journal (the broker's, or a worker's of `--workers N`: each its own)
// therefore has a lock file beside it, `<journal>.lock`, created with O_EXCL and naming its holder: the pid and that
// process's start time (so a pid the system has since given to another process is not taken for the broker). A lock
// whose holder is gone (a `kill -9`, a crash, a power loss) is stale and taken over; one whose holder lives refuses
// the start. A clean stop removes it. *Why a file, not a kernel lock:* Bun has no flock, and the pid check is what
// lets the refusal name the broker to stop.
//
// Taking a stale lock over is itself a race (brokers restarted together after a crash): a stale lock is removed by one
// process at a time, the one that made `<lock>.breaking` (O_EXCL, naming it as a lock does), and only while it still
// reads what that process judged stale; the others wait for it, then look again. So a lock one broker has just made is
// never moved or removed by another that judged the one before it stale. (Moving the stale file aside under a name of
// one's own and putting back one that turned out to be new left, with three brokers or more, a moment in which the
// new lock was gone and a third could make its own: two held it.) A `.breaking` whose maker died in that moment is
// stale in turn, and moved aside the old way.
//
// Only a regular file is read: a pipe in the lock's place would block the start forever, and a link to a device
// (/dev/zero) never ends; anything else there fails the lock, which leaves the broker without a journal (said in one
// line), as a directory there does.

import { closeSync, constants, existsSync, fstatSync, linkSync, lstatSync, openSync, readFileSync, readSync, renameSync, unlinkSync, writeSync } from "node:fs";
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
  const deadline = Date.now() + TAKEOVER_PATIENCE_MS;
  for (let attempt = 0; attempt < 8 || Date.now() < deadline; attempt++) {
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
    const broke = removeStale(path, found, mine);
    if (broke === "removed" && holder) tookOverFrom = holder.pid;
    if (broke === "wait") Bun.sleepSync(2); // another process is removing it this moment
  }
  throw new Error(`cannot lock ${path}: it keeps changing; is another broker starting on data directory ${dataDir}?`);
}

/** How long a start keeps trying while other processes take a stale lock over (each does so in microseconds). */
const TAKEOVER_PATIENCE_MS = 5000;

/**
 * Removes the stale lock `found` at `path` if this process gets `<lock>.breaking` and the lock still reads `found`:
 * "removed"; "wait" while another live process holds `.breaking`; "again" when something changed meanwhile.
 */
function removeStale(path: string, found: string, mine: string): "removed" | "wait" | "again" {
  const breaking = `${path}.breaking`;
  if (!create(breaking, mine)) {
    const other = readSettled(breaking);
    if (other === undefined) return "again";
    const holder = parse(other);
    if (holder && alive(holder)) return "wait";
    moveAsideIfStill(breaking, other); // its maker died while removing a stale lock
    return "again";
  }
  try {
    // While this process holds `.breaking` nobody else removes a lock, and the process that made `found` is gone: the
    // lock still reading `found` now is the very file judged stale, still there when it is removed.
    if (readText(path) !== found) return "again";
    unlinkSync(path);
    return "removed";
  } finally {
    try {
      unlinkSync(breaking);
    } catch {}
  }
}

/**
 * Removes `path` if it still reads `found` (a stale `.breaking`, rare: its maker died in the microseconds it held
 * it): moved aside under this process's own name, deleted if it was what was judged stale, put back otherwise (a hard
 * link, which fails rather than overwrite).
 */
function moveAsideIfStill(path: string, found: string): void {
  const aside = `${path}.stale-${process.pid}`;
  try {
    renameSync(path, aside);
  } catch {
    return; // someone else moved it first
  }
  try {
    if (readText(aside) !== found) linkSync(aside, path);
  } catch {}
  try {
    unlinkSync(aside);
  } catch {}
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

/** A lock is a line of some 60 bytes: anything longer is not one, and is read no further. */
const MAX_LOCK_BYTES = 4096;

/**
 * The file's text (its first MAX_LOCK_BYTES); undefined when it is not there. Anything but a regular file throws (a
 * directory, a pipe, a socket, a device, a symbolic link): never followed, never opened so that it blocks.
 */
function readText(path: string): string | undefined {
  let fd: number;
  try {
    if (!lstatSync(path).isFile()) throw new Error(`${path} is not a regular file`);
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return undefined;
    if ((err as { code?: unknown }).code === "ELOOP") throw new Error(`${path} is not a regular file`);
    throw err;
  }
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    const buf = Buffer.alloc(MAX_LOCK_BYTES);
    let n = 0;
    for (let r = -1; r !== 0 && n < buf.length; n += r) r = readSync(fd, buf, n, buf.length - n, n);
    return buf.toString("utf8", 0, n);
  } finally {
    closeSync(fd);
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
