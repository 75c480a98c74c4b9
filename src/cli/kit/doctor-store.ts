// `broker doctor`'s checks of the store: data directory and file modes, database reachability and schema
// version, keyring mode and the root CA's public certificate. Read-only: never migrates, creates or unlocks;
// the CA key stays sealed and the database URL's password is never shown.

import { X509Certificate } from "node:crypto";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { maskDatabaseUrl, type Config } from "../../config.ts";
import { DatabaseUnavailable } from "../../errors.ts";
import { DB_FILE, inspectPostgres, inspectSqlite, type StoreSummary } from "../../store/index.ts";
import type { Finding } from "./doctor-checks.ts";

const CA_WARN_DAYS = 60;

/** SQLite only: the data directory 0700, the database and its -wal/-shm files 0600. */
export function checkDataDir(config: Config): Finding[] {
  const dir = config.dataDir;
  if (config.database) return [{ check: "data directory", level: "ok", message: "not used for the store (BROKER_DATABASE_URL is set)" }];
  if (!existsSync(dir)) return [{ check: "data directory", level: "ok", message: `${dir} does not exist yet; the server creates it (0700) on first start` }];
  const found: Finding[] = [];
  const mode = statSync(dir).mode & 0o777;
  found.push(
    mode === 0o700
      ? { check: "data directory", level: "ok", message: `${dir} is 0700` }
      : { check: "data directory", level: "problem", message: `${dir} is ${octal(mode)}: other users can list or enter it`, fix: `chmod 700 ${dir}` },
  );
  for (const name of [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`]) {
    const path = join(dir, name);
    if (!existsSync(path)) continue;
    const m = statSync(path).mode & 0o777;
    if (m & 0o077)
      found.push({
        check: "data directory",
        level: "problem",
        message: `${path} is ${octal(m)}: it holds ciphertext and key material`,
        fix: `chmod 600 ${path}`,
      });
  }
  return found;
}

/** Reachability and schema version, read-only; returns the summary for the keyring and CA checks. */
export async function checkDatabase(config: Config): Promise<{ findings: Finding[]; summary: StoreSummary | undefined }> {
  const check = "database";
  let summary: StoreSummary | undefined;
  const where = config.database ? maskDatabaseUrl(config.database.url.reveal()) : join(config.dataDir, DB_FILE); // reveal: only to mask it
  try {
    summary = config.database ? await withTimeout(inspectPostgres(config.database.url.reveal()), 10_000) : inspectSqlite(config.dataDir);
  } catch (err) {
    return { findings: [databaseFailure(err, where, Boolean(config.database))], summary: undefined };
  }
  if (!summary) return { findings: [{ check, level: "ok", message: `${where} does not exist yet; the server creates it on first start` }], summary };
  const { schemaVersion: v, knownVersion: known } = summary;
  if (v > known)
    return {
      findings: [
        {
          check,
          level: "problem",
          message: `${where} has schema version ${v}, newer than this broker knows (${known})`,
          fix: "upgrade the broker to the version that wrote it, or newer",
        },
      ],
      summary,
    };
  if (v < known)
    return {
      findings: [
        {
          check,
          level: "warning",
          message: `${where} is reachable at schema version ${v}; this broker will migrate it to ${known} on start`,
          fix: "back it up first (`broker backup <file>`, or pg_dump), then start the broker",
        },
      ],
      summary,
    };
  return { findings: [{ check, level: "ok", message: `${where} is reachable, schema version ${v} (current)` }], summary };
}

function databaseFailure(err: unknown, where: string, postgres: boolean): Finding {
  const check = "database";
  if (err instanceof DatabaseUnavailable || (err instanceof Error && err.message === "timed out")) {
    const reason = err instanceof DatabaseUnavailable ? err.reason : "no answer within 10 s";
    return {
      check,
      level: "problem",
      message: `cannot reach the database ${where} (${reason})`,
      fix: "check that PostgreSQL is running and reachable from here, and the host, port and sslmode in BROKER_DATABASE_URL",
    };
  }
  const code = (err as { errno?: unknown; code?: unknown } | null)?.errno ?? (err as { code?: unknown } | null)?.code;
  const text = err instanceof Error ? err.message : String(err);
  const detail = postgres ? `PostgreSQL error ${String(code ?? "")}`.trim() : text;
  const fix = postgres
    ? "check the user name, password and database name in BROKER_DATABASE_URL (28P01: wrong password, 3D000: no such database)"
    : "check BROKER_DATA_DIR and that this user can read the files; a broker may hold a lock (try again)";
  return { check, level: "problem", message: `cannot read the database ${where}: ${detail}`, fix };
}

/** Passwordless or password mode; unlocking is left to the server (doctor never handles the data key). */
export function checkKeyring(summary: StoreSummary | undefined, passwordGiven: boolean): Finding {
  const check = "keyring";
  if (!summary?.keyring)
    return { check, level: "ok", message: "not created yet: the server creates the data key on first start (wrapped if BROKER_MASTER_PASSWORD is set)" };
  if (summary.keyring === "plain") {
    return {
      check,
      level: "warning",
      message: "passwordless: the data key is stored unwrapped, so whoever reads the store can decrypt every credential",
      fix: "set a master password: `broker master-password set`",
    };
  }
  return passwordGiven
    ? { check, level: "ok", message: "master password set, and BROKER_MASTER_PASSWORD is given (doctor does not unlock; the server checks it on start)" }
    : {
        check,
        level: "ok",
        message: "master password set; BROKER_MASTER_PASSWORD is not given, so doctor cannot check that it unlocks (the server asks for it on a terminal)",
      };
}

/** The root CA's public certificate: parses, is current, and days to expiry. */
export function checkCa(summary: StoreSummary | undefined, now: number): Finding {
  const check = "root CA";
  if (!summary?.ca) return { check, level: "ok", message: "not created yet: the server creates it on first start" };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(summary.ca.certPem);
  } catch {
    return {
      check,
      level: "problem",
      message: "the stored root CA certificate does not parse",
      fix: "replace it: `broker ca rotate` (clients must trust the new one)",
    };
  }
  const notAfter = Date.parse(cert.validTo);
  const days = Math.floor((notAfter - now) / 86_400_000);
  if (Date.parse(cert.validFrom) > now)
    return { check, level: "problem", message: `the root CA is not valid before ${cert.validFrom}`, fix: "check this machine's clock" };
  if (days < 0)
    return {
      check,
      level: "problem",
      message: `the root CA expired on ${cert.validTo}`,
      fix: "`broker ca rotate`, then give clients the new certificate (`broker ca export`)",
    };
  if (days < CA_WARN_DAYS)
    return {
      check,
      level: "warning",
      message: `the root CA expires in ${days} days (${cert.validTo})`,
      fix: "`broker ca rotate` soon, then give clients the new certificate (`broker ca export`)",
    };
  return { check, level: "ok", message: `root CA valid, ${days} days to expiry (${cert.validTo})` };
}

function octal(mode: number): string {
  return `0${mode.toString(8)}`;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), ms)));
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}
