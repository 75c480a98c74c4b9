// Attacks on the audit log's hash chain, checkpoints, export and telemetry (issue 37, docs/audit-chain.md), against
// an in-process broker on SQLite. The attacker has write access to the database (the threat the chain exists for):
// it recomputes hashes, moves heads and anchors, adds a signing key of its own and re-signs checkpoints; or it is an
// agent choosing paths, trace headers and userinfo. Each test is a defence that holds; a comment says which hole an
// earlier attack found and what closed it.

import { beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ocsfApiActivity } from "../../src/cli/commands/audit-ocsf.ts";
import { auditKeyId, checkpointMessage, spkiToPem, type ChainVerification, type ExportedAuditRecord, UNSIGNED_GRACE_MS } from "../../src/crypto/index.ts";
import type { Store } from "../../src/store/index.ts";
import { startOtlpReceiver, type OtlpReceiver } from "../helpers/otlp-receiver.ts";
import { createTestPki } from "../helpers/pki.ts";
import { startUpstream } from "../helpers/upstream.ts";
import { brokerVerify, checkpointed, exportVerify, headSeq, rewriteFrom, rows, send as sendRequests, until, useAuditLabs, type AuditLab } from "./audit-lab.ts";
import { sourceCli } from "./cli-from-source.ts";
import { rawRequest } from "./proxy-fixture.ts";
import { openTunnel } from "./tunnel-fixture.ts";

const SECRET = `sk-attack-${crypto.randomUUID()}`;
const QUERY = `q-attack-${crypto.randomUUID()}`;
/** A checkpoint every this many records (and none by time during a test). */
const EVERY = 20;

const { lab, cleanups, upstream } = useAuditLabs({ every: EVERY, secret: SECRET });
/** `n` proxied GETs, each with the query sentinel. */
const send = (l: AuditLab, n: number, tag = "r") => sendRequests(l, n, tag, `token=${QUERY}`);

/** EVERY records, the checkpoint that signs exactly them, then `more` records no checkpoint signs. */
async function signedThenMore(l: AuditLab, more: number): Promise<void> {
  await send(l, EVERY);
  await checkpointed(l, EVERY);
  if (more) await send(l, more);
}

/**
 * The attacker's own Ed25519 key, added as the newest signing key row (the one signingKey() returns), and every
 * checkpoint re-signed with it over the rewritten heads. Returns the forged key's PEM.
 */
async function forgeKeyAndResign(l: AuditLab, hashes: Map<number, string>): Promise<string> {
  const pair = (await crypto.subtle.generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const spki = new Uint8Array(await crypto.subtle.exportKey("spki", pair.publicKey));
  const pem = spkiToPem(spki);
  const keyId = auditKeyId(spki);
  await l.store.db.run("INSERT INTO audit_signing_keys (id, key_id, public_key_pem, private_nonce, private_ciphertext, created_at) VALUES (2, ?, ?, ?, ?, ?)", [
    keyId,
    pem,
    new Uint8Array(12),
    new Uint8Array(48),
    Date.now(),
  ]);
  for (const c of await l.store.auditCheckpoints.list(0, 1000)) {
    const heads = c.heads.map((h) => (h.vaultId === l.vaultId ? { ...h, hash: hashes.get(h.seq)! } : h));
    const signature = Buffer.from(
      await crypto.subtle.sign({ name: "Ed25519" }, pair.privateKey, new Uint8Array(checkpointMessage({ id: c.id, at: c.at, keyId, heads }))),
    ).toString("base64url");
    await l.store.db.run("UPDATE audit_checkpoints SET key_id = ?, heads = ?, signature = ? WHERE id = ?", [
      keyId,
      JSON.stringify(heads.map((h) => [h.vaultId, h.seq, h.hash])),
      signature,
      c.id,
    ]);
    for (const h of heads)
      if (h.vaultId === l.vaultId)
        await l.store.db.run("UPDATE audit_checkpoint_vaults SET hash = ? WHERE checkpoint_id = ? AND vault_id = ?", [h.hash, c.id, h.vaultId]);
  }
  return pem;
}

/** One retention batch removing the `n` oldest audit rows, as the broker runs it (its worker thread on SQLite). */
async function retentionRemoves(l: AuditLab, n: number): Promise<number> {
  const b = await l.store.db.get<{ lowest: number; highest: number }>("SELECT MIN(id) AS lowest, MAX(id) AS highest FROM audit_logs");
  const keepRows = Number(b!.highest) - Number(b!.lowest) + 1 - n;
  return prune(l, { olderThan: 0, keepRows });
}

/** One retention batch with these limits, run where the broker runs it (its worker thread on SQLite); rows removed. */
async function prune(l: AuditLab, limits: { olderThan: number; keepRows: number }): Promise<number> {
  return (await l.broker.server.pruneAudit(limits, 1000)).removed;
}

describe("tampering with the database", () => {
  test("a chain recomputed from an edited record onward (head moved too) is named 'rewritten' at the checkpoint signed after the edit", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    expect((await brokerVerify(l)).ok).toBe(true);
    // Every hash is consistent and the head row agrees: only the signed checkpoint at seq EVERY can tell.
    await rewriteFrom(l, 5, { status: 500 });
    const own = await brokerVerify(l);
    expect(own.ok).toBe(false);
    expect(own.breaks[0]).toMatchObject({ kind: "rewritten", seq: EVERY });
    const cli = await exportVerify(l);
    expect(cli.breaks[0]).toMatchObject({ kind: "rewritten", seq: EVERY });
  }, 60_000);

  test("the same rewrite after the last checkpoint is unseen (docs/audit-chain.md says so): only a later checkpoint bounds it", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    await rewriteFrom(l, EVERY + 2, { status: 500 });
    expect((await brokerVerify(l)).ok).toBe(true);
    expect((await exportVerify(l)).ok).toBe(true);
  }, 60_000);

  // Proposed fix: verifyStored (src/workflows/audit-export.ts) must check checkpoints with the key this instance
  // loaded and opened at start (deps.auditKey, the one GET /v1/audit/public-key publishes), never with
  // store.auditCheckpoints.signingKey(): a key row anyone with database access can add is not a trust root. (A key
  // row other than the loaded one could also be reported as tampering of its own.)
  test("the broker's own verification does not trust a signing key added to the database, so a rewritten chain with re-signed checkpoints is 'verified'", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    expect((await brokerVerify(l)).ok).toBe(true);
    const hashes = await rewriteFrom(l, 5, { status: 500 });
    await forgeKeyAndResign(l, hashes);
    const own = await brokerVerify(l);
    expect({ ok: own.ok, first: own.breaks[0]?.kind }).toEqual({ ok: false, first: "forged_checkpoint" });
  }, 60_000);

  test("that forgery is named by `broker audit verify` online (the key the broker loaded at start) and offline with the operator's saved key", async () => {
    const l = await lab();
    const home = mkdtempSync(join(tmpdir(), "broker-audit-attacks-cli-"));
    cleanups.push(async () => rmSync(home, { recursive: true, force: true }));
    const { cli, ok } = sourceCli(() => ({ home, apiUrl: l.broker.apiUrl }), []);
    await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
    await signedThenMore(l, 5);
    const savedKey = join(home, "audit-key.pem");
    writeFileSync(savedKey, (await l.broker.api("GET", "/v1/audit/public-key")).body.public_key_pem);
    const hashes = await rewriteFrom(l, 5, { status: 500 });
    const forgedPem = await forgeKeyAndResign(l, hashes);
    // The published key is the one loaded at start, not the row the attacker added.
    expect((await l.broker.api("GET", "/v1/audit/public-key")).body.public_key_pem).not.toBe(forgedPem);
    const online = await cli(["audit", "verify", "--vault", l.vault]);
    expect(online.code).toBe(1);
    expect(online.stderr).toMatch(/^error: checkpoint \d+ \(\S+\): forged — signed with key [0-9a-f]{16}, not the broker's key/);
    const file = join(home, "export.jsonl");
    await ok(["audit", "export", "--vault", l.vault, "--output", file]);
    const offline = await cli(["audit", "verify", "--from-export", file, "--public-key", savedKey]);
    expect(offline.code).toBe(1);
    expect(offline.stderr).toContain("forged — signed with key");
    // With the forged key as the "public key", the forgery verifies: the key must come from outside the database.
    const forgedFile = join(home, "forged.pem");
    writeFileSync(forgedFile, forgedPem);
    expect((await cli(["audit", "verify", "--from-export", file, "--public-key", forgedFile])).code).toBe(0);
  }, 90_000);

  // Found by an earlier attack: retention legitimately removes a prefix and moves the anchor, so anyone with database
  // access could do the same to any prefix and every verifier accepted it. Closed: retention signs each anchor it
  // moves (migration 25, store/audit-anchors.ts), and an anchor above the genesis without that signature is named.
  test("a prefix of the log (every record a checkpoint signed seconds ago) deleted with the anchor moved over it: 'anchor (seq N): not signed'", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    const kept = (await rows(l)).find((r) => r.chainSeq === EVERY)!;
    await l.store.db.run("DELETE FROM audit_logs WHERE vault_id = ? AND chain_seq <= ?", [l.vaultId, EVERY]);
    await l.store.db.run("UPDATE audit_chains SET anchor_seq = ?, anchor_hash = ? WHERE vault_id = ?", [EVERY, kept.chainHash!, l.vaultId]);
    const cli = await exportVerify(l);
    const own = await brokerVerify(l);
    expect({ cli: cli.breaks[0]?.message, broker: own.breaks[0]?.message }).toEqual({
      cli: `anchor (seq ${EVERY}): not signed — records up to it are gone, and no signature by the broker's key says retention removed them`,
      broker: `anchor (seq ${EVERY}): not signed — records up to it are gone, and no signature by the broker's key says retention removed them`,
    });
    // Retention after it does not sign on from the attacker's anchor: the anchor it moves stays unsigned, and it says so.
    await send(l, EVERY, "more");
    await checkpointed(l, 2 * EVERY);
    expect(await prune(l, { olderThan: 0, keepRows: 3 })).toBeGreaterThan(0);
    expect((await l.store.auditChains.get(l.vaultId))!.anchorSignature).toBeNull();
    expect((await exportVerify(l)).breaks[0]).toMatchObject({ kind: "anchor" });
  }, 60_000);

  test("honest retention signs the anchor, and the signature holds only where it was made", async () => {
    const l = await lab({ env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "1" } });
    await send(l, 10);
    await checkpointed(l, 10);
    expect(await prune(l, { olderThan: 0, keepRows: 4 })).toBe(6);
    const signed = (await l.store.auditChains.get(l.vaultId))!;
    expect({ seq: signed.anchorSeq, signature: signed.anchorSignature }).toEqual({ seq: 6, signature: expect.stringMatching(/^[A-Za-z0-9_-]{86}$/) });
    expect((await exportVerify(l)).ok).toBe(true);
    expect((await brokerVerify(l)).ok).toBe(true);
    // Its signature moved to another point (the next record kept, deleted with it) no longer holds.
    const next = (await rows(l))[0]!;
    await l.store.db.run("DELETE FROM audit_logs WHERE id = ?", [next.id]);
    await l.store.db.run("UPDATE audit_chains SET anchor_seq = ?, anchor_hash = ? WHERE vault_id = ?", [next.chainSeq!, next.chainHash!, l.vaultId]);
    expect((await exportVerify(l)).breaks[0]?.message).toBe(
      `anchor (seq ${next.chainSeq}): forged — its signature does not verify with the broker's public key`,
    );
  }, 60_000);

  // Found by an earlier attack: the checkpoints live in the same database as the records; deleted with them, every
  // edit before "the last checkpoint" became an edit after it, and every verifier passed with "0 checkpoints
  // checked". Closed three ways: the broker remembers the last checkpoint it made for each vault and names it
  // deleted; the export publishes the checkpoint interval, and a record older than twice it (plus a grace) that no
  // checkpoint signs is named 'unsigned' (the broker signs every record within the interval of writing it, at once
  // when it is written late); and `broker audit verify --checkpoints FILE` takes the copies delivered to webhooks.
  test("every checkpoint deleted and the chain rewritten: named by the broker's memory at once, and 'unsigned' once the records are older than the interval allows", async () => {
    const l = await lab({ env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "1000", BROKER_AUDIT_CHECKPOINT_SECONDS: "1" } });
    await send(l, 10);
    await checkpointed(l, 10);
    expect((await exportVerify(l)).checkpoints).toBeGreaterThan(0);
    const saved = (await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/checkpoints?limit=1000`, undefined, l.broker.userToken)).body;
    await rewriteFrom(l, 3, { status: 500 });
    await l.store.db.run("DELETE FROM audit_checkpoints");
    const own = await brokerVerify(l);
    expect(own.breaks.map((b) => b.kind)).toContain("deleted_checkpoint");
    expect(own.breaks.find((b) => b.kind === "deleted_checkpoint")!.message).toMatch(
      /^checkpoint \d+ \(\S+\): deleted — this broker's memory of the checkpoints it made holds it \(it signed seq 10\), the broker's database does not$/,
    );
    // Whoever kept a copy (here the checkpoints answer saved before; a webhook's deliveries alike) sees the rewrite.
    const outside = await exportVerify(l, { outside: [{ source: "saved.json", checkpoints: saved.checkpoints }] });
    expect(outside.breaks.map((b) => b.kind)).toEqual(expect.arrayContaining(["rewritten", "deleted_checkpoint"]));
    // Without any copy: once the broker wrote them longer ago than the interval plus the grace, no checkpoint signing them means deletion.
    await Bun.sleep(1000 + UNSIGNED_GRACE_MS + 500);
    const cli = await exportVerify(l);
    expect(cli.breaks[0]).toMatchObject({ kind: "unsigned", seq: 1 });
  }, 60_000);

  // Proposed fix: verifyStored (src/workflows/audit-export.ts) reads the vault's chained records from seq 0, as the
  // export does (exportAuditChain's first page starts after seq 0, not after the anchor), so a record kept at or below
  // the anchor is named ("at or below the anchor") rather than skipped; those records are still listed by the Logs
  // page the "verified up to" is shown on.
  test("the broker's own verification reads records kept at or below a moved anchor, so an edit there is 'verified'", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    const at10 = (await rows(l)).find((r) => r.chainSeq === 10)!;
    await l.store.db.run("UPDATE audit_chains SET anchor_seq = 10, anchor_hash = ? WHERE vault_id = ?", [at10.chainHash!, l.vaultId]);
    await l.store.db.run("UPDATE audit_logs SET status = 500, path = '/edited' WHERE vault_id = ? AND chain_seq = 3", [l.vaultId]);
    // The edited record is still on the Logs page.
    expect((await l.broker.auditLogs()).some((r: { path: string }) => r.path === "/edited")).toBe(true);
    // The export-based verification reads every record and names the first one below the anchor.
    const cli = await exportVerify(l);
    expect(cli.breaks[0]).toMatchObject({ kind: "anchor", seq: 1 });
    const own = await brokerVerify(l);
    expect({ ok: own.ok, first: own.breaks[0]?.kind }).toEqual({ ok: false, first: "anchor" });
  }, 60_000);

  test("a whole vault's chain deleted (records and chain row) is named 'truncated' by its checkpoints", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    await l.store.db.run("DELETE FROM audit_logs WHERE vault_id = ?", [l.vaultId]);
    await l.store.db.run("DELETE FROM audit_chains WHERE vault_id = ?", [l.vaultId]);
    const own = await brokerVerify(l);
    expect(own.breaks[0]).toMatchObject({ kind: "truncated", seq: 1 });
    expect((await exportVerify(l)).breaks[0]).toMatchObject({ kind: "truncated", seq: 1 });
  }, 60_000);

  test("the anchor moved to a checkpoint's seq with another hash: 'rewritten'; records stripped of chain fields after the chain began: 'inserted'", async () => {
    const l = await lab();
    await signedThenMore(l, 5);
    await l.store.db.run("DELETE FROM audit_logs WHERE vault_id = ? AND chain_seq <= ?", [l.vaultId, EVERY]);
    await l.store.db.run("UPDATE audit_chains SET anchor_seq = ?, anchor_hash = ? WHERE vault_id = ?", [EVERY, "f".repeat(64), l.vaultId]);
    const kinds = (await exportVerify(l)).breaks.map((b) => b.kind);
    expect(kinds).toContain("rewritten");
    const l2 = await lab();
    await send(l2, 10);
    await l2.store.db.run("UPDATE audit_logs SET chain_seq = NULL, chain_prev = NULL, chain_hash = NULL WHERE vault_id = ? AND chain_seq = 5", [l2.vaultId]);
    const v = await exportVerify(l2);
    expect(v.breaks.map((b) => b.kind)).toEqual(["missing", "inserted"]);
  }, 60_000);
});

describe("retention during verification", () => {
  // Found by an earlier attack: records retention removed between the anchor's read and the records' were reported
  // as deleted, and an export page read while retention moved the anchor held records below it. Closed: the anchor
  // is read again after each page, and the verifier goes on from the newer anchor (signed by retention, so it is
  // taken as retention's), leaving out the records retention removed meanwhile.
  test("records retention removes between the anchor's read and the records' are not reported as deleted", async () => {
    const l = await lab();
    await send(l, 40);
    await checkpointed(l, EVERY);
    const audit = l.store.audit as { unchained: Store["audit"]["unchained"] };
    const unchained = audit.unchained;
    let removed = 0;
    audit.unchained = async (...args) => {
      removed += await retentionRemoves(l, 2); // retention's next batch lands here
      return unchained(...args);
    };
    try {
      const own = await brokerVerify(l);
      expect(removed).toBeGreaterThan(0);
      expect({ ok: own.ok, breaks: own.breaks.map((b) => b.message) }).toEqual({ ok: true, breaks: [] });
    } finally {
      audit.unchained = unchained;
    }
  }, 60_000);

  test("an export page read while retention moves the anchor leaves out the records it removed; verification passes", async () => {
    const l = await lab();
    await send(l, 40);
    await checkpointed(l, EVERY);
    const audit = l.store.audit as { chained: Store["audit"]["chained"] };
    const chained = audit.chained;
    audit.chained = async (...args) => {
      const read = await chained(...args);
      await retentionRemoves(l, 2); // retention's next batch lands here
      return read;
    };
    let v: ChainVerification;
    try {
      v = await exportVerify(l);
    } finally {
      audit.chained = chained;
    }
    expect({ ok: v.ok, breaks: v.breaks.map((b) => b.message) }).toEqual({ ok: true, breaks: [] });
  }, 60_000);

  test("a long request's record (an old `at`, written after younger ones) is kept until they go: retention stays a prefix, the chain verifies", async () => {
    const slow = await startUpstream((req, res) => {
      setTimeout(() => res.end("ok"), req.url?.startsWith("/slow") ? 1500 : 0);
    });
    cleanups.push(() => slow.close());
    const l = await lab({ upstream: slow, env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "1" } });
    const long = l.broker.proxy(l.hp, "/slow").then(async (r) => {
      await r.arrayBuffer();
      return r.status;
    });
    await Bun.sleep(300);
    await send(l, 6, "young");
    expect(await long).toBe(200);
    await until("7 records", async () => (await headSeq(l)) >= 7);
    await checkpointed(l, 7); // retention removes only records a checkpoint signs
    const all = await rows(l);
    const slowRow = all.find((r) => r.path === "/slow")!;
    const young = all.filter((r) => r.path !== "/slow");
    expect(slowRow.id).toBeGreaterThan(Math.max(...young.map((r) => r.id))); // written last
    expect(slowRow.at).toBeLessThan(Math.min(...young.map((r) => r.at))); // but began first
    // Age retention with a limit between the long request's start and the young ones': nothing may go yet.
    expect(await prune(l, { olderThan: slowRow.at + 1, keepRows: 1_000_000 })).toBe(0);
    // Old enough for all: all go, and the anchor is the last record's (its seq, by id).
    expect(await prune(l, { olderThan: Date.now() + 1000, keepRows: 1_000_000 })).toBe(7);
    const chain = await l.store.auditChains.get(l.vaultId);
    expect({ anchor: chain!.anchorSeq, hash: chain!.anchorHash }).toEqual({ anchor: slowRow.chainSeq!, hash: slowRow.chainHash! });
    await send(l, 2, "after");
    expect(await brokerVerify(l)).toMatchObject({ ok: true, records: 2 });
    expect((await exportVerify(l)).ok).toBe(true);
  }, 60_000);

  test("heavy retention by the row cap between requests keeps the chain verifiable (anchor, checkpoints below it)", async () => {
    const l = await lab({ env: { BROKER_AUDIT_CHECKPOINT_RECORDS: "1" } });
    for (let round = 0; round < 4; round++) {
      await send(l, 25, `round${round}`);
      await checkpointed(l, 25 * (round + 1)); // retention removes only records a checkpoint signs
      expect(await retentionRemoves(l, 15)).toBe(15);
    }
    await checkpointed(l, 4 * 25);
    const chain = await l.store.auditChains.get(l.vaultId);
    expect(chain!.anchorSeq).toBe(60);
    expect(await brokerVerify(l)).toMatchObject({ ok: true, records: 40 });
    expect((await exportVerify(l)).ok).toBe(true);
  }, 60_000);
});

describe("who may read the chain", () => {
  test("a proxy-role session and a session of another vault get no export, verification or checkpoints; signed_heads carry no names", async () => {
    const l = await lab();
    await send(l, EVERY);
    await checkpointed(l, EVERY);
    const { broker } = l;
    await broker.api("POST", "/v1/vaults", { name: "other-vault" }, broker.userToken);
    const otherAdmin = (await broker.api("POST", "/v1/sessions", { vault: "other-vault", role: "admin" }, broker.userToken)).body.token as string;
    for (const path of ["audit/export", "audit/verify", "audit/checkpoints"]) {
      for (const token of [broker.sessionToken, otherAdmin]) {
        const r = await broker.api("GET", `/v1/vaults/${l.vault}/${path}`, undefined, token);
        expect({ path, refused: r.status === 403 || r.status === 404 }).toEqual({ path, refused: true });
        expect(r.body.records ?? r.body.checkpoints ?? r.body.breaks).toBeUndefined();
      }
      const anonymous = await broker.api("GET", `/v1/vaults/${l.vault}/${path}`);
      expect(anonymous.status).toBe(401);
    }
    const cps = (await broker.api("GET", `/v1/vaults/${l.vault}/audit/checkpoints`, undefined, broker.userToken)).body.checkpoints;
    expect(cps.length).toBeGreaterThan(0);
    for (const c of cps) for (const h of c.signed_heads) expect(Object.keys(h).sort()).toEqual(["hash", "seq", "vault_id"]);
  }, 60_000);
});

describe("what leaves the broker: the export, OCSF and OTLP", () => {
  let collector: OtlpReceiver;
  let l: AuditLab;
  let brokerCa: string;
  const PATH_SECRET = `pathcred${crypto.randomUUID().replaceAll("-", "")}`;
  const QUERY_SECRET = `querycred${crypto.randomUUID().replaceAll("-", "")}`;
  const HEADER = `hdr-${crypto.randomUUID()}`;
  const BODY = `body-${crypto.randomUUID()}`;
  const USERINFO = `ui${crypto.randomUUID().replaceAll("-", "")}`;
  const FRAGMENT = `frag-${crypto.randomUUID()}`;
  const agentTrace = "4bf92f3577b34da6a3ce929d0e0e4736";

  beforeAll(async () => {
    collector = await startOtlpReceiver(await createTestPki());
    cleanups.push(() => collector.close());
    l = await lab({
      caPem: `${upstream().pki.caPem}\n${collector.pki.caPem}`,
      tunnel: true,
      env: { BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: collector.url },
    });
    // 'path' auth puts the credential in the path, 'query' auth in the query: neither may reach a record.
    await l.broker.setCredential("PATH_KEY", PATH_SECRET);
    await l.broker.setCredential("QUERY_KEY", QUERY_SECRET);
    await l.broker.addService(`127.0.0.1:${upstream().port}`, { type: "path", token: "PATH_KEY", template: "/bot{value}" });
    await l.broker.addService(`localhost:${upstream().port}`, { type: "query", token: "QUERY_KEY", param: "key" });
    brokerCa = await (await fetch(`${l.broker.apiUrl}/v1/ca.pem`)).text();
  }, 60_000);

  test("no credential (bearer, path, query), query string, fragment, userinfo, header value or body in any exported field", async () => {
    const before = upstream().received.length;
    const init = (extra: Record<string, string> = {}) => ({
      method: "POST",
      body: BODY,
      headers: { "x-custom": HEADER, traceparent: `00-${agentTrace}-00f067aa0ba902b7-01`, ...extra },
    });
    for (const [hp, path] of [
      // %3F is a path character, not a query: the record keeps it as the path (the upstream reads it so too).
      [l.hp, `/bearer/a%3Fb=1;jsessionid=2?token=${QUERY}&x=${QUERY}`],
      [`127.0.0.1:${upstream().port}`, `/getMe?token=${QUERY}`],
      [`localhost:${upstream().port}`, `/search?key=${QUERY}&q=${QUERY}`],
    ] as const) {
      const res = await l.broker.proxy(hp, path, init());
      await res.arrayBuffer();
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
    }
    // The credentials were placed upstream (so the sentinels are live), and the agent's own key= value replaced.
    const sent = upstream()
      .received.slice(before)
      .map((r) => r.url);
    expect(sent.some((u) => u.includes(`/bot${PATH_SECRET}/getMe`))).toBe(true);
    expect(sent.some((u) => u.includes(`key=${QUERY_SECRET}`))).toBe(true);
    // In the tunnel: an absolute-form target with userinfo, and the same userinfo as a Basic Authorization header.
    const { conn } = await openTunnel(
      Number(l.broker.proxyAddress!.split(":").at(-1)),
      `upstream.test:${upstream().port}`,
      `Basic ${Buffer.from(`${l.broker.sessionToken}:${l.vault}`).toString("base64")}`,
      { ca: brokerCa },
    );
    conn.write(
      `GET https://user:${USERINFO}@upstream.test:${upstream().port}/tunnel/x?${QUERY}=1 HTTP/1.1\r\nHost: upstream.test:${upstream().port}\r\nX-Custom: ${HEADER}\r\nAuthorization: Basic ${Buffer.from(`user:${USERINFO}`).toString("base64")}\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
    );
    expect((await conn.readResponse()).status).toBe(200);
    conn.close();
    // A fragment sent on the wire (clients strip it; a hostile agent need not).
    const raw = await rawRequest(
      l.broker.apiUrl,
      new TextEncoder().encode(
        `GET /proxy/${l.hp}/frag#${FRAGMENT}?${QUERY} HTTP/1.1\r\nHost: ${new URL(l.broker.apiUrl).host}\r\nAuthorization: Bearer ${l.broker.sessionToken}\r\nConnection: close\r\n\r\n`,
      ),
    );
    expect(raw.toString("latin1")).toMatch(/^HTTP\/1\.1 \d{3}/);

    await until("5 records", async () => (await headSeq(l)) >= 5);
    const page = (await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/export`, undefined, l.broker.userToken)).body;
    const records = page.records as ExportedAuditRecord[];
    expect(records.map((r) => r.path)).toContain("/getMe"); // the agent's path, not the one with the credential placed
    expect(records.map((r) => r.path)).toContain("/tunnel/x");
    expect(records.map((r) => r.path)).toContain("/frag"); // the fragment and what follows it dropped
    const ocsf = records.map((r) => JSON.stringify(ocsfApiActivity(r, page.vault_id, page.principal_names)));
    await until("spans and log records", async () => collector.spans().length >= 4 && collector.logs().length >= 5);
    await Bun.sleep(500);
    const otlp = collector.exports.map((e) => `${Buffer.from(e.raw).toString("latin1")}\n${JSON.stringify(e.body)}`);
    const cps = JSON.stringify((await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/checkpoints`, undefined, l.broker.userToken)).body);
    const sentinels = [SECRET, PATH_SECRET, QUERY_SECRET, QUERY, HEADER, BODY, USERINFO, FRAGMENT, l.broker.sessionToken, l.broker.userToken];
    const where = { export: JSON.stringify(page), ocsf: ocsf.join("\n"), otlp: otlp.join("\n"), checkpoints: cps, logs: l.broker.logLines.join("\n") };
    const found: string[] = [];
    for (const [name, text] of Object.entries(where)) for (const s of sentinels) if (text.includes(s)) found.push(`${name} holds ${s.slice(0, 12)}…`);
    expect(found).toEqual([]);
    // The OTLP request to the collector was a plain HTTPS request: its headers carry nothing of the agent's.
    for (const e of collector.exports) for (const [, v] of e.headers) for (const s of sentinels) expect(v).not.toContain(s);
  }, 60_000);

  test("the agent's trace headers: junk, oversized, repeated or stuffed with header text never reach the upstream as such", async () => {
    const cases: { name: string; headers: [string, string][]; joins: boolean }[] = [
      { name: "valid", headers: [["traceparent", `00-${agentTrace}-00f067aa0ba902b7-01`]], joins: true },
      { name: "junk", headers: [["traceparent", "00-zzzz-yyyy-01"]], joins: false },
      { name: "oversized", headers: [["traceparent", `00-${agentTrace}-00f067aa0ba902b7-01${"-x".repeat(4000)}`]], joins: false },
      {
        name: "future version with extra fields",
        headers: [["traceparent", `cc-${agentTrace}-00f067aa0ba902b7-01-evil: injected`]],
        joins: true,
      },
      {
        name: "repeated",
        headers: [
          ["traceparent", `00-${agentTrace}-00f067aa0ba902b7-01`],
          ["traceparent", `00-${"1".repeat(32)}-${"2".repeat(16)}-01`],
        ],
        joins: false,
      },
      {
        name: "tracestate with header text and an oversized one",
        headers: [
          ["traceparent", `00-${agentTrace}-00f067aa0ba902b7-01`],
          ["tracestate", "good=1,evil: x-injected=1, bad key=2,x-broker-vault=other"],
        ],
        joins: true,
      },
      {
        name: "oversized tracestate",
        headers: [
          ["traceparent", `00-${agentTrace}-00f067aa0ba902b7-01`],
          ["tracestate", `a=${"b".repeat(600)}`],
        ],
        joins: true,
      },
    ];
    for (const c of cases) {
      const before = upstream().received.length;
      const h = new Headers();
      for (const [k, v] of c.headers) h.append(k, v);
      const res = await l.broker.proxy(l.hp, `/trace/${encodeURIComponent(c.name)}`, { headers: h });
      await res.arrayBuffer();
      expect({ c: c.name, status: res.status }).toEqual({ c: c.name, status: 200 });
      const got = upstream().received.slice(before).at(-1)!;
      const tp = got.rawHeaders.filter(([k]) => k.toLowerCase() === "traceparent").map(([, v]) => v);
      expect({ c: c.name, n: tp.length }).toEqual({ c: c.name, n: 1 });
      expect({ c: c.name, tp: tp[0] }).toEqual({ c: c.name, tp: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/) });
      expect({ c: c.name, joins: tp[0]!.slice(3, 35) === agentTrace }).toEqual({ c: c.name, joins: c.joins });
      const ts = got.rawHeaders.filter(([k]) => k.toLowerCase() === "tracestate").map(([, v]) => v);
      for (const v of ts) expect({ c: c.name, v }).toEqual({ c: c.name, v: expect.not.stringMatching(/evil|injected|bad key|b{600}/) });
      expect(got.rawHeaders.some(([k]) => /evil|injected/i.test(k))).toBe(false);
    }
  }, 60_000);
});

describe("the canonical encoding as an outside tool computes it", () => {
  test("paths with quotes, backslashes, '\",\"', latin-1 and C1 bytes recorded through the tunnel hash the same in Python (json.dumps, ensure_ascii=False)", async () => {
    if (!Bun.which("python3")) return;
    const l = await lab({ tunnel: true });
    const brokerCa = await (await fetch(`${l.broker.apiUrl}/v1/ca.pem`)).text();
    const proxyPort = Number(l.broker.proxyAddress!.split(":").at(-1));
    const auth = `Basic ${Buffer.from(`${l.broker.sessionToken}:${l.vault}`).toString("base64")}`;
    const targets = [
      Buffer.from('/q"uote/back\\slash/","status":200,"x', "latin1"),
      Buffer.concat([Buffer.from("/latin1/"), Buffer.from([0xe9, 0x80, 0x9f, 0xff, 0xa0]), Buffer.from("/%00%E2%80%A8%ED%A0%80")]),
    ];
    for (const t of targets) {
      const { conn } = await openTunnel(proxyPort, l.hp, auth, { ca: brokerCa });
      conn.write(Buffer.concat([Buffer.from("GET "), t, Buffer.from(` HTTP/1.1\r\nHost: ${l.hp}\r\n\r\n`)]));
      // Sent upstream as is (a Node upstream answers 400 to bytes above 0x7f in a path): recorded either way.
      expect((await conn.readResponse()).status).toBeOneOf([200, 400]);
      conn.close();
    }
    await until("2 records", async () => (await headSeq(l)) >= 2);
    expect(await brokerVerify(l)).toMatchObject({ ok: true, records: 2 });
    const records = (await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/export`, undefined, l.broker.userToken)).body.records;
    expect(records.map((r: ExportedAuditRecord) => r.path)).toEqual(targets.map((t) => t.toString("latin1")));
    const script = `
import hashlib, json, sys
v = int(sys.argv[1])
for line in sys.stdin:
    r = json.loads(line)
    arr = ["broker-audit-v1", v, r["seq"], r["prev"], r["at"], r["principal"], r["vault"], r["ingress"], r["method"], r["host"], r["path"],
           r["service"], r["credential_keys"], r["credential_refs"], r["status"], r["bytes_in"], r["bytes_out"], r["duration_ms"], r["error"],
           r["contained"], r["approved_by"]]
    print(hashlib.sha256(json.dumps(arr, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest())
`;
    const proc = Bun.spawn(["python3", "-c", script, String(l.vaultId)], {
      stdin: new TextEncoder().encode(records.map((r: unknown) => JSON.stringify(r)).join("\n")),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
    expect({ err, hashes: out.trim().split("\n") }).toEqual({ err: "", hashes: records.map((r: ExportedAuditRecord) => r.hash) });
  }, 60_000);
});
