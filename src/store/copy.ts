// Copies one store into another, empty one (`broker migrate-db`: SQLite into PostgreSQL): every table the
// catalog lists, parents first, ids kept, bytes (ciphertext, wrapped keys) byte for byte, all in one target
// transaction that is verified (row counts and a SHA-256 over every value) before it commits. Never decrypts.

import type { Db, Sql, SqlValue } from "./db.ts";
import { anyRowSql, countRowsSql, insertRowsSql, maxOfSql, readCatalog, selectPageSql, sortParentsFirst, type TableInfo } from "./catalog.ts";

export interface TableCopy {
  readonly table: string;
  readonly sourceRows: number;
  readonly targetRows: number;
  /** SHA-256 over every value of every row (order-independent), equal on both sides. */
  readonly checksum: string;
}

export interface CopyReport {
  readonly schemaVersion: number;
  /** In copy order: parents first. */
  readonly tables: readonly TableCopy[];
}

export interface CopyOptions {
  /** Rows read per page and written per INSERT (fewer when a table has many columns). */
  readonly pageSize?: number;
}

/** The target already holds data: a copy never merges into or overwrites a store. */
export class TargetNotEmpty extends Error {
  constructor(
    readonly table: string,
    message = `table ${table} already has rows`,
  ) {
    super(message);
  }
}

/**
 * Refuses a PostgreSQL database whose schema (current_schema(), where the broker would create its tables)
 * holds any table or view at all, the broker's or another application's: checked before anything is created.
 */
export async function requireEmptySchema(db: Db): Promise<void> {
  const rows = await db.all<{ schema: string; name: string }>(
    `SELECT table_schema AS "schema", table_name AS "name" FROM information_schema.tables
      WHERE table_schema = current_schema() ORDER BY table_name`,
  );
  if (rows.length === 0) return;
  const names = rows.slice(0, 5).map((r) => r.name);
  const more = rows.length > names.length ? ` and ${rows.length - names.length} more` : "";
  throw new TargetNotEmpty(rows[0]!.name, `schema ${rows[0]!.schema} already holds ${rows.length} table(s): ${names.join(", ")}${more}; nothing was created`);
}

/** The two sides are not at the same schema (or the target lacks a table or column the source has). */
export class SchemaMismatch extends Error {}

/** What was written is not what was read; the transaction was rolled back. */
export class CopyMismatch extends Error {
  constructor(
    readonly table: string,
    detail: string,
  ) {
    super(`${table}: ${detail}`);
  }
}

/** Most parameters one statement carries: below SQLite's 32766 and PostgreSQL's 65535. */
const MAX_PARAMS = 30_000;

/**
 * Copies `from` into `to`. Both must be migrated to the same version and `to` must be empty. The source is
 * read inside its own transaction (on SQLite a write lock, so the snapshot is consistent); the target is
 * written in one transaction that commits only when every table's count and checksum match.
 */
export async function copyStore(from: Db, to: Db, opts: CopyOptions = {}): Promise<CopyReport> {
  const pageSize = opts.pageSize ?? 1000;
  return from.transaction((src) =>
    to.transaction(async (dst) => {
      const schemaVersion = await sameSchemaVersion(src, dst);
      const tables = sortParentsFirst(await readCatalog(src, from.dialect));
      const targetTables = await readCatalog(dst, to.dialect);
      requireSameColumns(tables, targetTables);
      for (const t of tables) if (await dst.get(anyRowSql(t))) throw new TargetNotEmpty(t.name);

      const report: TableCopy[] = [];
      for (const t of tables) {
        const copied = await copyTable(src, dst, t, pageSize);
        report.push(await verifyTable(src, dst, t, copied, pageSize));
      }
      if (to.dialect === "postgres") await advanceIdentities(dst, targetTables);
      return { schemaVersion, tables: report };
    }),
  );
}

async function sameSchemaVersion(src: Sql, dst: Sql): Promise<number> {
  const [a, b] = [await schemaVersion(src), await schemaVersion(dst)];
  if (a !== b) throw new SchemaMismatch(`the source is at schema version ${a} and the target at ${b}; migrate both with the same broker first`);
  return a;
}

async function schemaVersion(sql: Sql): Promise<number> {
  const row = await sql.get<{ v: number | null }>("SELECT MAX(version) AS v FROM schema_migrations");
  return Number(row?.v ?? 0);
}

function requireSameColumns(source: readonly TableInfo[], target: readonly TableInfo[]): void {
  const byName = new Map(target.map((t) => [t.name, t]));
  for (const t of source) {
    const other = byName.get(t.name);
    if (!other) throw new SchemaMismatch(`the target has no table ${t.name}`);
    const missing = t.columns.filter((c) => !other.columns.includes(c));
    if (missing.length > 0) throw new SchemaMismatch(`the target's table ${t.name} lacks column(s) ${missing.join(", ")}`);
  }
}

/** Pages through `t` on `sql` in primary-key order; keyset paging stays fast on a million audit rows. */
async function* readPages(sql: Sql, t: TableInfo, pageSize: number): AsyncGenerator<SqlValue[][]> {
  let last: SqlValue[] | undefined;
  for (;;) {
    const rows = await sql.all<Record<string, SqlValue>>(selectPageSql(t, last !== undefined), [...(last ?? []), pageSize]);
    if (rows.length === 0) return;
    const values = rows.map((r) => t.columns.map((c) => r[c] ?? null));
    yield values;
    const tail = rows[rows.length - 1]!;
    last = t.primaryKey.map((c) => tail[c] ?? null);
    if (rows.length < pageSize) return;
  }
}

interface Copied {
  readonly rows: number;
  readonly checksum: string;
}

async function copyTable(src: Sql, dst: Sql, t: TableInfo, pageSize: number): Promise<Copied> {
  const perInsert = Math.max(1, Math.min(pageSize, Math.floor(MAX_PARAMS / t.columns.length)));
  const digest = createRowDigest();
  let rows = 0;
  for await (const page of readPages(src, t, pageSize)) {
    for (let i = 0; i < page.length; i += perInsert) {
      const batch = page.slice(i, i + perInsert);
      await dst.run(insertRowsSql(t, batch.length), batch.flat());
    }
    for (const row of page) digest.add(row);
    rows += page.length;
  }
  return { rows, checksum: digest.hex() };
}

/** Re-reads what was written (inside the same transaction) and compares it with what was read. */
async function verifyTable(src: Sql, dst: Sql, t: TableInfo, copied: Copied, pageSize: number): Promise<TableCopy> {
  const sourceRows = await countRows(src, t);
  const targetRows = await countRows(dst, t);
  if (sourceRows !== copied.rows) throw new CopyMismatch(t.name, `read ${copied.rows} rows but the source counts ${sourceRows}`);
  if (targetRows !== sourceRows) throw new CopyMismatch(t.name, `${sourceRows} rows in the source but ${targetRows} in the target`);
  const digest = createRowDigest();
  for await (const page of readPages(dst, t, pageSize)) for (const row of page) digest.add(row);
  const checksum = digest.hex();
  if (checksum !== copied.checksum) throw new CopyMismatch(t.name, "the values written differ from the values read (checksum mismatch)");
  return { table: t.name, sourceRows, targetRows, checksum };
}

async function countRows(sql: Sql, t: TableInfo): Promise<number> {
  return Number((await sql.get<{ n: number | string }>(countRowsSql(t)))?.n ?? 0);
}

/**
 * Rows arrive with their ids, so each identity sequence still stands at 1: move it past the largest id,
 * or the next insert after the move would collide with a copied row.
 */
async function advanceIdentities(dst: Sql, tables: readonly TableInfo[]): Promise<void> {
  for (const t of tables) {
    if (!t.identity) continue;
    const max = (await dst.get<{ m: number | null }>(maxOfSql(t, t.identity)))?.m;
    if (max === null || max === undefined) continue;
    await dst.get("SELECT setval(pg_get_serial_sequence(?, ?), ?)", [t.name, t.identity, Number(max)]);
  }
}

/**
 * An order-independent digest of a set of rows: the sum, modulo 2^256, of each row's SHA-256. Order-independent
 * because the two databases may order text keys differently (byte order against a collation).
 */
function createRowDigest() {
  const MOD = 1n << 256n;
  let sum = 0n;
  return {
    add(row: readonly SqlValue[]) {
      const hex = new Bun.CryptoHasher("sha256").update(encodeRow(row)).digest("hex");
      sum = (sum + BigInt(`0x${hex}`)) % MOD;
    },
    hex: () => sum.toString(16).padStart(64, "0"),
  };
}

/** A canonical text for one row: bytes as hex (tagged), int8 as a number, so both backends spell a row alike. */
function encodeRow(row: readonly SqlValue[]): string {
  return JSON.stringify(
    row.map((v) => {
      if (v instanceof Uint8Array) return { bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("hex") };
      if (typeof v === "bigint") return Number(v);
      if (typeof v === "boolean") return v ? 1 : 0;
      return v;
    }),
  );
}
