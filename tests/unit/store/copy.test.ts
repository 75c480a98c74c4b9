// copyStore (what `broker migrate-db` runs): a realistic SQLite store copied into a fresh PostgreSQL
// database arrives row for row and byte for byte, identity sequences move past the copied ids, a
// non-empty target is refused, a corrupted write rolls everything back, and the copy works as a store.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Secret } from "../../../src/secret.ts";
import { readCatalog, type TableInfo } from "../../../src/store/catalog.ts";
import {
  copyStore,
  CopyMismatch,
  MIGRATIONS,
  openMemoryStore,
  openStore,
  takeCheckpointTurn,
  TargetNotEmpty,
  type Db,
  type Sql,
  type Store,
} from "../../../src/store/index.ts";
import { loadAuditSigningKey, loadCredential, loadRootCa, signCheckpoint, storeCredential, unlockKeyring, type KdfParams } from "../../../src/crypto/index.ts";
import { pgMissing, type SharedPgCluster, sharedPgCluster } from "../../helpers/postgres.ts";

const CHEAP: KdfParams = { alg: "argon2id", iterations: 1, memoryKiB: 1024, parallelism: 1, hashLength: 32 };
const MASTER = new Secret("correct horse battery staple");
const T0 = 1_750_000_000_000;
const bytes = (n: number, seed: number) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);
const CREDENTIALS: Record<string, string> = { API_KEY: "sk-live-0123456789", MULTI_LINE: "line one\nline two\n\u0000end", EMPTY_ISH: " " };

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), "broker-copy-"));
  dirs.push(d);
  return d;
};

/** A store with rows in every table, ids with gaps, password-wrapped keyring, CA and binary ciphertext. */
async function seed(store: Store): Promise<void> {
  const { dataKey } = await unlockKeyring(store, MASTER, { kdf: CHEAP, now: () => T0 });
  await loadRootCa(store, dataKey, T0);
  const owner = await store.users.create({
    email: "owner@example.com",
    passwordHash: bytes(32, 1),
    passwordSalt: bytes(16, 2),
    passwordParams: '{"alg":"argon2id"}',
    role: "owner",
    createdAt: T0,
  });
  const member = await store.users.create({
    email: "naïve@example.com",
    passwordHash: bytes(32, 3),
    passwordSalt: bytes(16, 4),
    passwordParams: "{}",
    role: "member",
    createdAt: T0 + 1,
  });
  const gone = await store.vaults.create("deleted-later", T0);
  const vault = await store.vaults.create("prod ☃", T0 + 2);
  const other = await store.vaults.create("staging", T0 + 3);
  await store.vaults.remove(gone.id); // a gap in the ids, which must survive the copy
  await store.vaults.setUnmatchedHosts(other.id, "deny");
  for (const [key, value] of Object.entries(CREDENTIALS)) await storeCredential(store, dataKey, vault.id, key, new Secret(value), T0 + 5);
  await storeCredential(store, dataKey, other.id, "API_KEY", new Secret("staging-key"), T0 + 6);
  await store.services.put(
    {
      vaultId: vault.id,
      host: "api.example.com",
      description: "Example",
      authType: "bearer",
      authKey: "API_KEY",
      authHeader: null,
      authPrefix: null,
      authUsername: null,
      enabled: true,
    },
    T0,
  );
  await store.services.put(
    {
      vaultId: vault.id,
      host: "*.internal.example",
      description: "",
      authType: "header",
      authKey: "API_KEY",
      authHeader: "x-api-key",
      authPrefix: "Key ",
      authUsername: null,
      enabled: false,
    },
    T0,
  );
  const agent = await store.agents.create({ name: "claude", role: "member", createdBy: owner.id, createdAt: T0 });
  await store.access.setMember(vault.id, owner.id, "admin", T0);
  await store.access.setMember(vault.id, member.id, "member", T0);
  await store.access.setGrant(vault.id, agent.id, "proxy", T0);
  await store.sessions.create({
    publicId: "ses_user",
    tokenHash: "h1",
    kind: "user",
    userId: owner.id,
    agentId: null,
    vaultId: null,
    role: null,
    createdAt: T0,
    expiresAt: T0 + 86_400_000,
    lastSeenAt: T0,
  });
  await store.sessions.create({
    publicId: "ses_agent",
    tokenHash: "h2",
    kind: "agent",
    userId: null,
    agentId: agent.id,
    vaultId: null,
    role: null,
    createdAt: T0,
    expiresAt: null,
    lastSeenAt: T0,
  });
  const scoped = await store.sessions.create({
    publicId: "ses_scoped",
    tokenHash: "h3",
    kind: "scoped",
    userId: owner.id,
    agentId: null,
    vaultId: vault.id,
    role: "proxy",
    createdAt: T0,
    expiresAt: T0 + 1000,
    lastSeenAt: T0,
  });
  await store.sessions.revoke(scoped.id, T0 + 10);
  await store.invites.create({
    publicId: "inv_1",
    tokenHash: "ih1",
    kind: "agent",
    vaultId: vault.id,
    role: "proxy",
    email: null,
    agentName: "codex",
    agentTokenTtlMs: 3_600_000,
    createdBy: owner.id,
    createdAt: T0,
    expiresAt: T0 + 86_400_000,
  });
  await store.invites.create({
    publicId: "inv_2",
    tokenHash: "ih2",
    kind: "vault",
    vaultId: other.id,
    role: "member",
    email: "new@example.com",
    agentName: null,
    agentTokenTtlMs: null,
    createdBy: owner.id,
    createdAt: T0,
    expiresAt: T0 + 86_400_000,
  });
  await store.settings.put("signup", { allowedDomains: ["example.com"] }, T0);
  await store.settings.put("ratelimit", { profile: "loose" }, T0);
  const audit = Array.from({ length: 1234 }, (_, i) => ({
    at: T0 + i,
    principal: i % 2 ? "agent:claude" : "user:owner@example.com",
    vaultId: vault.id,
    vault: vault.name,
    ingress: i % 3 ? "explicit" : "transparent",
    method: "GET",
    host: "api.example.com",
    path: `/v1/items/${i}`,
    service: i % 5 ? "api.example.com" : null,
    credentialKeys: "API_KEY",
    // References (issue 36), as JSON: one with a comma and a pinned version; most rows have none.
    credentialRefs: i % 6 ? null : JSON.stringify(["prod-kv:kv/stripe,eu#api_key (version 3)", "aws:arn:aws:secretsmanager:eu-west-1:1:secret:x"]),
    status: 200 + (i % 3),
    bytesIn: i,
    bytesOut: 2 ** 40 + i,
    durationMs: i % 100,
    error: i % 7 ? null : "upstream_timeout",
    contained: i % 4 === 0,
    approvedBy: i % 9 ? null : "user:1",
  }));
  await store.transaction((tx) => tx.audit.insert(audit));
  // How far an instance's audit journal has reached the database (migration 20).
  await store.transaction(async (tx) => {
    await tx.auditMarks.lock("3f2c8a61-9d0e-4b7a-8c55-0e1f2a3b4c5d");
    await tx.auditMarks.set("3f2c8a61-9d0e-4b7a-8c55-0e1f2a3b4c5d", 412);
  });
  const p = await store.proposals.create({
    vaultId: vault.id,
    message: "need GitHub",
    userMessage: "please",
    services: [{ action: "set", host: "api.github.com", description: "", auth: { type: "bearer", token: "GH_TOKEN" } }],
    credentials: [{ action: "set", key: "GH_TOKEN", description: "", obtain: "", obtain_instructions: "" }],
    createdBy: "agent:claude",
    createdAt: T0,
    expiresAt: T0 + 7 * 86_400_000,
    approvalTokenHash: "ah1",
    approvalExpiresAt: T0 + 86_400_000,
  });
  await store.proposals.create({
    vaultId: vault.id,
    message: "pending one",
    userMessage: "",
    services: [],
    credentials: [],
    createdBy: "agent:claude",
    createdAt: T0,
    expiresAt: T0 + 7 * 86_400_000,
    approvalTokenHash: "ah2",
    approvalExpiresAt: T0 + 86_400_000,
  });
  const held = await store.requestApprovals.create({
    publicId: "apr_AAAAAAAAAAAAAAAA",
    vaultId: vault.id,
    principal: "agent:1",
    fingerprint: "f".repeat(64),
    method: "POST",
    host: "api.stripe.com",
    target: "/v1/refunds?x=1",
    service: "api.stripe.com",
    headers: [["content-type", "application/json"]],
    bodyPreview: '{"charge":"ch_1"}',
    bodyBytes: 17,
    bodySha256: "a".repeat(64),
    createdAt: T0,
    expiresAt: T0 + 900_000,
    sealedNonce: bytes(12, 9),
    sealedDescription: bytes(90, 10),
    viaSession: true,
  });
  await store.requestApprovals.decide(held.id, "approved", owner.id, T0 + 1);
  await store.proposals.decide(p.id, "applied", owner.id, T0 + 100);
  await store.identities.create({ userId: member.id, issuer: "https://idp.example.com", subject: "sub-1", email: member.email, createdAt: T0 });
  await store.identities.putState({
    stateHash: "sh1",
    nonce: "n",
    codeVerifier: "cv",
    purpose: "cli",
    userId: null,
    returnTo: null,
    cliPort: 50123,
    cliNonce: "cn",
    expiresAt: T0 + 600_000,
  });
  await store.identities.putCliCode({ codeHash: "ch1", userId: member.id, cliNonce: "cn", expiresAt: T0 + 60_000 });
  await store.connectStates.put({
    stateHash: "cs1",
    codeVerifier: "cv",
    userId: member.id,
    sessionPublicId: "ses_connect",
    vaultId: vault.id,
    template: "github",
    operations: ["read", "write"],
    expiresAt: T0 + 600_000,
  });
  const hook = await store.webhooks.create({
    vaultId: vault.id,
    url: "https://hooks.example.com/broker",
    format: "slack",
    secretNonce: bytes(12, 7),
    secretCiphertext: bytes(70, 8),
    createdBy: owner.id,
    createdAt: T0,
  });
  await store.webhooks.recordDelivery(hook.id, { status: "delivered", event: "proposal.created", attempts: 2, error: null, at: T0 + 5 });
  const kv = await store.secretStores.create({
    name: "prod-kv",
    kind: "vault",
    vaultId: null,
    settings: JSON.stringify({ kind: "vault", address: "https://vault.example.com:8200", auth: { method: "token" } }),
    secretsNonce: bytes(12, 9),
    secretsCiphertext: bytes(40, 10),
    refreshSeconds: 300,
    graceSeconds: 60,
    createdBy: owner.id,
    createdAt: T0,
  });
  await store.secretStores.share(kv.id, vault.id, null, T0 + 1);
  await store.auditChains.lockHead(vault.id);
  await store.auditChains.setHead(vault.id, 1, "a".repeat(64));
  // The audit signing key (its private half sealed) and a checkpoint of the head above.
  const { signer } = await loadAuditSigningKey(store, dataKey, T0);
  await takeCheckpointTurn(store.db, {
    keyId: signer.keyId,
    now: () => T0 + 3,
    due: () => true,
    sign: (id, at, heads) => signCheckpoint(signer, { id, at, heads }),
  });
  await store.credentials.put({ vaultId: vault.id, key: "FROM_KV", reference: { connection: "prod-kv", path: "apps/x", field: "token" } }, T0 + 2);
  // A store upgraded from before the chain notes where it began (migration 25).
  await store.db.run("INSERT INTO audit_chain_start (id, prechain_max_id) VALUES (1, 7)");
  // A budget and what it counted today (migration 26).
  const budget = await store.budgets.put(
    {
      vaultId: vault.id,
      name: "daily",
      scope: "vault",
      scopeRef: null,
      period: "day",
      limits: { requests: 100, inputTokens: null, outputTokens: null, totalTokens: 5000, costMicros: 2_000_000 },
      softPercent: 80,
      softAction: "notify",
    },
    T0,
  );
  await store.budgets.add(budget.id, T0, { requests: 3, inputTokens: 30, outputTokens: 20, totalTokens: 50, costMicros: 12, unpricedCalls: 0 });
  // A trusted workload issuer, a binding with its agent, and a token id already exchanged (migration 30).
  const issuer = await store.workload.addIssuer({
    name: "github",
    issuer: "https://token.actions.githubusercontent.com",
    jwksUrl: null,
    jwks: null,
    requireJti: false,
    audiences: ["https://broker.example"],
    clockSkewSeconds: 60,
    createdAt: T0,
  });
  const wl = await store.agents.create({ name: "wl-github-deploy", role: "member", createdBy: null, createdAt: T0 });
  await store.workload.addBinding({
    issuerId: issuer.id,
    name: "deploy",
    conditions: { repository: "org/repo", ref: ["refs/heads/main", "refs/tags/v*"] },
    vaultId: vault.id,
    role: "proxy",
    maxSessionSeconds: 900,
    agentId: wl.id,
    createdAt: T0,
  });
  expect(await store.workload.claimJti(issuer.issuer, "run-1", T0 + 600_000, T0)).toBe(true);
}

async function seededFileStore(): Promise<{ dir: string; store: Store }> {
  const dir = tempDir();
  const store = await openStore({ dataDir: dir });
  await seed(store);
  return { dir, store };
}

/** Every row of a table, values normalised (Buffer → Uint8Array), in a collation-free order. */
async function dump(sql: Sql, t: TableInfo): Promise<unknown[][]> {
  const rows = await sql.all<Record<string, unknown>>(`SELECT * FROM "${t.name}"`);
  const norm = rows.map((r) => t.columns.map((c) => (r[c] instanceof Uint8Array ? new Uint8Array(r[c] as Uint8Array) : r[c])));
  const key = (row: unknown[]) => JSON.stringify(row.map((v) => (v instanceof Uint8Array ? [...v] : v)));
  return norm.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

async function expectSameRows(from: Db, to: Db): Promise<number> {
  let tables = 0;
  for (const t of await readCatalog(from, from.dialect)) {
    expect({ table: t.name, rows: await dump(to, t) }).toEqual({ table: t.name, rows: await dump(from, t) });
    tables++;
  }
  return tables;
}

const countAll = async (db: Db) => {
  const out: Record<string, number> = {};
  for (const t of await readCatalog(db, db.dialect)) out[t.name] = Number((await db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM "${t.name}"`))!.n);
  return out;
};

describe("the catalog", () => {
  test("lists every table the migrations create (but not schema_migrations), each with a primary key", async () => {
    using store = await openMemoryStore();
    const created = MIGRATIONS.flatMap((m) => [...m.sql.matchAll(/CREATE TABLE (?:IF NOT EXISTS )?(\w+)/g)].map((x) => x[1]!));
    // A table a later migration replaced and dropped (workload_jtis, migration 33) is not in the catalog.
    const dropped = new Set(MIGRATIONS.flatMap((m) => [...m.sql.matchAll(/DROP TABLE (?:IF EXISTS )?(\w+)/g)].map((x) => x[1]!)));
    const catalog = await readCatalog(store.db, "sqlite");
    expect(catalog.map((t) => t.name).sort()).toEqual([...new Set(created)].filter((t) => !dropped.has(t)).sort());
    for (const t of catalog) expect({ table: t.name, pk: t.primaryKey.length > 0 }).toEqual({ table: t.name, pk: true });
  });

  test("the seeded store has rows in every table (a new table needs a row in seed() to be tested)", async () => {
    const { store } = await seededFileStore();
    const empty = Object.entries(await countAll(store.db)).filter(([, n]) => n === 0);
    store.close();
    expect(empty).toEqual([]);
  });
});

describe("SQLite into SQLite (no PostgreSQL needed)", () => {
  test("copies every row, and a second copy into the same target is refused", async () => {
    const { store: source } = await seededFileStore();
    const target = await openMemoryStore();
    try {
      const report = await copyStore(source.db, target.db, { pageSize: 100 });
      expect(report.tables.every((t) => t.sourceRows === t.targetRows)).toBe(true);
      expect(await expectSameRows(source.db, target.db)).toBe(report.tables.length);
      await expect(copyStore(source.db, target.db)).rejects.toBeInstanceOf(TargetNotEmpty);
    } finally {
      source.close();
      target.close();
    }
  });
});

describe.skipIf(pgMissing)("SQLite into PostgreSQL", () => {
  let cluster: SharedPgCluster;
  beforeAll(async () => {
    cluster = await sharedPgCluster();
  }, 60_000);
  afterAll(() => cluster?.release());

  const openPg = async (url: string) => openStore({ dataDir: tempDir(), database: { url: new Secret(url), poolSize: 2 } });

  test("every row arrives field by field and byte for byte, in one verified transaction", async () => {
    const { store: source } = await seededFileStore();
    const target = await openPg(await cluster.createDatabase());
    try {
      const report = await copyStore(source.db, target.db, { pageSize: 97 });
      const counts = await countAll(source.db);
      expect(Object.fromEntries(report.tables.map((t) => [t.table, t.sourceRows]))).toEqual(counts);
      expect(Object.fromEntries(report.tables.map((t) => [t.table, t.targetRows]))).toEqual(counts);
      expect(counts.audit_logs).toBe(1234);
      // Parents first: every table comes after the tables it references.
      const order = report.tables.map((t) => t.table);
      expect(order.indexOf("users")).toBeLessThan(order.indexOf("sessions"));
      expect(order.indexOf("agents")).toBeLessThan(order.indexOf("sessions"));
      expect(order.indexOf("vaults")).toBeLessThan(order.indexOf("credentials"));
      expect(await expectSameRows(source.db, target.db)).toBe(Object.keys(counts).length);
      const vault = (await source.vaults.byName("prod ☃"))!;
      expect((await target.credentials.get(vault.id, "API_KEY"))!.ciphertext).toEqual((await source.credentials.get(vault.id, "API_KEY"))!.ciphertext);
      expect(await target.keyring.get()).toEqual(await source.keyring.get());
    } finally {
      source.close();
      target.close();
    }
  });

  test("identity sequences move past the copied ids: new rows get fresh ids", async () => {
    const { store: source } = await seededFileStore();
    const url = await cluster.createDatabase();
    const target = await openPg(url);
    try {
      await copyStore(source.db, target.db);
      const identities = (await readCatalog(target.db, "postgres")).filter((t) => t.identity);
      expect(identities.map((t) => t.name)).toContain("audit_logs");
      for (const t of identities) {
        const max = Number((await target.db.get<{ m: number }>(`SELECT COALESCE(MAX(id), 0) AS m FROM "${t.name}"`))!.m);
        const next = Number((await target.db.get<{ n: number }>("SELECT nextval(pg_get_serial_sequence(?, 'id')) AS n", [t.name]))!.n);
        expect({ table: t.name, fresh: next > max }).toEqual({ table: t.name, fresh: true });
      }
      const maxVault = Math.max(...(await source.vaults.list()).map((v) => v.id));
      expect((await target.vaults.create("after-the-move", T0)).id).toBeGreaterThan(maxVault);
    } finally {
      source.close();
      target.close();
    }
  });

  test("the copy works as a store: the same master password unlocks it and credentials decrypt", async () => {
    const { store: source } = await seededFileStore();
    const url = await cluster.createDatabase();
    const first = await openPg(url);
    await copyStore(source.db, first.db);
    first.close();
    const target = await openStore({ dataDir: tempDir(), database: { url: new Secret(url), poolSize: 2 } });
    try {
      const { dataKey, mode } = await unlockKeyring(target, MASTER);
      expect(mode).toBe("password");
      const vault = (await target.vaults.byName("prod ☃"))!;
      for (const [key, value] of Object.entries(CREDENTIALS)) expect((await loadCredential(target, dataKey, vault.id, key))?.reveal()).toBe(value);
      expect((await target.credentials.get(vault.id, "API_KEY"))!.ciphertext).toEqual((await source.credentials.get(vault.id, "API_KEY"))!.ciphertext);
      const ca = await loadRootCa(target, dataKey, T0);
      expect(ca.certPem).toBe((await source.ca.active())!.certPem);
      await expect(unlockKeyring(target, new Secret("wrong password"))).rejects.toThrow();
    } finally {
      source.close();
      target.close();
    }
  });

  test("a target with data is refused and left as it was", async () => {
    const { store: source } = await seededFileStore();
    const target = await openPg(await cluster.createDatabase());
    try {
      await target.settings.put("already", true, T0);
      const err = await copyStore(source.db, target.db).catch((e) => e);
      expect(err).toBeInstanceOf(TargetNotEmpty);
      expect((err as TargetNotEmpty).table).toBe("settings");
      expect(Object.values(await countAll(target.db)).reduce((a, b) => a + b, 0)).toBe(1);
    } finally {
      source.close();
      target.close();
    }
  });

  test("a value altered on the way in fails verification and rolls the whole copy back", async () => {
    const { store: source } = await seededFileStore();
    const target = await openPg(await cluster.createDatabase());
    try {
      const err = await copyStore(source.db, flipCiphertextByte(target.db)).catch((e) => e);
      expect(err).toBeInstanceOf(CopyMismatch);
      expect((err as CopyMismatch).table).toBe("credentials");
      expect(Object.values(await countAll(target.db)).every((n) => n === 0)).toBe(true);
    } finally {
      source.close();
      target.close();
    }
  });
});

/** A Db whose transactions corrupt one byte of each credential ciphertext they insert. */
function flipCiphertextByte(db: Db): Db {
  const tamper = (tx: Sql): Sql => ({
    all: (s, p) => tx.all(s, p),
    get: (s, p) => tx.get(s, p),
    run: (s, p) => {
      if (!s.startsWith('INSERT INTO "credentials"') || !p) return tx.run(s, p);
      const params = p.map((v) => (v instanceof Uint8Array && v.length > 12 ? Uint8Array.from(v, (b, i) => (i === 0 ? b ^ 1 : b)) : v));
      return tx.run(s, params);
    },
  });
  return { ...db, transaction: (fn) => db.transaction((tx) => fn(tamper(tx))) };
}
