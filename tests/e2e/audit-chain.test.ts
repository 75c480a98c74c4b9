// The audit log's hash chain end to end, as the compiled binary (docs/audit-chain.md): 1,000 proxied requests across
// two vaults, `broker audit verify` passes online and offline, `broker audit export` writes JSON lines and OCSF 1.6.0
// API Activity events (each validated against the class's schema) with no credential or query in them; then each
// tampering done directly in the database while the server is stopped (a changed status, a deleted row, inserted
// rows, two rows swapped, the last 10 rows removed after the broker's checkpoint, a forged checkpoint) is named by
// `broker audit verify` with exit code 1. On SQLite (each case on a fresh copy of the file) and on PostgreSQL.

import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanEnv, freePort, isolatedBinary, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { ocsfApiActivityErrors } from "../helpers/ocsf-api-activity.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

const { bin, dir } = isolatedBinary();
const SECRET = `sk-chain-${crypto.randomUUID()}`;
const QUERY = `q-${crypto.randomUUID()}`;
const REQUESTS = 1000;
const PER_VAULT = REQUESTS / 2;
let upstream: TestUpstream;
let caFile: string;

interface Row {
  id: number;
  seq: number;
  hash: string;
  path: string;
  status: number;
}

/** One broker (SQLite or PostgreSQL) with two vaults, a CLI signed in to it, and helpers to stop, tamper and verify. */
interface Broker {
  server: ServerProcess;
  readonly env: Record<string, string>;
  readonly config: string;
  readonly work: string;
  vaultIds: { [vault: string]: number };
  cli(args: string[], stdin?: string): Promise<RunResult>;
  start(): Promise<void>;
}

function cliEnv(b: Broker) {
  return cleanEnv({ BROKER_CONFIG_DIR: b.config, BROKER_ADDR: b.server.url, HOME: b.work });
}

async function startBroker(extra: Record<string, string>): Promise<Broker> {
  const work = tempDir("broker-chain-");
  const env = cleanEnv({
    HOME: work,
    BROKER_DATA_DIR: join(work, "data"),
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    // One address across restarts: the CLI sends its saved token only to the address it signed in at.
    BROKER_PORT: String(freePort()),
    ...extra,
  });
  const b: Broker = {
    server: undefined as unknown as ServerProcess,
    env,
    config: join(work, "config"),
    work,
    vaultIds: {},
    cli: (args, stdin) => runBinary(bin, args, { env: cliEnv(b), stdin, cwd: dir }),
    async start() {
      b.server = await startBinaryServer(bin, env, dir);
    },
  };
  await b.start();
  const must = async (args: string[], stdin?: string) => {
    const r = await b.cli(args, stdin);
    if (r.exitCode !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.exitCode}\n${r.stderr}`);
  };
  await must(["auth", "register", "--email", "owner@example.com", "--password-stdin"], "chain owner password\n");
  for (const vault of ["alpha", "beta"]) {
    await must(["vault", "create", vault]);
    await must(["credential", "set", "API_KEY", "--vault", vault], SECRET);
    await must(["service", "add", `127.0.0.1:${upstream.port}`, "--auth", "bearer", "--token", "API_KEY", "--vault", vault]);
  }
  return b;
}

/** 1,000 proxied requests, half to each vault, 50 at a time; each path names its vault and number, each query a sentinel. */
async function proxyMany(b: Broker): Promise<void> {
  const owner = JSON.parse(readFileSync(join(b.config, "cli.json"), "utf8")).token as string;
  const sessions: { [vault: string]: string } = {};
  for (const vault of ["alpha", "beta"]) {
    const res = await fetch(`${b.server.url}/v1/sessions`, {
      method: "POST",
      headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
      body: JSON.stringify({ vault }),
    });
    sessions[vault] = ((await res.json()) as { token: string }).token;
  }
  let next = 0;
  const statuses: number[] = [];
  const worker = async () => {
    while (next < REQUESTS) {
      const i = next++;
      const vault = i % 2 ? "beta" : "alpha";
      const res = await fetch(`${b.server.url}/proxy/127.0.0.1:${upstream.port}/${vault}/${i}?token=${QUERY}`, {
        headers: { authorization: `Bearer ${sessions[vault]}` },
      });
      await res.arrayBuffer();
      statuses.push(res.status);
    }
  };
  await Promise.all(Array.from({ length: 50 }, worker));
  expect(statuses.filter((s) => s !== 200)).toEqual([]);
  // The audit writer flushes every 250 ms: wait until both chains hold every record.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const heads = await Promise.all(["alpha", "beta"].map((v) => exportPage(b, v)));
    if (heads.every((p) => p.head.seq === PER_VAULT)) {
      for (const p of heads) b.vaultIds[p.vault] = p.vault_id;
      return;
    }
    if (Date.now() > deadline) throw new Error(`the audit records did not all arrive: ${heads.map((p) => p.head.seq).join(", ")}`);
    await Bun.sleep(100);
  }
}

async function exportPage(b: Broker, vault: string): Promise<{ vault: string; vault_id: number; head: { seq: number } }> {
  const owner = JSON.parse(readFileSync(join(b.config, "cli.json"), "utf8")).token as string;
  const res = await fetch(`${b.server.url}/v1/vaults/${vault}/audit/export?limit=1`, { headers: { authorization: `Bearer ${owner}` } });
  return (await res.json()) as { vault: string; vault_id: number; head: { seq: number } };
}

/** The JSON-lines export of `vault`, written by the CLI to a file, and its records. */
async function exportJsonl(b: Broker, vault: string): Promise<{ file: string; text: string; records: Row[]; checkpoints: number }> {
  const file = join(b.work, `${vault}-${crypto.randomUUID()}.jsonl`);
  const r = await b.cli(["audit", "export", "--vault", vault, "--format", "jsonl", "--output", file]);
  expect({ exit: r.exitCode, stderr: r.stderr }).toEqual({ exit: 0, stderr: expect.stringContaining(`records of vault ${vault}`) });
  const text = readFileSync(file, "utf8");
  const lines = text
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l));
  return { file, text, records: lines.filter((l) => l.type === "record"), checkpoints: lines.filter((l) => l.type === "checkpoint").length };
}

async function verifyFails(b: Broker, vault: string, message: string | RegExp, args: string[] = []): Promise<void> {
  const r = await b.cli(["audit", "verify", "--vault", vault, ...args]);
  expect(r.exitCode).toBe(1);
  const first = r.stderr.split("\n")[0]!;
  if (typeof message === "string") expect(first).toBe(`error: ${message}`);
  else expect(first).toMatch(message);
}

async function verifyPasses(b: Broker, vault: string): Promise<string> {
  const r = await b.cli(["audit", "verify", "--vault", vault]);
  expect({ exit: r.exitCode, stderr: r.stderr }).toEqual({ exit: 0, stderr: "" });
  return r.stdout;
}

const bySeq = (records: Row[], seq: number) => records.find((r) => r.seq === seq)!;

beforeAll(async () => {
  upstream = await startUpstream((_req, res) => res.end("ok"));
  caFile = join(tempDir(), "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
});

afterAll(async () => {
  await upstream?.close();
});

describe("SQLite", () => {
  let b: Broker;
  let pristine: string;
  let records: Row[];
  let dbFile: string;
  let publicKeyFile: string;

  beforeAll(async () => {
    b = await startBroker({});
    dbFile = join(b.env.BROKER_DATA_DIR!, "broker.db");
  }, 60_000);

  afterAll(async () => {
    await b?.server.stop();
  });

  test("1,000 proxied requests across two vaults: verify passes online and offline; the exports carry no secret", async () => {
    await proxyMany(b);
    // The 1,000th record makes the checkpointer sign (it looks every second): wait for it, so both exports below see it.
    const owner0 = JSON.parse(readFileSync(join(b.config, "cli.json"), "utf8")).token as string;
    for (let i = 0; i < 100; i++) {
      const cps = await (await fetch(`${b.server.url}/v1/vaults/alpha/audit/checkpoints`, { headers: { authorization: `Bearer ${owner0}` } })).json();
      if (cps.checkpoints?.some((c: { heads: { seq: number }[] }) => c.heads.some((h) => h.seq === PER_VAULT))) break;
      await Bun.sleep(100);
    }
    for (const vault of ["alpha", "beta"])
      expect(await verifyPasses(b, vault)).toMatch(
        new RegExp(`^verified ${PER_VAULT} records of vault ${vault} up to seq ${PER_VAULT} \\(time \\S+Z\\); \\d+ checkpoints? checked\\n$`),
      );
    const exported = await exportJsonl(b, "alpha");
    records = exported.records;
    expect(records.map((r) => r.seq)).toEqual(Array.from({ length: PER_VAULT }, (_, i) => i + 1));
    expect(records.every((r) => r.path.startsWith("/alpha/"))).toBe(true);
    // Offline, from the file and the public key the broker publishes.
    publicKeyFile = join(b.work, "audit-key.json");
    writeFileSync(publicKeyFile, await (await fetch(`${b.server.url}/v1/audit/public-key`)).text());
    const owner = JSON.parse(readFileSync(join(b.config, "cli.json"), "utf8")).token as string;
    const own = await (await fetch(`${b.server.url}/v1/vaults/alpha/audit/verify`, { headers: { authorization: `Bearer ${owner}` } })).json();
    expect(own).toMatchObject({ ok: true, records: PER_VAULT, verified: { seq: PER_VAULT, hash: bySeq(records, PER_VAULT).hash }, breaks: [] });
    const offline = await b.cli(["audit", "verify", "--from-export", exported.file, "--public-key", publicKeyFile]);
    expect({ exit: offline.exitCode, out: offline.stdout }).toEqual({
      exit: 0,
      out: expect.stringMatching(/^verified 500 records of vault alpha up to seq 500 /),
    });
    // To standard output, the same lines as to a file (but the time of the export, on its first line).
    const piped = await b.cli(["audit", "export", "--vault", "alpha"]);
    const timeless = (text: string) => text.replace(/"exported_at":\d+,/, "");
    expect(piped.stdout).toMatch(/^\{"type":"chain",.*"exported_at":\d+,"checkpoint_seconds":300,/);
    expect({ exit: piped.exitCode, out: timeless(piped.stdout) }).toEqual({ exit: 0, out: timeless(exported.text) });
    // OCSF: every line an API Activity event the 1.6.0 class schema accepts.
    const ocsfFile = join(b.work, "alpha.ocsf.jsonl");
    expect((await b.cli(["audit", "export", "--vault", "alpha", "--format", "ocsf", "--output", ocsfFile])).exitCode).toBe(0);
    const ocsf = readFileSync(ocsfFile, "utf8");
    const events = ocsf
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(events).toHaveLength(PER_VAULT);
    const invalid = events.map((e, i) => ({ i, errors: ocsfApiActivityErrors(e) })).filter((x) => x.errors.length);
    expect(invalid).toEqual([]);
    expect(events[0]).toMatchObject({ class_uid: 6003, actor: { user: { name: "owner@example.com" } }, unmapped: { chain: { seq: 1 } } });
    for (const text of [exported.text, ocsf, b.server.logs()]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(QUERY);
    }
    // The broker signs a last checkpoint when it stops: the copy every case starts from has it.
    await b.server.stop();
    pristine = tempDir("broker-chain-pristine-");
    for (const f of ["broker.db", "broker.db-wal", "broker.db-shm"])
      if (existsSync(join(b.env.BROKER_DATA_DIR!, f))) copyFileSync(join(b.env.BROKER_DATA_DIR!, f), join(pristine, f));
  }, 120_000);

  /** Restores the pristine file, runs `edit` on it (the server stopped), starts the server. */
  async function tampered(edit: (db: Database) => void): Promise<void> {
    await b.server.stop();
    for (const f of ["broker.db", "broker.db-wal", "broker.db-shm"]) {
      rmSync(join(b.env.BROKER_DATA_DIR!, f), { force: true });
      if (existsSync(join(pristine, f))) copyFileSync(join(pristine, f), join(b.env.BROKER_DATA_DIR!, f));
    }
    const db = new Database(dbFile);
    try {
      edit(db);
    } finally {
      db.close();
    }
    await b.start();
  }

  const alpha = () => b.vaultIds.alpha!;

  test("a changed status: edited", async () => {
    await tampered((db) => db.run(`UPDATE audit_logs SET status = 500 WHERE vault_id = ${alpha()} AND chain_seq = 41`));
    await verifyFails(b, "alpha", `record seq 41 (id ${bySeq(records, 41).id}): edited — its hash does not match its contents`);
    expect(await verifyPasses(b, "beta")).toStartWith("verified 500 records of vault beta"); // one vault's chain is its own
    // The broker's own verification (the console's "verified up to") names the same break.
    const owner = JSON.parse(readFileSync(join(b.config, "cli.json"), "utf8")).token as string;
    const own = await (await fetch(`${b.server.url}/v1/vaults/alpha/audit/verify`, { headers: { authorization: `Bearer ${owner}` } })).json();
    expect(own).toMatchObject({ ok: false, verified: null, breaks: [{ kind: "edited", seq: 41, id: bySeq(records, 41).id }] });
  }, 60_000);

  test("a deleted row: missing", async () => {
    await tampered((db) => db.run(`DELETE FROM audit_logs WHERE vault_id = ${alpha()} AND chain_seq = 100`));
    await verifyFails(
      b,
      "alpha",
      `record seq 100: missing — deleted; seq 99 (id ${bySeq(records, 99).id}) is followed by record seq 101 (id ${bySeq(records, 101).id})`,
    );
  }, 60_000);

  test("an inserted row: a copy claiming a record's place, and a row without chain fields", async () => {
    let copyId = 0;
    let bareId = 0;
    await tampered((db) => {
      const cols = `at, principal, vault_id, vault, ingress, method, host, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by`;
      db.run(
        `INSERT INTO audit_logs (${cols}, path, chain_seq, chain_prev, chain_hash) SELECT ${cols}, '/alpha/forged', chain_seq, chain_prev, chain_hash FROM audit_logs WHERE vault_id = ${alpha()} AND chain_seq = 200`,
      );
      copyId = Number((db.query("SELECT last_insert_rowid() AS id").get() as { id: number }).id);
      db.run(`INSERT INTO audit_logs (${cols}, path) SELECT ${cols}, '/alpha/bare' FROM audit_logs WHERE vault_id = ${alpha()} AND chain_seq = 300`);
      bareId = Number((db.query("SELECT last_insert_rowid() AS id").get() as { id: number }).id);
    });
    await verifyFails(
      b,
      "alpha",
      `record seq 200 (id ${copyId}): inserted — a second record claims seq 200 (the chain goes on from id ${bySeq(records, 200).id})`,
    );
    const json = await b.cli(["audit", "verify", "--vault", "alpha", "--json"]);
    expect(json.exitCode).toBe(1);
    expect(JSON.parse(json.stdout).breaks.map((x: { kind: string; id: number }) => [x.kind, x.id])).toEqual([
      ["inserted", copyId],
      ["inserted", bareId],
    ]);
  }, 60_000);

  test("two rows swapped: their contents, or their places (ids)", async () => {
    const a = bySeq(records, 300);
    const c = bySeq(records, 310);
    const contents =
      "at, principal, vault, ingress, method, host, path, service, credential_keys, credential_refs, status, bytes_in, bytes_out, duration_ms, error, contained, approved_by";
    await tampered((db) => {
      db.run(`CREATE TEMP TABLE keep AS SELECT id, ${contents} FROM audit_logs WHERE id IN (${a.id}, ${c.id})`);
      const set = contents
        .split(", ")
        .map((col) => `${col} = (SELECT ${col} FROM keep WHERE keep.id = CASE audit_logs.id WHEN ${a.id} THEN ${c.id} ELSE ${a.id} END)`)
        .join(", ");
      db.run(`UPDATE audit_logs SET ${set} WHERE id IN (${a.id}, ${c.id})`);
    });
    await verifyFails(
      b,
      "alpha",
      `record seq 300 (id ${a.id}): out of order — it holds the contents of record seq 310 (id ${c.id}), and that record holds its contents: the two were swapped`,
    );
    await tampered((db) => {
      db.run(`UPDATE audit_logs SET id = -1 WHERE id = ${a.id}`);
      db.run(`UPDATE audit_logs SET id = ${a.id} WHERE id = ${c.id}`);
      db.run(`UPDATE audit_logs SET id = ${c.id} WHERE id = -1`);
    });
    await verifyFails(
      b,
      "alpha",
      `record seq 300 (id ${c.id}): out of order — it and record seq 310 (id ${a.id}) changed places (each has the other's id): records were swapped`,
    );
  }, 60_000);

  test("the last 10 rows removed after the broker's checkpoint (and the head moved back): truncated, online and offline", async () => {
    const db = new Database(join(pristine, "broker.db"), { readonly: true });
    const signed = db
      .query(`SELECT checkpoint_id AS id, seq FROM audit_checkpoint_vaults WHERE vault_id = ${alpha()} ORDER BY checkpoint_id DESC LIMIT 1`)
      .get() as { id: number; seq: number } | null;
    db.close();
    expect(signed?.seq).toBe(PER_VAULT); // the checkpoint the broker signed at shutdown, or at 1,000 records
    await tampered((db) => {
      db.run(`DELETE FROM audit_logs WHERE vault_id = ${alpha()} AND chain_seq > 490`);
      db.run(`UPDATE audit_chains SET head_seq = 490, head_hash = '${bySeq(records, 490).hash}' WHERE vault_id = ${alpha()}`);
    });
    const message = new RegExp(
      `^error: records seq 491 to 500: missing — removed after checkpoint ${signed!.id} \\(\\S+Z\\), which signed seq 500 \\(the chain ends at record seq 490 \\(id ${bySeq(records, 490).id}\\)\\)$`,
    );
    await verifyFails(b, "alpha", message);
    const exported = await exportJsonl(b, "alpha");
    expect(exported.records).toHaveLength(490);
    await verifyFails(b, "alpha", message, ["--from-export", exported.file, "--public-key", publicKeyFile]);
    // Without the key, offline, the checkpoint cannot be relied on: the edit goes unseen, and the note says why.
    const noKey = await b.cli(["audit", "verify", "--from-export", exported.file]);
    expect(noKey.exitCode).toBe(0);
    expect(noKey.stderr).toMatch(/checkpoints? (was|were) not checked: pass --public-key FILE/);
  }, 60_000);

  test("a forged checkpoint: in the database, or added to an export file", async () => {
    await tampered((db) =>
      db.run(
        `UPDATE audit_checkpoints SET signature = '${"A".repeat(86)}' WHERE id = (SELECT MAX(checkpoint_id) FROM audit_checkpoint_vaults WHERE vault_id = ${alpha()})`,
      ),
    );
    await verifyFails(b, "alpha", /^error: checkpoint \d+ \(\S+Z\): forged — its signature does not verify with the broker's public key$/);
    // A checkpoint line made up for an export file of the untouched log, signed by some other key.
    await tampered(() => {});
    const exported = await exportJsonl(b, "alpha");
    const keys = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const head = { vault_id: alpha(), seq: 500, hash: bySeq(records, 500).hash };
    const fake = { type: "checkpoint", id: 999_999, at: Date.now(), key_id: "0123456789abcdef", heads: [head], signed_heads: [head], signature: "" };
    fake.signature = Buffer.from(await crypto.subtle.sign({ name: "Ed25519" }, keys.privateKey, new TextEncoder().encode("anything"))).toString("base64url");
    const file = `${exported.file}.forged`;
    writeFileSync(file, `${exported.text}${JSON.stringify(fake)}\n`);
    const r = await b.cli(["audit", "verify", "--from-export", file, "--public-key", publicKeyFile]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("checkpoint 999999 (");
    expect(r.stderr).toContain("forged — signed with key 0123456789abcdef, not the broker's key");
  }, 60_000);
});

describe.skipIf(pgMissing)("PostgreSQL", () => {
  let cluster: SharedPgCluster;
  let b: Broker;
  let url: string;
  let records: Row[];
  let betaRecords: Row[];

  beforeAll(async () => {
    cluster = await sharedPgCluster();
    url = await cluster.createDatabase();
    b = await startBroker({ BROKER_DATABASE_URL: url });
  }, 60_000);

  afterAll(async () => {
    await b?.server.stop();
    await cluster?.release();
  });

  async function tampered(statements: string[]): Promise<void> {
    await b.server.stop();
    const sql = new SQL(url);
    try {
      for (const s of statements) await sql.unsafe(s);
    } finally {
      await sql.close();
    }
    await b.start();
  }

  test("1,000 proxied requests across two vaults: verify passes", async () => {
    await proxyMany(b);
    expect(await verifyPasses(b, "alpha")).toStartWith(`verified ${PER_VAULT} records of vault alpha up to seq ${PER_VAULT}`);
    expect(await verifyPasses(b, "beta")).toStartWith(`verified ${PER_VAULT} records of vault beta up to seq ${PER_VAULT}`);
    records = (await exportJsonl(b, "alpha")).records;
    betaRecords = (await exportJsonl(b, "beta")).records;
  }, 120_000);

  test("a changed status, then (the status put back) a deleted row: each named", async () => {
    const alpha = b.vaultIds.alpha!;
    const original = bySeq(records, 41).status;
    await tampered([`UPDATE audit_logs SET status = 500 WHERE vault_id = ${alpha} AND chain_seq = 41`]);
    await verifyFails(b, "alpha", `record seq 41 (id ${bySeq(records, 41).id}): edited — its hash does not match its contents`);
    await tampered([`UPDATE audit_logs SET status = ${original} WHERE vault_id = ${alpha} AND chain_seq = 41`]);
    expect(await verifyPasses(b, "alpha")).toStartWith("verified 500 records");
    await tampered([`DELETE FROM audit_logs WHERE vault_id = ${alpha} AND chain_seq = 100`]);
    await verifyFails(
      b,
      "alpha",
      `record seq 100: missing — deleted; seq 99 (id ${bySeq(records, 99).id}) is followed by record seq 101 (id ${bySeq(records, 101).id})`,
    );
  }, 60_000);
  test("the last 10 rows of the other vault removed after the broker's checkpoint: truncated", async () => {
    const beta = b.vaultIds.beta!;
    const sql = new SQL(url);
    const [signed] = await sql.unsafe(
      `SELECT checkpoint_id AS id, seq FROM audit_checkpoint_vaults WHERE vault_id = ${beta} ORDER BY checkpoint_id DESC LIMIT 1`,
    );
    await sql.close();
    expect(Number(signed.seq)).toBe(PER_VAULT);
    await tampered([
      `DELETE FROM audit_logs WHERE vault_id = ${beta} AND chain_seq > 490`,
      `UPDATE audit_chains SET head_seq = 490, head_hash = '${bySeq(betaRecords, 490).hash}' WHERE vault_id = ${beta}`,
    ]);
    const last = bySeq(betaRecords, 490);
    await verifyFails(
      b,
      "beta",
      new RegExp(
        `^error: records seq 491 to 500: missing — removed after checkpoint ${signed.id} \\(\\S+Z\\), which signed seq 500 \\(the chain ends at record seq 490 \\(id ${last.id}\\)\\)$`,
      ),
    );
  }, 60_000);
});
