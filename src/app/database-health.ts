// What /health says about the database. On PostgreSQL it is read from memory (the breaker's state,
// kept current by the change feed's heartbeat every 400 ms, and whether announcements arrive), so
// /health answers at once even while the database is frozen; SQLite is a local file, asked directly.

import { DatabaseUnavailable } from "../errors.ts";
import type { DatabaseHealth } from "../server/index.ts";
import type { Db } from "../store/index.ts";

export interface HealthSources {
  readonly db: Db;
  /** The change feed, on PostgreSQL only (SQLite has no announcements to lose). */
  readonly feed: { readonly listening: boolean } | undefined;
  readonly auditQueued: () => number;
}

export function databaseHealth({ db, feed, auditQueued }: HealthSources): () => Promise<DatabaseHealth> {
  return async () => {
    const reachable =
      db.reachability?.().reachable ??
      (await db.get("SELECT 1").then(
        () => true,
        (err) => {
          if (err instanceof DatabaseUnavailable) return false;
          throw err;
        },
      ));
    const announcements = feed ? (feed.listening ? "listening" : "lost") : undefined;
    return { backend: db.dialect, reachable, ...(announcements && { announcements }), audit_queued: auditQueued() };
  };
}
