// `broker backup <file>`: a consistent copy of the SQLite store while the server may run, written 0600 and
// checked, and what it takes to use it. Only reads the store; never prints key material.

import { defineCommand } from "citty";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { backupSqlite, BackupTargetExists, DB_FILE, type BackupReport } from "../../store/index.ts";
import { jsonArg } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { printJson, printLine } from "../kit/index.ts";
import { sqliteStoreConfig } from "../kit/index.ts";

const backupCommand = defineCommand({
  meta: { name: "backup", description: "Copy the SQLite store to a new file (0600) while the broker runs" },
  args: {
    file: { type: "positional", required: true, description: "Where to write the copy (must not exist)" },
    "data-dir": { type: "string", description: "Data directory holding the store (default: BROKER_DATA_DIR or ~/.broker)" },
    ...jsonArg,
  },
  async run({ args }) {
    const config = sqliteStoreConfig(args["data-dir"], {
      said: "broker backup copies only the SQLite store",
      tool: "back up PostgreSQL with its own tools: pg_dump --format=custom --file=broker.dump <database>",
    });
    const target = resolve(String(args.file));
    if (!existsSync(`${config.dataDir}/${DB_FILE}`)) {
      throw new CliFailure(`no SQLite store in ${config.dataDir}`, "set BROKER_DATA_DIR (or --data-dir) to the data directory of the broker to back up");
    }
    let report: BackupReport;
    try {
      report = backupSqlite(config.dataDir, target);
    } catch (err) {
      if (err instanceof BackupTargetExists)
        throw new CliFailure(`${target} already exists; a backup never overwrites a file`, "choose a new file name, or move the old file away first");
      throw new CliFailure(
        `backup failed, nothing was written to ${target}: ${err instanceof Error ? err.message : String(err)}`,
        "check that the target directory exists and is writable, and that the data directory is readable",
      );
    }
    const rows = Object.entries(report.tables)
      .filter(([t]) => t !== "schema_migrations")
      .reduce((n, [, c]) => n + c, 0);
    if (args.json)
      return printJson({
        file: report.path,
        bytes: report.bytes,
        mode: "0600",
        schema_version: report.schemaVersion,
        keyring: report.keyring ?? null,
        tables: report.tables,
      });
    printLine(
      `Wrote ${report.path} (${report.bytes} bytes, mode 0600): schema version ${report.schemaVersion}, ${rows} rows in ${Object.keys(report.tables).length} tables, integrity checked.`,
    );
    printLine();
    printLine(keyNote(report.keyring));
  },
});

/** What the copy needs to be used; it always holds the data key, wrapped or not. */
function keyNote(keyring: BackupReport["keyring"]): string {
  if (keyring === "password") {
    return "The copy holds the data key wrapped by the master password: to use it you need that password (the one set when the backup was made). Without it the copy cannot be decrypted.";
  }
  if (keyring === "plain") {
    return "Warning: this store has no master password, so the copy holds the data key unwrapped: the file alone decrypts every credential. Keep it like the data directory (0600, off shared disks), or set one with `broker master-password set` and back up again.";
  }
  return "The store has no keyring yet (the server has never started on it): the copy holds no credentials.";
}

addHelpFooter(
  backupCommand,
  () => `BACKUP AND RESTORE

  The copy is taken with SQLite's VACUUM INTO on a separate read-only connection: one consistent snapshot,
  safe while the broker runs and writes. The file is created 0600 and verified (integrity check, schema
  version, row counts) before it gets its name; an existing file is never overwritten.

  The copy holds the data key: wrapped by the master password when one is set (then that password is needed
  to use it), unwrapped in passwordless mode (then the file alone unlocks everything: keep it like the data
  directory).

  To restore: stop the broker, run \`broker restore <file>\` (it checks the file, moves the current ${DB_FILE}
  and its -wal and -shm aside, never deleting them, and puts a 0600 copy in place), then start the broker with
  the master password that was set when the backup was made.

  With BROKER_DATABASE_URL (PostgreSQL), use pg_dump instead.`,
);

export default backupCommand;
