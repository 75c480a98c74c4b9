// The audit journal: every audit record is appended to a file in the data directory when it is made,
// before it waits for the database, so records survive the process. A `kill -9` (or a crash, or an
// outage that outlasts the shutdown grace) no longer loses what the in-memory queue held: on the
// next start the records the database lacks are written from here. The file holds what the audit
// log holds (names and numbers, never a header value, body, query string or token), is 0600 in the
// 0700 data directory, and is emptied whenever everything in it has reached the database.
//
// Which records the database lacks is exact, not guessed: each line carries a sequence number, and
// the writer moves this journal's mark (store/audit-marks.ts) in the same transaction as the records.
//
// Durability: a record is handed to the kernel within the tick that made it (one write for all the
// records of a tick), which a killed process cannot take back; the writer fsyncs the file before each
// batch it sends to the database, so a power loss costs at most one flush interval.

import { closeSync, fchmodSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, renameSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import { AUDIT_JOURNAL_FILE, type AuditRow } from "../store/index.ts";

/** An audit record as the writer queues it (audit.ts AuditEntry): the row without its id. */
type AuditEntry = Omit<AuditRow, "id">;

export const JOURNAL_FILE = AUDIT_JOURNAL_FILE;

/** Past this size, a file whose queue never empties is rewritten with only the records still unwritten. */
const COMPACT_BYTES = 4 * 1024 * 1024;

export interface JournalRecord {
  readonly seq: number;
  readonly entry: AuditEntry;
  /** Its line in the file (`{"seq":…,"entry":…}`, JSON), when this process appended it: sent on as it is. */
  readonly line?: string;
}

export interface AuditJournal {
  /** Names this journal in audit_journal_marks (a random id written as the file's first line). */
  readonly id: string;
  /**
   * What opening found that could not be replayed, for one log line: an unreadable file moved aside
   * (`setAside`, its new path), or lines that are not records (`unreadableLines`, a torn last line not counted).
   */
  readonly opened: { readonly setAside?: string; readonly unreadableLines: number };
  /** Appends a record (written to the file within this tick) and returns its sequence number. */
  append(entry: AuditEntry): number;
  /** As append, returning the record with its line (what the SQLite worker is sent, not serialized twice). */
  appendRecord(entry: AuditEntry): JournalRecord;
  /**
   * The records after `mark` (the database's mark for this journal), in order: what the database lacks.
   * Numbering continues after both, since an emptied file no longer shows how far it had counted.
   */
  resume(mark: number): JournalRecord[];
  /** Flushes appended lines to the kernel at once, then to the disk. */
  sync(): void;
  /**
   * Everything appended so far is in the database but `unwritten` (the writer's queue): the file is emptied
   * (kept with its id) or, when it has grown past a bound while records kept arriving, rewritten to hold only those.
   */
  settled(unwritten: readonly JournalRecord[]): void;
  close(): void;
}

interface Header {
  readonly journal: string;
}

/**
 * Opens (creating 0600) the journal in `dataDir`; `onError` hears of a failed write once per failure run.
 * Throws when the journal cannot be used at all (its path is a directory, a device or a pipe, or cannot be
 * opened or written): the caller runs without one and says so. A file that is not a journal is moved aside.
 */
/** `file`: the journal's name in the data directory (each worker of `broker server --workers N` keeps its own). */
export function openAuditJournal(dataDir: string, onError: (err: unknown) => void, file = JOURNAL_FILE): AuditJournal {
  const path = join(dataDir, file);
  // Never read anything but a regular file: a pipe blocks the read forever, a device (/dev/zero) never ends.
  refuseIrregular(statSync(path, { throwIfNoEntry: false }), path);
  let fd = openSync(path, "a+", 0o600);
  let existing: string;
  try {
    refuseIrregular(fstatSync(fd), path);
    fchmodSync(fd, 0o600); // a file put here by hand (or restored) may have been made with another mode
    existing = readFileSync(path, "utf8");
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  const fileLines = existing.split("\n");
  let header = readHeader(fileLines[0] ?? "");
  let headerBytes = 0;
  let setAside: string | undefined;
  if (header) {
    headerBytes = Buffer.byteLength(fileLines[0]!) + 1;
  } else {
    if (existing.length > 0) {
      // Not a journal (garbage, another file): kept aside for a person to look at, never silently emptied.
      closeSync(fd);
      setAside = `${path}.unreadable-${Date.now()}`;
      renameSync(path, setAside);
      fd = openSync(path, "a+", 0o600);
    }
    header = { journal: crypto.randomUUID() };
    try {
      ftruncateSync(fd);
      const text = `${JSON.stringify(header)}\n`;
      writeSync(fd, text);
      headerBytes = Buffer.byteLength(text);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }
  const torn = !setAside && existing.length > 0 && !existing.endsWith("\n");
  // A crash mid-write may have left a torn last line: the next record starts on a line of its own.
  if (torn) writeSync(fd, "\n");
  const { records, unreadable } = setAside ? { records: [], unreadable: 0 } : parseRecords(fileLines.slice(1), torn);
  let seq = records.reduce((max, r) => Math.max(max, r.seq), 0);
  let pending = "";
  /** Records in the file (so a rewrite happens only when most of them are written, not during an outage). */
  let lines = records.length;
  let failing = false;
  /** Emptying or rewriting the file failed last time (told once, with write failures: one line per failure run). */
  let settleFailing = false;
  let scheduled = false;

  function compactOrEmpty(unwritten: readonly JournalRecord[]): void {
    const size = fstatSync(fd).size;
    if (unwritten.length === 0) {
      if (size > headerBytes) ftruncateSync(fd, headerBytes);
      lines = 0;
    } else if (size > COMPACT_BYTES && unwritten.length * 2 < lines) {
      // Under steady load the queue may never be empty when a batch ends: without this the file would only grow.
      // Written aside and renamed over, so a crash leaves either file whole, never neither.
      const next = `${path}.compact`;
      const text = `${JSON.stringify(header)}\n${unwritten.map((r) => `${r.line ?? JSON.stringify({ seq: r.seq, entry: r.entry })}\n`).join("")}`;
      const tmp = openSync(next, "w", 0o600);
      try {
        writeSync(tmp, text);
        fsyncSync(tmp);
      } finally {
        closeSync(tmp);
      }
      renameSync(next, path);
      closeSync(fd);
      fd = openSync(path, "a+", 0o600);
      lines = unwritten.length;
    }
  }

  function writeOut(): void {
    scheduled = false;
    if (!pending) return;
    const text = pending;
    pending = "";
    try {
      writeSync(fd, text);
      failing = false;
    } catch (err) {
      // A full or read-only disk: records still go to the database from memory; say so once.
      if (!failing && !settleFailing) onError(err);
      failing = true;
    }
  }

  function appendRecord(entry: AuditEntry): JournalRecord {
    seq += 1;
    lines += 1;
    const line = JSON.stringify({ seq, entry });
    pending += `${line}\n`;
    if (!scheduled) {
      scheduled = true;
      queueMicrotask(writeOut);
    }
    return { seq, entry, line };
  }

  return {
    id: header.journal,
    opened: { ...(setAside && { setAside }), unreadableLines: unreadable },
    append: (entry) => appendRecord(entry).seq,
    appendRecord,
    resume(mark) {
      seq = Math.max(seq, mark);
      return records.filter((r) => r.seq > mark);
    },
    sync() {
      writeOut();
      try {
        fsyncSync(fd);
      } catch (err) {
        if (!failing) onError(err);
      }
    },
    settled(unwritten) {
      writeOut();
      try {
        compactOrEmpty(unwritten);
        settleFailing = false;
      } catch (err) {
        // A read-only or full disk: the records are in the database already (or still queued in memory); the
        // file keeps what it has and is emptied at a later batch. Never thrown to the writer, which must go on.
        if (!settleFailing && !failing) onError(err);
        settleFailing = failing = true;
      }
    },
    close() {
      writeOut();
      try {
        closeSync(fd);
      } catch {
        // already closed: a rewrite that could not reopen the file (told when it failed)
      }
    },
  };
}

function readHeader(line: string): Header | undefined {
  try {
    const h = JSON.parse(line) as Partial<Header>;
    return typeof h.journal === "string" && /^[0-9a-f-]{36}$/.test(h.journal) ? { journal: h.journal } : undefined;
  } catch {
    return undefined;
  }
}

/** Whole lines only: a line cut short by a crash mid-write (`torn`: the last) is skipped; other lines that are not records are counted. */
function parseRecords(lines: readonly string[], torn: boolean): { records: JournalRecord[]; unreadable: number } {
  const out: JournalRecord[] = [];
  let unreadable = 0;
  const last = lines.length - 1;
  lines.forEach((line, i) => {
    if (!line) return;
    try {
      const r = JSON.parse(line) as Partial<JournalRecord>;
      if (typeof r.seq === "number" && Number.isSafeInteger(r.seq) && isEntry(r.entry)) return void out.push({ seq: r.seq, entry: withRefs(r.entry) });
    } catch {
      // not JSON: a torn last line, or not a record at all
    }
    if (!(torn && i === last)) unreadable += 1;
  });
  return { records: out, unreadable };
}

const TEXT_FIELDS = ["principal", "vault", "ingress", "method", "host", "path", "credentialKeys"] as const;
const NUMBER_FIELDS = ["at", "vaultId", "status", "bytesIn", "bytesOut", "durationMs"] as const;
const NULLABLE_TEXT_FIELDS = ["service", "error", "approvedBy", "llmModel", "workloadIssuer", "workloadSubject"] as const;
/** BIGINT columns (the LLM usage, issue 38): a fraction or a string there would fail the batch on PostgreSQL. */
const NULLABLE_COUNT_FIELDS = ["inputTokens", "outputTokens", "totalTokens", "costMicros"] as const;

/**
 * A record the database will take: one that is not (a hand-edited line) would fail its whole batch.
 * `credentialRefs` (issue 36) is absent from lines written before references, the usage fields (issue 38) from lines
 * written before usage and from every unmetered record: such a line is still a record.
 */
function isEntry(v: unknown): v is AuditEntry {
  if (!v || typeof v !== "object") return false;
  const e = v as Record<string, unknown>;
  return (
    TEXT_FIELDS.every((f) => typeof e[f] === "string") &&
    NUMBER_FIELDS.every((f) => typeof e[f] === "number" && Number.isFinite(e[f])) &&
    NULLABLE_TEXT_FIELDS.every((f) => e[f] === null || e[f] === undefined || typeof e[f] === "string") &&
    NULLABLE_COUNT_FIELDS.every((f) => e[f] === null || e[f] === undefined || Number.isSafeInteger(e[f])) &&
    (e.credentialRefs === null || e.credentialRefs === undefined || isRefsText(e.credentialRefs)) &&
    typeof e.contained === "boolean"
  );
}

/** The JSON array of strings audit.ts writes, so every reader of the log can parse what reaches the database. */
function isRefsText(v: unknown): boolean {
  if (typeof v !== "string") return false;
  try {
    const refs: unknown = JSON.parse(v);
    return Array.isArray(refs) && refs.every((r) => typeof r === "string");
  } catch {
    return false;
  }
}

/** A line written before references has no `credentialRefs`: it had none. */
function withRefs(e: AuditEntry): AuditEntry {
  return { ...e, credentialRefs: e.credentialRefs ?? null };
}

/** A journal is a regular file: anything else in its place is refused before it is read. */
function refuseIrregular(st: { isFile(): boolean } | undefined, path: string): void {
  if (st && !st.isFile()) throw new Error(`${path} is not a regular file`);
}
