// Schema migrations: applied once, recorded, idempotent on re-open, atomic, a newer schema refused,
// and two instances migrating one fresh database together apply each version exactly once.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { MIGRATIONS, migrate, openStore, type Db } from "../../../src/store/index.ts";
import { renderMigration } from "../../../src/store/migrations.ts";
import type { Migration } from "../../../src/store/schema.ts";
import { openSqliteFile } from "../../../src/store/sqlite.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const STORE_MODULE = resolve(import.meta.dir, "../../../src/store/index.ts");
const SQLITE_MODULE = resolve(import.meta.dir, "../../../src/store/sqlite.ts");

type Version = { version: number; name: string };
const FOUNDATION_TABLES = ["credentials", "keyring", "schema_migrations", "sessions", "users", "vaults"];
const ALL_VERSIONS = MIGRATIONS.map((m) => ({ version: m.version, name: m.name }));
const NEWEST = Math.max(...MIGRATIONS.map((m) => m.version));
const versions = async (db: Db) =>
  (await db.all<Version>("SELECT version, name FROM schema_migrations ORDER BY version")).map((v) => ({ version: Number(v.version), name: v.name }));
/** Rows in `table`; rejects when the table does not exist (the portable stand-in for sqlite_master / information_schema). */
const rowCount = async (db: Db, table: string) => Number((await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);

forEachBackend((backend) => {
  test("a fresh store records every migration, starting with version 1, and has the foundation tables", async () => {
    const store = await backend.open();
    const applied = await versions(store.db);
    expect(applied[0]).toEqual({ version: 1, name: "foundation" });
    expect(applied).toEqual(ALL_VERSIONS);
    const counts = await Promise.all(FOUNDATION_TABLES.map((t) => rowCount(store.db, t)));
    expect(Object.fromEntries(FOUNDATION_TABLES.map((t, i) => [t, counts[i]]))).toEqual(
      Object.fromEntries(FOUNDATION_TABLES.map((t) => [t, t === "schema_migrations" ? MIGRATIONS.length : 0])),
    );
  });

  test("re-opening is idempotent: nothing re-runs and data survives", async () => {
    const connect = await backend.freshDatabase();
    const first = connect();
    expect(await migrate(first)).toEqual(MIGRATIONS.map((m) => m.version));
    await first.run("INSERT INTO vaults (name, created_at) VALUES (?, ?)", ["survivor", 1]);
    first.close();
    const again = connect();
    expect(await migrate(again)).toEqual([]);
    expect(await versions(again)).toEqual(ALL_VERSIONS);
    expect(await again.all("SELECT name FROM vaults")).toEqual([{ name: "survivor" }]);
  });

  test("a database with a newer schema version is refused", async () => {
    const connect = await backend.freshDatabase();
    const db = connect();
    await migrate(db);
    await db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", [NEWEST + 1, "from-the-future", 1]);
    await expect(migrate(connect())).rejects.toThrow(new RegExp(`schema version ${NEWEST + 1}.*upgrade the broker`));
  });

  test("migrate() returns what it ran, records it once, and uses the given clock", async () => {
    const db = (await backend.freshDatabase())();
    expect(await migrate(db, MIGRATIONS, () => 42)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await migrate(db, MIGRATIONS, () => 43)).toEqual([]);
    const rows = await db.all<{ version: number; at: number }>("SELECT version, applied_at AS at FROM schema_migrations ORDER BY version");
    expect(rows.map((r) => ({ version: Number(r.version), at: Number(r.at) }))).toEqual(MIGRATIONS.map((m) => ({ version: m.version, at: 42 })));
  });

  test("a failing migration leaves neither its tables nor its record behind", async () => {
    const db = (await backend.freshDatabase())();
    const broken: Migration[] = [
      ...MIGRATIONS,
      { version: NEWEST + 1, name: "broken", sql: "CREATE TABLE half_done (id INTEGER);\nINSERT INTO no_such_table VALUES (1);" },
    ];
    await expect(migrate(db, broken)).rejects.toThrow(/no_such_table/);
    expect(await versions(db)).toEqual(ALL_VERSIONS);
    await expect(rowCount(db, "half_done")).rejects.toThrow(/half_done/);
  });

  test("migration 9 widens auth types in place: rows, ids, uniqueness and the vault cascade survive (and on PostgreSQL the announce trigger)", async () => {
    const db = (await backend.freshDatabase())();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 9),
    );
    await db.run("INSERT INTO vaults (name, created_at) VALUES (?, ?)", ["v", 1]);
    const vaultId = Number((await db.get<{ id: number }>("SELECT id FROM vaults"))!.id);
    await db.run(
      "INSERT INTO services (id, vault_id, host, description, auth_type, auth_key, auth_header, auth_prefix, enabled, rules, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      [41, vaultId, "api.example.com", "kept", "header", "K", "x-api-key", "Key ", 0, '[{"methods":["GET"],"paths":["/**"]}]', 2, 3],
    );
    await expect(
      db.run("INSERT INTO services (vault_id, host, auth_type, created_at, updated_at) VALUES (?, ?, ?, ?, ?)", [vaultId, "q.example.com", "query", 1, 1]),
    ).rejects.toThrow();
    expect(
      await migrate(
        db,
        MIGRATIONS.filter((m) => m.version <= 9),
      ),
    ).toEqual([9]);
    const row = await db.get<Record<string, unknown>>(
      "SELECT id, host, description, auth_type, auth_key, auth_header, auth_prefix, auth_username, auth_param, auth_template, enabled, rules, created_at, updated_at FROM services",
    );
    expect({ ...row, id: Number(row!.id), enabled: Number(row!.enabled), created_at: Number(row!.created_at), updated_at: Number(row!.updated_at) } as Record<
      string,
      unknown
    >).toEqual({
      id: 41,
      host: "api.example.com",
      description: "kept",
      auth_type: "header",
      auth_key: "K",
      auth_header: "x-api-key",
      auth_prefix: "Key ",
      auth_username: null,
      auth_param: null,
      auth_template: null,
      enabled: 0,
      rules: '[{"methods":["GET"],"paths":["/**"]}]',
      created_at: 2,
      updated_at: 3,
    });
    const insert =
      "INSERT INTO services (vault_id, host, auth_type, auth_key, auth_param, auth_template, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    await db.run(insert, [vaultId, "q.example.com", "query", "G", "key", null, 4, 4]);
    await db.run(insert, [vaultId, "p.example.com", "path", "T", null, "/bot{value}", 4, 4]);
    await expect(db.run(insert, [vaultId, "x.example.com", "cookie", "K", null, null, 4, 4])).rejects.toThrow();
    await expect(db.run(insert, [vaultId, "q.example.com", "bearer", "K", null, null, 4, 4])).rejects.toThrow(); // UNIQUE (vault_id, host)
    if (backend.name === "postgres") {
      const triggers = await db.all<{ tgname: string }>("SELECT tgname FROM pg_trigger WHERE tgrelid = 'services'::regclass AND NOT tgisinternal");
      expect(triggers.map((t) => t.tgname)).toEqual(["services_announce"]);
    }
    await db.run("DELETE FROM vaults WHERE id = ?", [vaultId]);
    expect(await rowCount(db, "services")).toBe(0);
  });

  // What the advisory lock is for: two instances starting together on an empty database. (SQLite's
  // file belongs to one process, and bun:sqlite's busy wait blocks the thread, so two connections in
  // one process would deadlock until the busy timeout; its two-process case is tested below.)
  test.if(backend.name === "postgres")("two connections migrating one fresh database at once apply each version exactly once between them", async () => {
    const connect = await backend.freshDatabase();
    const [a, b] = [connect(), connect()];
    const [ranA, ranB] = await Promise.all([migrate(a), migrate(b)]);
    expect([...ranA, ...ranB].sort((x, y) => x - y)).toEqual(MIGRATIONS.map((m) => m.version));
    expect(await versions(a)).toEqual(ALL_VERSIONS);
    expect(await migrate(b)).toEqual([]);
  });
});

describe("sqlite file", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
  const tempDir = () => {
    const d = mkdtempSync(join(tmpdir(), "broker-migrations-"));
    dirs.push(d);
    return d;
  };

  test("openStore refuses a data dir whose schema is newer", async () => {
    const dir = tempDir();
    const store = await openStore({ dataDir: dir });
    await store.db.run("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)", [NEWEST + 1, "from-the-future", 1]);
    store.close();
    await expect(openStore({ dataDir: dir })).rejects.toThrow(new RegExp(`schema version ${NEWEST + 1}.*upgrade the broker`));
  });

  test("two processes migrating one fresh file at once apply each version exactly once between them", async () => {
    const dir = tempDir();
    // Created (and switched to WAL, which persists) first: two processes cold-opening one new file can
    // collide on that switch, where SQLite answers SQLITE_BUSY at once whatever the busy timeout.
    // That is openSqliteFile's concern, not the migration lock's.
    openSqliteFile(dir).close();
    const script = `
      const { migrate } = await import(${JSON.stringify(STORE_MODULE)});
      const { openSqliteFile } = await import(${JSON.stringify(SQLITE_MODULE)});
      const db = openSqliteFile(${JSON.stringify(dir)});
      console.log(JSON.stringify(await migrate(db)));
      db.close();`;
    const run = async () => {
      const proc = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      expect({ code, err }).toEqual({ code: 0, err: "" });
      return JSON.parse(out) as number[];
    };
    const [a, b] = await Promise.all([run(), run()]);
    expect([...a, ...b].sort((x, y) => x - y)).toEqual(MIGRATIONS.map((m) => m.version));
    const db = openSqliteFile(dir);
    try {
      expect(await versions(db)).toEqual(ALL_VERSIONS);
    } finally {
      db.close();
    }
  }, 20_000);
});

describe("migration scripts", () => {
  test("versions are 1, 2, 3, ... in order", () => {
    expect(MIGRATIONS.map((m) => m.version)).toEqual(MIGRATIONS.map((_, i) => i + 1));
  });

  test("spells ids and bytes per dialect and leaves no placeholder", () => {
    const sql = MIGRATIONS.map((m) => m.sql).join("\n");
    const sqlite = renderMigration(sql, "sqlite");
    const postgres = renderMigration(sql, "postgres");
    expect(sqlite).not.toContain("{{");
    expect(postgres).not.toContain("{{");
    expect(sqlite).toContain("id INTEGER PRIMARY KEY");
    expect(sqlite).toContain("nonce BLOB NOT NULL");
    expect(postgres).toContain("id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
    expect(postgres).toContain("nonce BYTEA NOT NULL");
  });
});
