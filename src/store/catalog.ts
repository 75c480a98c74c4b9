// The store's tables as the database itself describes them (SQLite's or PostgreSQL's catalog), so a
// copy covers whatever the migrations made without a list that could drift. The one place in src/store
// that assembles SQL text at run time: only names read from the catalog, each checked against IDENTIFIER
// and double-quoted, ever enter it; every value stays a `?` parameter.

import type { Dialect, Sql } from "./db.ts";

export interface TableInfo {
  readonly name: string;
  /** In the catalog's order (creation order, ALTER TABLE additions last). */
  readonly columns: readonly string[];
  readonly primaryKey: readonly string[];
  /** Tables this one references by foreign key (a self-reference left out). */
  readonly parents: readonly string[];
  /** The column the database numbers itself: INTEGER PRIMARY KEY on SQLite, GENERATED … AS IDENTITY on PostgreSQL. */
  readonly identity: string | undefined;
}

/** Lower-case names only, as the migrations write them; anything else is refused, not quoted. */
const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;
/** The migrations' own bookkeeping: written by migrate() on each side, never copied. */
export const BOOKKEEPING_TABLE = "schema_migrations";

/** Every table of the store except the bookkeeping, sorted by name. */
export async function readCatalog(sql: Sql, dialect: Dialect): Promise<TableInfo[]> {
  return dialect === "sqlite" ? readSqliteCatalog(sql) : readPostgresCatalog(sql);
}

async function readSqliteCatalog(sql: Sql): Promise<TableInfo[]> {
  const tables = await sql.all<{ name: string }>(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name <> ? AND name <> ? ORDER BY name",
    // The change log is SQLite's announcements between processes (migration 32): PostgreSQL announces with NOTIFY.
    [BOOKKEEPING_TABLE, "change_log"],
  );
  const out: TableInfo[] = [];
  for (const { name } of tables) {
    const cols = await sql.all<{ name: string; type: string; pk: number }>("SELECT name, type, pk FROM pragma_table_info(?) ORDER BY cid", [name]);
    const primaryKey = cols.filter((c) => c.pk > 0).sort((a, b) => a.pk - b.pk);
    const parents = await sql.all<{ parent: string }>('SELECT DISTINCT "table" AS parent FROM pragma_foreign_key_list(?)', [name]);
    // A lone INTEGER PRIMARY KEY is SQLite's rowid alias: the column it numbers itself.
    const rowidAlias = primaryKey.length === 1 && primaryKey[0]!.type.toUpperCase() === "INTEGER" ? primaryKey[0]!.name : undefined;
    out.push(
      checked({
        name,
        columns: cols.map((c) => c.name),
        primaryKey: primaryKey.map((c) => c.name),
        parents: parents.map((p) => p.parent),
        identity: rowidAlias,
      }),
    );
  }
  return out;
}

async function readPostgresCatalog(sql: Sql): Promise<TableInfo[]> {
  const tables = await sql.all<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> ? ORDER BY table_name",
    [BOOKKEEPING_TABLE],
  );
  const out: TableInfo[] = [];
  for (const { name } of tables) {
    const cols = await sql.all<{ name: string; identity: string }>(
      'SELECT column_name AS name, is_identity AS "identity" FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ? ORDER BY ordinal_position',
      [name],
    );
    const primaryKey = await sql.all<{ name: string }>(
      `SELECT k.column_name AS name FROM information_schema.table_constraints c
       JOIN information_schema.key_column_usage k ON k.constraint_schema = c.constraint_schema AND k.constraint_name = c.constraint_name AND k.table_name = c.table_name
       WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = current_schema() AND c.table_name = ? ORDER BY k.ordinal_position`,
      [name],
    );
    const parents = await sql.all<{ parent: string }>(
      "SELECT DISTINCT p.relname AS parent FROM pg_constraint f JOIN pg_class p ON p.oid = f.confrelid WHERE f.contype = 'f' AND f.conrelid = to_regclass(?)",
      [name],
    );
    const identity = cols.find((c) => c.identity === "YES")?.name;
    out.push(checked({ name, columns: cols.map((c) => c.name), primaryKey: primaryKey.map((c) => c.name), parents: parents.map((p) => p.parent), identity }));
  }
  return out;
}

function checked(t: TableInfo): TableInfo {
  for (const n of [t.name, ...t.columns, ...t.parents]) quote(n);
  return { ...t, parents: t.parents.filter((p) => p !== t.name) };
}

/** Parents before children (so foreign keys hold row by row), alphabetical among equals; a cycle is refused. */
export function sortParentsFirst(tables: readonly TableInfo[]): TableInfo[] {
  const names = new Set(tables.map((t) => t.name));
  const done = new Set<string>();
  const out: TableInfo[] = [];
  const pending = [...tables].sort((a, b) => a.name.localeCompare(b.name));
  while (pending.length > 0) {
    const i = pending.findIndex((t) => t.parents.every((p) => done.has(p) || !names.has(p)));
    if (i < 0) throw new Error(`foreign keys form a cycle among ${pending.map((t) => t.name).join(", ")}`);
    const [next] = pending.splice(i, 1);
    done.add(next!.name);
    out.push(next!);
  }
  return out;
}

/** `"name"`, after checking the name is a plain lower-case identifier. */
export function quote(name: string): string {
  if (!IDENTIFIER.test(name)) throw new Error(`unexpected name ${JSON.stringify(name)} in the database catalog`);
  return ['"', name, '"'].join("");
}

const list = (names: readonly string[]) => names.map(quote).join(", ");

/** A page of rows in primary-key order: the first (`after` false) or the one after the previous page's last key. */
export function selectPageSql(t: TableInfo, after: boolean): string {
  if (t.primaryKey.length === 0) throw new Error(`table ${t.name} has no primary key to page through`);
  const keys = list(t.primaryKey);
  const where = after ? ["WHERE (", keys, ") > (", t.primaryKey.map(() => "?").join(", "), ")"].join("") : "";
  return ["SELECT", list(t.columns), "FROM", quote(t.name), where, "ORDER BY", keys, "LIMIT ?"].filter(Boolean).join(" ");
}

/** One multi-row INSERT of `rows` rows, ids included (GENERATED BY DEFAULT accepts them). */
export function insertRowsSql(t: TableInfo, rows: number): string {
  const tuple = ["(", t.columns.map(() => "?").join(", "), ")"].join("");
  return ["INSERT INTO", quote(t.name), ["(", list(t.columns), ")"].join(""), "VALUES", Array.from({ length: rows }, () => tuple).join(", ")].join(" ");
}

export function countRowsSql(t: TableInfo): string {
  return ["SELECT COUNT(*) AS n FROM", quote(t.name)].join(" ");
}

export function anyRowSql(t: TableInfo): string {
  return ["SELECT 1 AS one FROM", quote(t.name), "LIMIT 1"].join(" ");
}

export function maxOfSql(t: TableInfo, column: string): string {
  return ["SELECT MAX(", quote(column), ") AS m FROM", quote(t.name)].join(" ");
}
