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

import { closeSync, fchmodSync, fstatSync, fsyncSync, ftruncateSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
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
}

export interface AuditJournal {
  /** Names this journal in audit_journal_marks (a random id written as the file's first line). */
  readonly id: string;
  /** Appends a record (written to the file within this tick) and returns its sequence number. */
  append(entry: AuditEntry): number;
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

/** Opens (creating 0600) the journal in `dataDir`; `onError` hears of a failed write once per failure run. */
export function openAuditJournal(dataDir: string, onError: (err: unknown) => void): AuditJournal {
  const path = join(dataDir, JOURNAL_FILE);
  let fd = openSync(path, "a+", 0o600);
  fchmodSync(fd, 0o600); // a file put here by hand (or restored) may have been made with another mode
  const existing = readFileSync(path, "utf8");
  const fileLines = existing.split("\n");
  let header = readHeader(fileLines[0] ?? "");
  let headerBytes = 0;
  if (header) {
    headerBytes = Buffer.byteLength(fileLines[0]!) + 1;
  } else {
    // New, or unreadable: start afresh (an unreadable file cannot be replayed anyway).
    header = { journal: crypto.randomUUID() };
    ftruncateSync(fd);
    const text = `${JSON.stringify(header)}\n`;
    writeSync(fd, text);
    headerBytes = Buffer.byteLength(text);
  }
  // A crash mid-write may have left a torn last line: the next record starts on a line of its own.
  if (header && existing.length > 0 && !existing.endsWith("\n")) writeSync(fd, "\n");
  const records = parseRecords(fileLines.slice(1));
  let seq = records.reduce((max, r) => Math.max(max, r.seq), 0);
  let pending = "";
  /** Records in the file (so a rewrite happens only when most of them are written, not during an outage). */
  let lines = records.length;
  let failing = false;
  let scheduled = false;

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
      if (!failing) onError(err);
      failing = true;
    }
  }

  return {
    id: header.journal,
    append(entry) {
      seq += 1;
      lines += 1;
      pending += `${JSON.stringify({ seq, entry })}\n`;
      if (!scheduled) {
        scheduled = true;
        queueMicrotask(writeOut);
      }
      return seq;
    },
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
      const size = fstatSync(fd).size;
      if (unwritten.length === 0) {
        if (size > headerBytes) ftruncateSync(fd, headerBytes);
        lines = 0;
      } else if (size > COMPACT_BYTES && unwritten.length * 2 < lines) {
        // Under steady load the queue may never be empty when a batch ends: without this the file would only grow.
        // Written aside and renamed over, so a crash leaves either file whole, never neither.
        const next = `${path}.compact`;
        const text = `${JSON.stringify(header)}\n${unwritten.map((r) => `${JSON.stringify(r)}\n`).join("")}`;
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
    },
    close() {
      writeOut();
      closeSync(fd);
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

/** Whole lines only: a line cut short by a crash mid-write is skipped, as are lines that are not records. */
function parseRecords(lines: readonly string[]): JournalRecord[] {
  const out: JournalRecord[] = [];
  for (const line of lines) {
    if (!line) continue;
    try {
      const r = JSON.parse(line) as Partial<JournalRecord>;
      if (typeof r.seq === "number" && Number.isSafeInteger(r.seq) && r.entry && typeof r.entry === "object") out.push({ seq: r.seq, entry: r.entry });
    } catch {
      // a torn last line
    }
  }
  return out;
}
