// `broker migrate-db` end to end, from source: a broker on SQLite (with a master password) gets an owner, a
// vault, a credential and a service; it stops; migrate-db copies it into PostgreSQL without ever printing the
// database password; a broker on that database then logs the same owner in and injects the same credential.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openPostgres } from "../../src/store/index.ts";
import { cleanEnv, isolatedBinary, runBinary, startBinaryServer, tempDir, type RunResult } from "../helpers/binary.ts";
import { pgMissing, type SharedPgCluster, sharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi } from "./proxy-fixture.ts";

const ROOT = join(import.meta.dir, "..", "..");
const OWNER = { email: "owner@example.com", password: `correct horse battery ${crypto.randomUUID()}` };
const MASTER = `master password for the move ${crypto.randomUUID()}`;
const SECRET = `sk-moved-${crypto.randomUUID()}`;
const VAULT = "moving";

/** An executable that runs the CLI from source, so the binary helpers can drive it. */
function sourceCli(): string {
  const path = join(tempDir("broker-src-cli-"), "broker");
  writeFileSync(path, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, "src", "index.ts"))} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

const must = async (apiUrl: string, method: string, path: string, body: unknown, token: string, status: number) => {
  const r = await callApi(apiUrl, method, path, body, token);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
};

const expectNoPassword = (r: RunResult, password: string) => {
  expect(r.stdout.includes(password) || r.stderr.includes(password)).toBe(false);
};

/** Fails naming the place and the value (never printing it) when any of `values` (or its base64) is in `text`. */
const expectAbsent = (where: string, text: string, values: Record<string, string>) => {
  for (const [name, v] of Object.entries(values)) {
    const found = [v, Buffer.from(v).toString("base64")].some((form) => text.includes(form));
    expect(`${name} in ${where}: ${found ? "present" : "absent"}`).toBe(`${name} in ${where}: absent`);
  }
};

describe.skipIf(pgMissing)("broker migrate-db", () => {
  let cluster: SharedPgCluster;
  let upstream: TestUpstream;
  let cli: string;
  let baseEnv: Record<string, string>;
  beforeAll(async () => {
    cluster = await sharedPgCluster();
    upstream = await startUpstream();
    cli = sourceCli();
    const caFile = join(tempDir(), "upstream-ca.pem");
    writeFileSync(caFile, upstream.pki.caPem);
    baseEnv = { BROKER_NETWORK_ALLOWLIST: "127.0.0.1", BROKER_UPSTREAM_CA_FILE: caFile, BROKER_RATELIMIT_PROFILE: "off", BROKER_MASTER_PASSWORD: MASTER };
  }, 60_000);
  afterAll(async () => {
    await upstream?.close();
    await cluster?.release();
  });

  /** The Authorization header the upstream saw for one request proxied with `token`. */
  async function proxiedAuth(apiUrl: string, token: string): Promise<string | undefined> {
    const res = await fetch(`${apiUrl}/proxy/127.0.0.1:${upstream.port}/whoami`, { headers: { authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    return upstream.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1];
  }

  test("moves a SQLite instance to PostgreSQL: the same login works and the same credential is injected", async () => {
    const url = await cluster.createDatabase();
    const dbPassword = new URL(url).password;
    const dataDir = join(tempDir(), "data");

    // 1. The old instance, on SQLite.
    let scopedToken: string;
    let oldLogs: () => string;
    let oldOwnerToken: string;
    {
      await using old = await startBinaryServer(cli, cleanEnv({ ...baseEnv, BROKER_DATA_DIR: dataDir }));
      oldLogs = old.logs;
      const { token } = await must(old.url, "POST", "/v1/auth/register", OWNER, "", 201);
      oldOwnerToken = token;
      await must(old.url, "POST", "/v1/vaults", { name: VAULT }, token, 201);
      await must(old.url, "PUT", `/v1/vaults/${VAULT}/credentials/API_KEY`, { value: SECRET }, token, 200);
      await must(
        old.url,
        "POST",
        `/v1/vaults/${VAULT}/services`,
        { host: `127.0.0.1:${upstream.port}`, auth: { type: "bearer", token: "API_KEY" } },
        token,
        201,
      );
      scopedToken = (await must(old.url, "POST", "/v1/sessions", { vault: VAULT, role: "proxy" }, token, 201)).token;
      expect(await proxiedAuth(old.url, scopedToken)).toBe(`Bearer ${SECRET}`);
    }

    // 2. The move.
    const moved = await runBinary(cli, ["migrate-db", "--to", url], { env: cleanEnv({ BROKER_DATA_DIR: dataDir }) });
    expectNoPassword(moved, dbPassword);
    expect({ exitCode: moved.exitCode, stderr: moved.exitCode === 0 ? "" : moved.stderr }).toEqual({ exitCode: 0, stderr: "" });
    expect(moved.stdout).toContain(`BROKER_DATABASE_URL=${url.replace(`:${dbPassword}@`, ":***@")}`);
    expect(moved.stdout).toContain("BROKER_MASTER_PASSWORD=<the same master password");
    expect(moved.stdout).toMatch(/^credentials\s+1\s+1\s+[0-9a-f]{16}…$/m);
    expect(moved.stdout).toMatch(/^users\s+1\s+1\s/m);
    expect(moved.stdout).toContain("Row counts and checksums match");

    // 3. The new instance, on PostgreSQL (its data dir is empty: everything comes from the database).
    await using next = await startBinaryServer(cli, cleanEnv({ ...baseEnv, BROKER_DATA_DIR: join(tempDir(), "unused"), BROKER_DATABASE_URL: url }));
    const { token } = await must(next.url, "POST", "/v1/auth/login", OWNER, "", 200);
    const listed = await must(next.url, "GET", `/v1/vaults/${VAULT}/credentials`, undefined, token, 200);
    expect(JSON.stringify(listed)).toContain("API_KEY");
    expect(await proxiedAuth(next.url, scopedToken)).toBe(`Bearer ${SECRET}`); // a session minted before the move
    const fresh = (await must(next.url, "POST", "/v1/sessions", { vault: VAULT, role: "proxy" }, token, 201)).token;
    expect(await proxiedAuth(next.url, fresh)).toBe(`Bearer ${SECRET}`);
    expect(next.logs()).not.toContain(dbPassword);

    // Neither the credential, the master and owner passwords nor any token reach migrate-db's output or either server's logs.
    const secrets = {
      credential: SECRET,
      "master password": MASTER,
      "owner password": OWNER.password,
      "scoped token": scopedToken,
      "fresh scoped token": fresh,
      "old owner token": oldOwnerToken,
      "new owner token": token,
    };
    expectAbsent("migrate-db's stdout", moved.stdout, secrets);
    expectAbsent("migrate-db's stderr", moved.stderr, secrets);
    expectAbsent("the old (SQLite) server's logs", oldLogs(), secrets);
    expectAbsent("the new (PostgreSQL) server's logs", next.logs(), secrets);
  }, 60_000);

  test("a database that already holds a store is refused with what to do instead, password never shown", async () => {
    const url = await cluster.createDatabase();
    const dbPassword = new URL(url).password;
    const dataDir = join(tempDir(), "data");
    {
      await using old = await startBinaryServer(cli, cleanEnv({ ...baseEnv, BROKER_DATA_DIR: dataDir }));
      await must(old.url, "POST", "/v1/auth/register", OWNER, "", 201);
    }
    const first = await runBinary(cli, ["migrate-db"], { env: cleanEnv({ BROKER_DATA_DIR: dataDir, BROKER_DATABASE_URL: url }) });
    expect(first.exitCode).toBe(0);
    const again = await runBinary(cli, ["migrate-db"], { env: cleanEnv({ BROKER_DATA_DIR: dataDir, BROKER_DATABASE_URL: url }) });
    expectNoPassword(again, dbPassword);
    expect(again.exitCode).toBe(1);
    expect(again.stdout).toBe("");
    expect(again.stderr).toMatch(/error: the target database is not empty: schema public already holds \d+ table\(s\): \w+.* \(postgres:\/\/broker:\*\*\*@/);
    expect(again.stderr).toContain("hint: give migrate-db a new, empty database");

    const wrong = await runBinary(cli, ["migrate-db", "--to", url.replace(`:${dbPassword}@`, ":not-the-password@")], {
      env: cleanEnv({ BROKER_DATA_DIR: dataDir }),
    });
    expect(wrong.exitCode).toBe(1);
    expect(wrong.stderr).toContain("PostgreSQL refused the login");
    expect(wrong.stderr).not.toContain("not-the-password");

    const nowhere = await runBinary(cli, ["migrate-db"], { env: cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "nothing-here"), BROKER_DATABASE_URL: url }) });
    expect(nowhere.exitCode).toBe(1);
    expect(nowhere.stderr).toContain("nothing-here/broker.db does not exist");
    expect(nowhere.stderr).toContain("BROKER_DATA_DIR");
  }, 60_000);

  test("a database holding another application's table with a row is refused before anything is created (compiled binary)", async () => {
    const url = await cluster.createDatabase();
    const other = openPostgres(url, { max: 1 });
    try {
      await other.run("CREATE TABLE invoices (id integer PRIMARY KEY, total text)");
      await other.run("INSERT INTO invoices VALUES (1, '42.00')");
      const dataDir = join(tempDir(), "data");
      {
        await using old = await startBinaryServer(cli, cleanEnv({ ...baseEnv, BROKER_DATA_DIR: dataDir }));
        await must(old.url, "POST", "/v1/auth/register", OWNER, "", 201);
      }
      const { bin } = isolatedBinary();
      const r = await runBinary(bin, ["migrate-db", "--to", url], { env: cleanEnv({ BROKER_DATA_DIR: dataDir }) });
      expectNoPassword(r, new URL(url).password);
      expect(r.exitCode).toBe(1);
      expect(r.stdout).not.toContain("Copied");
      expect(r.stderr).toContain("the target database is not empty: schema public already holds 1 table(s): invoices; nothing was created");
      const tables = await other.all<{ name: string }>("SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public'");
      expect(tables.map((t) => t.name)).toEqual(["invoices"]);
      expect(await other.all("SELECT id, total FROM invoices")).toEqual([{ id: 1, total: "42.00" }]);
    } finally {
      other.close();
    }
  }, 120_000);
});
