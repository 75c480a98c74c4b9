// `broker restore <file>`: puts a backup made by `broker backup` back as the SQLite store, with the broker
// stopped. Refuses while a broker answers on the API port or a process holds the store open; checks the file
// first; moves the current broker.db and its -wal/-shm aside (never deletes them) and says how to undo it.

import { defineCommand } from "citty";
import { resolve } from "node:path";
import { checkBackup, NotABrokerStore, restoreSqlite, storeHolders, type RestoreReport } from "../../store/index.ts";
import { jsonArg } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { probeHealth } from "../kit/index.ts";
import { printJson, printLine } from "../kit/index.ts";
import { sqliteStoreConfig } from "../kit/index.ts";

const restoreCommand = defineCommand({
  meta: { name: "restore", description: "Put a backup file back as the SQLite store (stop the broker first)" },
  args: {
    file: { type: "positional", required: true, description: "A file written by `broker backup`" },
    "data-dir": { type: "string", description: "Data directory holding the store (default: BROKER_DATA_DIR or ~/.broker)" },
    ...jsonArg,
  },
  async run({ args }) {
    const config = sqliteStoreConfig(args["data-dir"], {
      said: "broker restore puts back only a SQLite store",
      tool: "restore PostgreSQL with its own tools: pg_restore --clean --dbname=<database> broker.dump",
    });
    const file = resolve(String(args.file));
    try {
      checkBackup(file);
    } catch (err) {
      if (err instanceof NotABrokerStore) throw new CliFailure(`${err.message}; nothing was changed`, "give a file written by `broker backup`");
      throw err;
    }
    await refuseWhileRunning(config.dataDir, config.bindHost, config.apiPort);
    const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "Z");
    let report: RestoreReport;
    try {
      report = restoreSqlite(config.dataDir, file, stamp);
    } catch (err) {
      throw new CliFailure(
        `restore failed, the store in ${config.dataDir} is as it was: ${err instanceof Error ? err.message : String(err)}`,
        "check that the data directory is writable and has room for a copy of the backup",
      );
    }
    if (args.json) {
      return printJson({
        restored: report.restored,
        from: file,
        mode: "0600",
        schema_version: report.schemaVersion,
        keyring: report.keyring ?? null,
        moved_aside: report.movedAside.map((m) => ({ from: m.from, to: m.to })),
      });
    }
    printReport(report, file);
  },
});

/** A broker on this data directory must be stopped: its open connection would keep writing to the moved file. */
async function refuseWhileRunning(dataDir: string, bindHost: string, port: number): Promise<void> {
  const host = bindHost === "0.0.0.0" || bindHost === "::" ? "127.0.0.1" : bindHost;
  const health = await probeHealth(host, port);
  if (health) {
    throw new CliFailure(
      `a broker is running on ${host}:${port} (${health}); nothing was changed`,
      "stop it first (Ctrl-C, or `systemctl stop broker`), then run broker restore again",
    );
  }
  const holders = storeHolders(dataDir);
  if (holders && holders.length > 0) {
    throw new CliFailure(
      `the store in ${dataDir} is in use by process ${holders.join(", ")}; nothing was changed`,
      "stop the broker (or whatever holds the store open), then run broker restore again",
    );
  }
}

function printReport(report: RestoreReport, file: string): void {
  printLine(`Restored ${file} as ${report.restored} (mode 0600, schema version ${report.schemaVersion}, integrity checked).`);
  if (report.movedAside.length === 0) {
    printLine("There was no store in the data directory before; nothing was moved.");
  } else {
    printLine("The store that was there is kept, renamed:");
    for (const m of report.movedAside) printLine(`  ${m.from} -> ${m.to}`);
    printLine();
    printLine("To undo (with the broker stopped):");
    printLine(`  rm ${report.restored}`);
    for (const m of report.movedAside) printLine(`  mv ${m.to} ${m.from}`);
  }
  printLine();
  printLine(
    report.keyring === "password" ? "Start the broker with the master password that was set when the backup was made." : "Start the broker: `broker server`.",
  );
}

addHelpFooter(
  restoreCommand,
  () => `RESTORING A BACKUP

  1. Stop the broker. restore refuses while a broker answers on BROKER_PORT or a process holds the store open.
  2. broker restore /backups/broker-2025-01-31.db
     The file is checked first (it opens as SQLite, passes an integrity check and is a broker store at a
     schema version this broker knows). The current broker.db and its -wal and -shm are renamed to
     broker.db.before-restore-<time> (never deleted, and never replayed onto the restored file), then a copy
     of the backup is put in place with mode 0600. The output says how to undo it.
  3. Start the broker, with the master password that was set when the backup was made (if any).

  With BROKER_DATABASE_URL (PostgreSQL), use pg_restore instead.`,
);

export default restoreCommand;
