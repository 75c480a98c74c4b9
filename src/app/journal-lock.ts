// One process per audit journal. A journal is emptied once everything in it has reached the database (as its writer
// knows it), so two processes appending to one file (two brokers started on one data directory) could each empty
// records the other has not written yet. Each journal (the broker's, or a worker's of `--workers N`: each its own)
// therefore has a lock beside it, `<journal>.lock`: a small SQLite file its holder keeps open with an exclusive lock
// (`locking_mode = EXCLUSIVE`, then `BEGIN EXCLUSIVE`) for as long as it runs. *Why a kernel lock, not a pid file:*
// it is a POSIX advisory lock the kernel keeps on the file's inode, so a broker in another pid namespace (two
// containers sharing one data-directory volume on one host) sees it, where a pid names nobody there (each took the
// other's live lock for stale); and the kernel lets go of it however its holder ends (`kill -9`, a crash): no stale
// locks, no takeovers to race, no pid given since to another process. *Why SQLite:* Bun has no flock; bun:sqlite
// holds such a lock. It holds across containers on one host, not across hosts: a network file system's locks are
// its own. Processes starting in one instant can each refuse the other (each holding the shared lock SQLite takes on
// the way to the exclusive one): a refused one lets go and tries again a few times, milliseconds apart, so one gets it.
//
// `<journal>.holder` beside it names the holder (its pid, /proc start time and host name), written once the lock is
// taken and removed by a clean stop. It is for people only, never a decision: a busy lock is busy whatever it says.
// A refusal names the pid in it when that is plausible; a start that finds one naming another process (left by one
// that did not stop cleanly) says whose lock it took (`tookOverFrom`). It is replaced by a rename, never written
// through whatever is at its path, and read only when a regular file (at most 4 KiB).
//
// The lock file is never removed (a file another process may be about to lock) nor moved. One that is not a SQLite
// database (garbage, a pid lock of an earlier build, one torn by a power loss as it was made) is emptied in place, so
// the kernel lock on that inode still decides between processes doing so at once (moved aside, a second process could
// move aside the new lock a first had just taken). Only a regular file of its own (no other hard link) is used: a
// pipe in the lock's place would block the start forever, and a link to a device (/dev/zero) never ends; anything
// else there fails the lock, which leaves the broker without a journal (said in one line), as a directory there does.
//
// Two things the kernel lock asks of this process: the Database must stay referenced while the lock is held (one
// collected is closed, and its lock gone), and no other descriptor of the lock file may be opened and closed here
// while it is held (closing any descriptor of a file drops every POSIX lock the process has on it): a second lock of
// a file this process holds is refused from memory, touching nothing.

import { Database, constants as sqlite } from "bun:sqlite";
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  ftruncateSync,
  lstatSync,
  openSync,
  readFileSync,
  readSync,
  realpathSync,
  renameSync,
  type Stats,
  unlinkSync,
  writeSync,
} from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";

/** Another process holds the journal: this one must not start. `pid` (and `host`, when not this one) as its holder file says. */
export class DataDirBusy extends Error {
  constructor(
    readonly pid: number | undefined,
    readonly dataDir: string,
    readonly host?: string,
  ) {
    const who = pid === undefined ? "another broker" : `another broker (pid ${pid}${host ? ` on host ${host}` : ""})`;
    super(`${who} is serving data directory ${dataDir}; stop it or use another data directory (BROKER_DATA_DIR)`);
  }
}

export interface JournalLock {
  /** The pid named by the holder file of a broker that did not stop cleanly, if any. */
  readonly tookOverFrom?: number;
  /** Lets go of the lock (and removes the holder file while it is still this process's). */
  release(): void;
}

interface Holder {
  readonly pid: number;
  /** /proc's start time of the process, in clock ticks since boot; null where there is no /proc. */
  readonly start: string | null;
  readonly host: string;
}

/** Locks this process holds, by the lock file's device and inode: each Database referenced here until released. */
const heldHere = new Map<string, Database>();

/**
 * Takes the lock of `journalFile` in `dataDir` (which exists); throws DataDirBusy when another process (or this one)
 * holds it, and the file system's error when the lock cannot be taken (a full disk, a pipe in its place).
 */
export function lockJournal(dataDir: string, journalFile: string): JournalLock {
  // SQLite opens with NOFOLLOW, which refuses a link anywhere in the path: a data directory reached through a link (a
  // person's own layout) is resolved first; the lock's own name is never followed.
  const dir = realpathSync(dataDir);
  const path = join(dir, `${journalFile}.lock`);
  const holderPath = join(dir, `${journalFile}.holder`);
  for (let attempt = 0; ; attempt++) {
    if (attempt > MAX_ATTEMPTS) throw new Error(`cannot lock ${path}: it keeps changing; is another broker starting on data directory ${dataDir}?`);
    const found = ownFile(path);
    if (found && heldHere.has(keyOf(found))) throw busy(holderPath, dataDir);
    if (!found) {
      if (!create(path)) continue; // another process made it this moment
    } else if ((found.mode & 0o777) !== 0o600) fixMode(path, found);
    const st = ownFile(path);
    if (!st) continue; // removed meanwhile (not by a broker: none removes it)
    for (const side of ["-journal", "-wal", "-shm"]) ownFile(`${path}${side}`); // SQLite opens these when present
    const db = new Database(path, sqlite.SQLITE_OPEN_READWRITE | sqlite.SQLITE_OPEN_NOFOLLOW);
    try {
      db.exec("PRAGMA busy_timeout = 0");
      db.exec("PRAGMA locking_mode = EXCLUSIVE");
      db.exec("PRAGMA journal_mode = MEMORY"); // no `-journal` beside it
      db.exec("BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS holder(pid INTEGER); COMMIT");
    } catch (err) {
      db.close();
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string" && code.startsWith("SQLITE_BUSY")) {
        // Processes starting in one instant can each hold the shared lock SQLite takes on the way to the exclusive one
        // and so each refuse the other: each lets go and tries again after a moment of its own, and one gets it. A
        // holder keeps it through every try.
        if (attempt >= BUSY_TRIES) throw busy(holderPath, dataDir);
        Bun.sleepSync(1 + Math.random() * 9);
        continue;
      }
      if (code === "SQLITE_NOTADB" || (typeof code === "string" && code.startsWith("SQLITE_CORRUPT"))) {
        empty(path); // not a lock of this build, or one torn by a power loss as it was made: made anew in place
        continue;
      }
      throw err;
    }
    // The file locked is the one at the path still (nothing moved another in between): else let go and look again.
    let now: Stats | undefined;
    try {
      now = ownFile(path);
    } catch (err) {
      db.close();
      throw err;
    }
    if (!now || keyOf(now) !== keyOf(st)) {
      db.close();
      continue;
    }
    return held(db, keyOf(st), holderPath);
  }
}

/** Tries while processes starting together contend (each a few milliseconds apart), and for anything else that changes. */
const BUSY_TRIES = 10;
const MAX_ATTEMPTS = 20;

/** The lock just taken: the previous holder read, this one's written. */
function held(db: Database, key: string, holderPath: string): JournalLock {
  heldHere.set(key, db);
  const me = self();
  const before = readHolder(holderPath);
  const mine = `${JSON.stringify(me)}\n`;
  writeHolder(holderPath, mine);
  const tookOverFrom = before && !(before.pid === me.pid && before.start === me.start && before.host === me.host) ? before.pid : undefined;
  let holding = true;
  return {
    ...(tookOverFrom !== undefined && { tookOverFrom }),
    release() {
      if (!holding) return;
      holding = false;
      // Under the lock still: no other broker writes the holder file now, so what reads as this one's is.
      try {
        if (readText(holderPath) === mine) unlinkSync(holderPath);
      } catch {} // gone or not a regular file: not this process's to remove
      heldHere.delete(key);
      db.close();
    },
  };
}

/**
 * The refusal: the pid as the holder file names it. The holder writes that file just after it takes the lock, so a
 * file naming nobody, or a process of this host that is gone, is looked at again for a moment; still so, the refusal
 * names no pid (a busy lock is busy whatever the file says).
 */
function busy(holderPath: string, dataDir: string): DataDirBusy {
  const host = hostname();
  for (let i = 0; ; i++) {
    const h = readHolder(holderPath);
    if (h && (h.host !== host || alive(h))) return new DataDirBusy(h.pid, dataDir, h.host === host ? undefined : h.host);
    if (i >= 50) return new DataDirBusy(undefined, dataDir);
    Bun.sleepSync(20);
  }
}

/** A holder file is a line of some 80 bytes: anything longer is not one, and is read no further. */
const MAX_HOLDER_BYTES = 4096;
const PID_MAX_LIMIT = 2 ** 22;

function self(): Holder {
  // /proc/self, not /proc/<pid>: in a pid namespace of its own without a /proc of its own, <pid> is another process.
  return { pid: process.pid, start: procStat("self")?.start ?? null, host: hostname() };
}

function readHolder(path: string): Holder | undefined {
  let text: string | undefined;
  try {
    text = readText(path);
  } catch {
    return undefined; // not a regular file: names nobody
  }
  if (text === undefined || !text.endsWith("\n")) return undefined;
  try {
    const h = JSON.parse(text) as Partial<Holder>;
    if (typeof h.pid !== "number" || !Number.isInteger(h.pid) || h.pid < 1 || h.pid > PID_MAX_LIMIT) return undefined;
    if (typeof h.host !== "string" || !/^[A-Za-z0-9._-]{1,253}$/.test(h.host)) return undefined;
    return { pid: h.pid, start: typeof h.start === "string" && /^\d{1,20}$/.test(h.start) ? h.start : null, host: h.host };
  } catch {
    return undefined;
  }
}

/**
 * Writes the holder file through a file of this process's own, renamed over it: whatever was at the path (a link, a
 * pipe) is replaced, never followed or opened. Information only: a failure (a directory there, a full disk) is not
 * the lock's.
 */
function writeHolder(path: string, text: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  try {
    try {
      unlinkSync(temp); // left by a process that had this pid
    } catch {}
    const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      fchmodSync(fd, 0o600);
      writeSync(fd, text);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch {
    try {
      unlinkSync(temp);
    } catch {}
  }
}

/**
 * The lock file's stat when it is there, undefined when not; anything but a regular file with no other name (a
 * directory, a pipe, a socket, a device, a symbolic link, a hard link to a file elsewhere) throws, never followed.
 */
function ownFile(path: string): Stats | undefined {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return undefined;
    throw err;
  }
  if (!st.isFile()) throw new Error(`${path} is not a regular file`);
  if (st.nlink > 1) throw new Error(`${path} is not a regular file of its own (it has ${st.nlink} names)`);
  return st;
}

const keyOf = (st: Stats) => `${st.dev}:${st.ino}`;

/** Creates the lock file, empty, 0600 whatever the umask; false when one exists. */
function create(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  } catch (err) {
    if ((err as { code?: unknown }).code === "EEXIST") return false;
    throw err;
  }
  try {
    fchmodSync(fd, 0o600);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Opens the regular file `found` was (never a link, never blocking on a pipe) for `use`. */
function withOwnFd(path: string, found: Stats, flags: number, use: (fd: number) => void): void {
  const fd = openSync(path, flags | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || keyOf(st) !== keyOf(found) || st.nlink > 1) throw new Error(`${path} is not a regular file`);
    use(fd);
  } finally {
    closeSync(fd);
  }
}

/** A lock file of an earlier build (0666 under umask 000): 0600 before it is used. */
function fixMode(path: string, found: Stats): void {
  withOwnFd(path, found, constants.O_RDONLY, (fd) => fchmodSync(fd, 0o600));
}

/** Empties a lock file that is not a SQLite database, in place (its inode, and so its kernel lock, stays). */
function empty(path: string): void {
  const found = ownFile(path);
  if (found) withOwnFd(path, found, constants.O_WRONLY, (fd) => ftruncateSync(fd, 0));
}

/**
 * The file's text (its first MAX_HOLDER_BYTES); undefined when it is not there. Anything but a regular file throws (a
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
    const buf = Buffer.alloc(MAX_HOLDER_BYTES);
    let n = 0;
    for (let r = -1; r !== 0 && n < buf.length; n += r) r = readSync(fd, buf, n, buf.length - n, n);
    return buf.toString("utf8", 0, n);
  } finally {
    closeSync(fd);
  }
}

/** Whether a holder of this host still runs: its pid lives (not a zombie) and, where /proc says, started when it says. */
function alive(holder: Holder): boolean {
  const stat = procStat(holder.pid);
  if (stat) return stat.state !== "Z" && stat.state !== "X" && (holder.start === null || stat.start === holder.start);
  try {
    readFileSync("/proc/self/stat");
    return false; // /proc lists every process of this pid namespace: this one is not in it
  } catch {}
  try {
    process.kill(holder.pid, 0);
    return true;
  } catch (err) {
    return (err as { code?: unknown }).code === "EPERM"; // another user's process
  }
}

/** Fields of /proc/<pid>/stat: the state (3rd) and the start time (22nd), read after the command name's ")". */
function procStat(pid: number | "self"): { state: string; start: string } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined; // no such process (or no /proc)
  }
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return fields.length > 19 ? { state: fields[0]!, start: fields[19]! } : undefined;
}
