// `broker migrate-db`: copies this instance's SQLite store into an empty PostgreSQL database (every
// table, ids kept, ciphertext byte for byte), verifies counts and checksums, and says what to set next.
// Never prints the database password: every URL shown is masked, every error message scrubbed of it.

import { defineCommand } from "citty";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ConfigError, loadConfig, maskDatabaseUrl, type Config } from "../../config.ts";
import { DatabaseUnavailable } from "../../errors.ts";
import {
  copyStore,
  CopyMismatch,
  DB_FILE,
  migrate,
  openPostgres,
  openStore,
  requireEmptySchema,
  SchemaMismatch,
  TargetNotEmpty,
  type CopyReport,
  type Db,
} from "../../store/index.ts";
import { jsonArg } from "../kit/index.ts";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { formatTable, printJson, printLine, printNote } from "../kit/index.ts";

/** The target database, its URL masked for display and its password for scrubbing error text. */
interface Target {
  readonly url: string; // SECRET: never log (holds the database password)
  readonly shown: string;
  readonly scrub: (text: string) => string;
}

const migrateDbCommand = defineCommand({
  meta: { name: "migrate-db", description: "Copy this instance's SQLite store into an empty PostgreSQL database (stop the broker first)" },
  args: {
    to: {
      type: "string",
      description:
        "postgres://user:password@host:5432/db of an empty database (default: BROKER_DATABASE_URL, which keeps the password out of ps and shell history)",
    },
    "data-dir": { type: "string", description: "Data directory holding the SQLite store (default: BROKER_DATA_DIR or ~/.broker)" },
    ...jsonArg,
  },
  async run({ args }) {
    const { config, target } = readSettings(args.to, args["data-dir"]);
    const dbFile = join(config.dataDir, DB_FILE);
    if (!existsSync(dbFile)) {
      throw new CliFailure(
        `no SQLite store to copy: ${dbFile} does not exist`,
        `looked in ${config.dataDir}; set BROKER_DATA_DIR (or --data-dir) to the data directory of the broker you are moving`,
      );
    }
    // SQLite removes the -wal file when its last connection closes cleanly.
    if (existsSync(`${dbFile}-wal`)) {
      printNote(
        `warning: ${dbFile}-wal exists: a broker may still be using this store (or did not shut down cleanly). Stop it first: what it writes after the copy is not in PostgreSQL.`,
      );
    }
    if (!args.json) printNote(`Copying the SQLite store in ${config.dataDir} into ${target.shown} …`);
    using source = await openStore({ dataDir: config.dataDir }).catch((err) => failOnSource(err, config.dataDir));
    using dest = await openTarget(target);
    // The source is read under a write lock (BEGIN IMMEDIATE): a busy SQLite file is the old broker writing.
    const report = await copyStore(source.db, dest).catch((err) => (isSqliteBusy(err) ? failOnSource(err, config.dataDir) : failOnTarget(err, target)));
    const keyring = (await source.keyring.get())?.mode;
    if (args.json) {
      const tables = report.tables.map((t) => ({ table: t.table, source_rows: t.sourceRows, target_rows: t.targetRows, sha256: t.checksum }));
      return printJson({ source: config.dataDir, target: target.shown, schema_version: report.schemaVersion, keyring: keyring ?? null, tables });
    }
    printReport(report, config.dataDir, target);
    printNextSteps(keyring, config.dataDir, target);
  },
});

/** --to (else BROKER_DATABASE_URL) validated as the server would read it, and --data-dir over BROKER_DATA_DIR. */
function readSettings(to: string | undefined, dataDir: string | undefined): { config: Config; target: Target } {
  const env = { ...process.env, ...(to !== undefined && { BROKER_DATABASE_URL: to }), ...(dataDir && { BROKER_DATA_DIR: dataDir }) };
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    const bad = err instanceof ConfigError && to !== undefined ? err.problems.find((p) => p.startsWith("BROKER_DATABASE_URL:")) : undefined;
    if (bad)
      throw new CliFailure(
        bad.replace(/^BROKER_DATABASE_URL:/, "--to:").replace(/; leave it unset.*$/, ""),
        "give the URL of an empty PostgreSQL database: postgres://user:password@host:5432/database",
        2,
      );
    throw err;
  }
  if (!config.database) {
    throw new CliFailure(
      "no target database: give --to or set BROKER_DATABASE_URL",
      "BROKER_DATABASE_URL=postgres://user:password@host:5432/broker broker migrate-db (the database must exist and be empty)",
      2,
    );
  }
  // The one place this command unwraps the URL: to open the pool, mask it for display and know what to scrub.
  const raw = config.database.url.reveal();
  const secrets = passwordsIn(raw).filter((p) => p.length >= 3);
  if (to !== undefined && secrets.length > 0) {
    printNote("note: the database password was given on the command line, where ps and shell history can see it; BROKER_DATABASE_URL avoids that.");
  }
  const scrub = (text: string) => secrets.reduce((t, s) => t.split(s).join("***"), text);
  return { config, target: { url: raw, shown: maskDatabaseUrl(raw), scrub } };
}

/** Opens the target, refuses it if its schema holds any table (before creating one), then creates the broker's. */
async function openTarget(target: Target): Promise<Db & Disposable> {
  const db = openPostgres(target.url, { max: 2 });
  try {
    await requireEmptySchema(db);
    await migrate(db);
  } catch (err) {
    db.close();
    failOnTarget(err, target);
  }
  return Object.assign(db, { [Symbol.dispose]: () => db.close() });
}

/** What maskDatabaseUrl hides, so error text can be scrubbed of it too. */
function passwordsIn(raw: string): string[] {
  try {
    const url = new URL(raw);
    const fromParams = [...url.searchParams.entries()].filter(([k]) => /pass|secret|key/i.test(k)).map(([, v]) => v);
    return [url.password, decodeURIComponent(url.password), ...fromParams].filter(Boolean);
  } catch {
    return [raw];
  }
}

function isSqliteBusy(err: unknown): boolean {
  return /database is locked|SQLITE_BUSY/i.test(err instanceof Error ? `${err.message} ${(err as { code?: unknown }).code}` : String(err));
}

function failOnSource(err: unknown, dataDir: string): never {
  const message = err instanceof Error ? err.message : String(err);
  if (isSqliteBusy(err)) {
    throw new CliFailure(`the SQLite store in ${dataDir} is locked by another process`, "stop the broker that uses it, then run migrate-db again");
  }
  throw new CliFailure(
    `cannot open the SQLite store in ${dataDir}: ${message}`,
    "check BROKER_DATA_DIR and the files' permissions; run migrate-db with the same broker version that last ran on it, or a newer one",
  );
}

/** Every failure on the PostgreSQL side as what went wrong and what to do, never showing the password. */
function failOnTarget(err: unknown, target: Target): never {
  const at = target.shown;
  const untouched = "nothing was committed: the target is as it was";
  if (err instanceof TargetNotEmpty) {
    throw new CliFailure(
      `the target database is not empty: ${err.message} (${at})`,
      "give migrate-db a new, empty database (e.g. `createdb broker`); it never merges into or overwrites existing data",
    );
  }
  if (err instanceof CopyMismatch) {
    throw new CliFailure(
      `verification failed, ${untouched}: ${err.message}`,
      "stop every broker using the SQLite store, then run migrate-db again; if it fails again, keep running on SQLite and report it",
    );
  }
  if (err instanceof SchemaMismatch) throw new CliFailure(`${err.message} (${at})`, "give migrate-db a new, empty database");
  if (err instanceof DatabaseUnavailable) {
    throw new CliFailure(
      `cannot reach PostgreSQL at ${at} (${err.reason})`,
      "check the host and port in the URL, that PostgreSQL is running, and that it accepts connections from here (listen_addresses, pg_hba.conf, firewall)",
    );
  }
  const state = (err as { errno?: unknown } | null)?.errno;
  const message = target.scrub(err instanceof Error ? err.message : String(err));
  if (state === "28P01" || state === "28000") {
    throw new CliFailure(
      `PostgreSQL refused the login at ${at}: ${message}`,
      "check the user name and password in the URL (special characters in the password must be percent-encoded)",
    );
  }
  if (state === "3D000") throw new CliFailure(`${message} (${at})`, "create it first (`createdb` or CREATE DATABASE), then run migrate-db again");
  if (state === "42P07")
    throw new CliFailure(`the target database already has other tables: ${message}`, "give migrate-db a new, empty database (e.g. `createdb broker`)");
  if (state === "42501")
    throw new CliFailure(`PostgreSQL denied a privilege: ${message}`, "the URL's user must be able to create tables in the database (e.g. its owner)");
  throw new CliFailure(
    `copying into ${at} failed, ${untouched} unless the message says otherwise: ${message}`,
    "fix the cause above and run migrate-db again; the SQLite store was only read",
  );
}

function printReport(report: CopyReport, dataDir: string, target: Target): void {
  const total = report.tables.reduce((n, t) => n + t.sourceRows, 0);
  printLine(
    `Copied ${report.tables.length} tables (${total} rows, schema version ${report.schemaVersion}) from ${dataDir} into ${target.shown} in one transaction.`,
  );
  printLine();
  printLine(
    formatTable(report.tables, [
      { title: "TABLE", value: (t) => t.table },
      { title: "SQLITE", value: (t) => String(t.sourceRows) },
      { title: "POSTGRESQL", value: (t) => String(t.targetRows) },
      { title: "SHA-256 (BOTH)", value: (t) => (t.sourceRows === 0 ? "-" : `${t.checksum.slice(0, 16)}…`) },
    ]),
  );
  printLine();
  printLine("Row counts and checksums match on every table.");
}

function printNextSteps(keyring: "plain" | "password" | undefined, dataDir: string, target: Target): void {
  const lines = [
    "",
    "Next:",
    "  1. Keep the old broker stopped: anything written to the SQLite store from now on is not in PostgreSQL.",
    "  2. Start the broker on PostgreSQL (put the real password where *** is):",
    `       BROKER_DATABASE_URL=${target.shown}`,
  ];
  if (keyring === "password") lines.push("       BROKER_MASTER_PASSWORD=<the same master password as before> (the data key was copied still wrapped)");
  lines.push("       broker server");
  lines.push("  3. Sign in and check vaults, credentials and agents; existing logins and agent tokens carry over.");
  lines.push(`  4. Keep ${dataDir} as a backup until you are satisfied, then delete it: it holds the same ciphertext and keys.`);
  if (keyring === "plain") {
    lines.push(
      "",
      "Note: the store is passwordless, so the data key now sits unwrapped in PostgreSQL: anyone who can read the",
      "database can decrypt the credentials. Consider `broker master-password set` with BROKER_DATABASE_URL set.",
    );
  }
  printLine(lines.join("\n"));
}

addHelpFooter(
  migrateDbCommand,
  () => `MOVING FROM SQLITE TO POSTGRESQL

  1. Stop the broker (the copy takes a write lock on the SQLite store; changes made after it are not copied).
  2. Create an empty PostgreSQL database, e.g. \`createdb broker\`.
  3. BROKER_DATABASE_URL=postgres://user:password@host:5432/broker broker migrate-db
     Every table is copied in one transaction, ids and ciphertext unchanged, then row counts and a SHA-256 of
     every value are compared before it commits; a database whose schema already holds any table (the
     broker's or another application's) is refused before anything is created.
  4. Start the broker with the same BROKER_DATABASE_URL (and the same BROKER_MASTER_PASSWORD, if one is set).
  5. Keep the old data directory as a backup until you are satisfied.

  The URL may also be given with --to; prefer the variable when it carries a password (a command line shows in
  ps and in shell history). Output shows the URL with its password masked.`,
);

export default migrateDbCommand;
