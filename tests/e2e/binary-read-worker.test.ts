// The compiled binary's store read worker (src/store/sqlite-reader.ts; build.ts embeds its entry point):
// log pages, filtered and followed, are read on the worker thread's own connection, and see rows another
// connection committed a moment before. The server does not start without its worker, so every answer
// here came through it. Run from a directory with no sources beside the binary.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { openSqliteFile } from "../../src/store/sqlite.ts";
import { fillAuditLog, filledRow, RARE_EVERY, RARE_HOST } from "../helpers/audit-fill.ts";
import { cleanEnv, isolatedBinary, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";

const { bin, dir } = isolatedBinary();
const data = join(tempDir(), "data");
const config = join(tempDir("broker-cli-"), "config");
const ROWS = 20_000;
let server: ServerProcess;
let owner = "";

async function cli(args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: cleanEnv({ BROKER_CONFIG_DIR: config, BROKER_ADDR: server.url }), stdin, cwd: dir });
  if (r.exitCode !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.exitCode}\n${r.stderr}`);
  return r;
}

interface Page {
  logs: { id: number; host: string; status: number; principal: string }[];
  next_cursor: string | null;
}

async function logs(query: string): Promise<Page> {
  const res = await fetch(`${server.url}/v1/vaults/main/logs?${query}`, { headers: { authorization: `Bearer ${owner}` } });
  if (res.status !== 200) throw new Error(`logs?${query}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Page;
}

/** Another connection to the server's store file writes `count` rows into vault `main` (ids = row numbers). */
async function fillFromOutside(count: number): Promise<void> {
  const db = openSqliteFile(data);
  try {
    const vault = await db.get<{ id: number }>("SELECT id FROM vaults WHERE name = 'main'");
    await fillAuditLog(db, Number(vault?.id), count, { analyze: false });
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  server = await startBinaryServer(bin, cleanEnv({ BROKER_DATA_DIR: data }), dir);
  await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], "read worker owner password\n");
  await cli(["vault", "create", "main"]);
  owner = JSON.parse(await Bun.file(join(config, "cli.json")).text()).token as string;
});

afterAll(async () => {
  await server?.stop();
});

test("log pages, filtered, paged and followed, come from the worker and see rows committed just before", async () => {
  expect((await logs("limit=10")).logs).toEqual([]);
  await fillFromOutside(ROWS);

  const newest = await logs("limit=100");
  expect(newest.logs.map((r) => r.id)).toEqual(Array.from({ length: 100 }, (_, i) => ROWS - i));
  const older = await logs(`limit=100&before=${newest.next_cursor}`);
  expect(older.logs[0]?.id).toBe(ROWS - 100);

  const rare = await logs(`host=${RARE_HOST}&limit=1000`);
  expect(rare.logs.map((r) => r.id)).toEqual(Array.from({ length: ROWS / RARE_EVERY }, (_, i) => ROWS - i * RARE_EVERY));
  for (const r of rare.logs) expect({ host: r.host, status: r.status, principal: r.principal }).toEqual(filledRow(r.id));

  const following = await logs(`after=${ROWS - 5}&limit=10`);
  expect(following.logs.map((r) => r.id)).toEqual([ROWS - 4, ROWS - 3, ROWS - 2, ROWS - 1, ROWS]);

  expect(server.logs()).not.toContain("read_worker_failed");
});
