// The throwaway PostgreSQL cluster helper: separate databases, an outage by stop()/start(), and a clean destroy().

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { existsSync } from "node:fs";
import { type PgCluster, pgMissing, startPgCluster } from "../../helpers/postgres.ts";

async function withDb<T>(url: string, fn: (sql: SQL) => Promise<T>): Promise<T> {
  const sql = new SQL({ url, max: 1, connectionTimeout: 5 });
  try {
    return await fn(sql);
  } finally {
    await sql.close();
  }
}

const tableExists = (url: string, table: string) =>
  withDb(url, async (sql) => (await sql`SELECT to_regclass(${table}) IS NOT NULL AS present`)[0].present as boolean);

describe.skipIf(pgMissing)("throwaway PostgreSQL cluster", () => {
  let cluster: PgCluster;
  beforeAll(async () => {
    const started = performance.now();
    cluster = await startPgCluster();
    console.log(`PostgreSQL cluster up on port ${cluster.port} in ${Math.round(performance.now() - started)} ms`);
  }, 60_000);
  afterAll(() => cluster?.destroy());

  test("each database is a separate, empty database reachable as broker over 127.0.0.1", async () => {
    const [a, b] = [await cluster.createDatabase(), await cluster.createDatabase("named_db")];
    expect(a).toMatch(new RegExp(`^postgres://broker:[0-9a-f]+@127\\.0\\.0\\.1:${cluster.port}/t_[0-9a-f]+$`));
    expect(b).toEndWith(`:${cluster.port}/named_db`);
    await withDb(a, (sql) => sql`CREATE TABLE only_in_a (id int)`);
    expect(await tableExists(a, "only_in_a")).toBe(true);
    expect(await tableExists(b, "only_in_a")).toBe(false);
    expect(await withDb(b, async (sql) => (await sql`SELECT current_user AS u, inet_server_addr()::text AS addr`)[0])).toEqual({
      u: "broker",
      addr: "127.0.0.1/32",
    });
  });

  test("a database name that is not a plain identifier is refused before it reaches SQL", async () => {
    await expect(cluster.createDatabase('x"; DROP DATABASE postgres; --')).rejects.toThrow(/invalid database name/);
    await expect(cluster.createDatabase("Upper")).rejects.toThrow(/invalid database name/);
  });

  test("a wrong password is refused (scram-sha-256, not trust)", async () => {
    const url = (await cluster.createDatabase()).replace(/broker:[0-9a-f]+@/, "broker:wrong@");
    await expect(withDb(url, (sql) => sql`SELECT 1`)).rejects.toThrow(/password authentication failed/);
  });

  test("stop() makes connections fail and start() brings the same data back on the same port", async () => {
    const url = await cluster.createDatabase();
    await withDb(url, (sql) => sql`CREATE TABLE survives (id int)`);
    await cluster.stop();
    await expect(withDb(url, (sql) => sql`SELECT 1`)).rejects.toThrow(/connect/i);
    await cluster.start();
    expect(await tableExists(url, "survives")).toBe(true);
  }, 30_000);

  test("destroy() stops the server, removes its directory, and may be called twice", async () => {
    const other = await startPgCluster();
    const url = await other.createDatabase();
    expect(existsSync(other.dir)).toBe(true);
    await other.destroy();
    await other.destroy();
    expect(existsSync(other.dir)).toBe(false);
    await expect(withDb(url, (sql) => sql`SELECT 1`)).rejects.toThrow(/connect/i);
  }, 60_000);
});
