// Announcements between processes on one SQLite file (issue 40, `broker server --workers N`): PostgreSQL's NOTIFY,
// done with the table migration 32's triggers append to. `notify` appends a row; `listen` reads the rows after the last
// one it saw every POLL_MS and hands each payload on, as PostgreSQL's LISTEN does. A reader that finds the rows it had
// not read yet already pruned (it was stalled for over a minute) missed announcements: it is told as PostgreSQL tells
// a reconnect (`onListening` again), and store/changes.ts then distrusts every cache until its own heartbeat returns.

import type { ChangeListener, Db, Dialect, Sql } from "./db.ts";

/** Milliseconds since the epoch by SQLite's clock, as migration 32's triggers write `at`. */
const PRUNE = "DELETE FROM change_log WHERE at < CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) - ?";
const APPEND = "INSERT INTO change_log (payload, at) VALUES (?, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))";

/** How often each process reads the log: a change made through one worker is honoured by the others within this. */
export const CHANGE_LOG_POLL_MS = 100;
/** Rows older than this are pruned: every reader has long read them. */
const KEEP_MS = 60_000;
const PRUNE_EVERY_MS = 10_000;
const PAGE = 1000;

export interface ChangeLog {
  notify(channel: string, payload: string): Promise<void>;
  listen(channel: string, listener: ChangeListener): Promise<() => Promise<void>>;
}

/** Removes what every reader has long read; SQLite only (PostgreSQL announces with NOTIFY and keeps no log). */
export function changeLogRepo(sql: Sql, dialect: Dialect) {
  return {
    async prune(): Promise<number> {
      if (dialect !== "sqlite") return 0;
      return sql.run(PRUNE, [KEEP_MS]);
    },
  };
}

export function sqliteChangeLog(db: Db, opts: { pollMs?: number; now?: () => number } = {}): ChangeLog {
  const pollMs = opts.pollMs ?? CHANGE_LOG_POLL_MS;
  const now = opts.now ?? Date.now;
  return {
    async notify(_channel, payload) {
      await db.run(APPEND, [payload]);
    },
    async listen(_channel, listener) {
      let seen = Number((await db.get<{ seq: number | null }>("SELECT MAX(seq) AS seq FROM change_log"))?.seq ?? 0);
      let lastPrune = 0;
      let reading = false;
      listener.onListening();
      const read = async () => {
        if (reading) return;
        reading = true;
        try {
          const rows = await db.all<{ seq: number; payload: string }>("SELECT seq, payload FROM change_log WHERE seq > ? ORDER BY seq LIMIT ?", [seen, PAGE]);
          // A gap before the first unread row: rows pruned unread. AUTOINCREMENT never reuses a number, so
          // seq numbers rise one by one except where a writer's transaction rolled back; a pruned gap shows as
          // the oldest row still kept being newer than the last one read.
          if (rows.length && rows[0]!.seq > seen + 1) {
            const oldest = Number((await db.get<{ seq: number | null }>("SELECT MIN(seq) AS seq FROM change_log"))?.seq ?? 0);
            if (oldest > seen + 1) listener.onListening();
          }
          for (const r of rows) {
            seen = Number(r.seq);
            listener.onMessage(r.payload);
          }
          if (now() - lastPrune > PRUNE_EVERY_MS) {
            lastPrune = now();
            await changeLogRepo(db, "sqlite").prune();
          }
        } catch {
          // The file is busy or away: the next poll tries again; missed heartbeats make the feed distrust caches.
        } finally {
          reading = false;
        }
      };
      const timer = setInterval(() => void read(), pollMs);
      timer.unref?.();
      return async () => clearInterval(timer);
    },
  };
}
