// The audit attacks' lab (tests/e2e/audit-attacks*.test.ts): an in-process broker on SQLite with one vault and a
// bearer service on a local upstream, checkpoints every `every` records (none by time), and what the attacker and
// the verifiers do: proxied requests, waiting for the chain and its checkpoints, the broker's own verification,
// `broker audit verify` online in-process, and a chain recomputed from an edited record on.

import { afterAll, beforeAll, expect } from "bun:test";
import {
  auditRecordHash,
  createChainVerifier,
  type ChainVerification,
  type ExportedAuditRecord,
  type ExportedCheckpoint,
  type OutsideCheckpoints,
} from "../../src/crypto/index.ts";
import type { AuditRow, Store } from "../../src/store/index.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

export interface AuditLab {
  readonly broker: Broker;
  readonly store: Store;
  readonly vault: string;
  readonly vaultId: number;
  /** The bearer service's host:port. */
  readonly hp: string;
}

export interface LabOptions {
  readonly env?: Record<string, string>;
  readonly caPem?: string;
  readonly tunnel?: boolean;
  readonly upstream?: TestUpstream;
}

/**
 * Registers the file's upstream and cleanup hooks; `lab()` then starts a fresh broker with the stored credential
 * `secret` (default: a random one) behind a bearer service, a checkpoint every `every` records and none by time.
 */
export function useAuditLabs(opts: { every: number; secret?: string }) {
  let upstream: TestUpstream;
  const cleanups: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    upstream = await startUpstream();
  });
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await upstream?.close();
  });
  return {
    upstream: () => upstream,
    cleanups,
    async lab(o: LabOptions = {}): Promise<AuditLab> {
      const up = o.upstream ?? upstream;
      const broker = await startBroker({
        caPem: o.caPem ?? up.pki.caPem,
        tunnel: o.tunnel,
        env: { BROKER_AUDIT_CHECKPOINT_RECORDS: String(opts.every), BROKER_AUDIT_CHECKPOINT_SECONDS: "86400", ...o.env },
      });
      cleanups.push(() => broker.stop());
      broker.dns.set("upstream.test", ["127.0.0.1"]);
      broker.dns.set("localhost", ["127.0.0.1"]);
      const hp = `upstream.test:${up.port}`;
      await broker.setCredential("API_KEY", opts.secret ?? `sk-${crypto.randomUUID()}`);
      await broker.addService(hp, { type: "bearer", token: "API_KEY" });
      const page = await broker.api("GET", `/v1/vaults/${broker.vault}/audit/export?limit=1`, undefined, broker.userToken);
      expect(page.status).toBe(200);
      return { broker, store: broker.server.store, vault: broker.vault, vaultId: page.body.vault_id, hp };
    },
  };
}

export async function until<T>(what: string, read: () => Promise<T | undefined | false>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

export async function headSeq(l: AuditLab): Promise<number> {
  return (await l.store.auditChains.get(l.vaultId))?.headSeq ?? 0;
}

/** `n` proxied GETs, ten at a time (with `query` on each, when given), then waits until the chain holds them. */
export async function send(l: AuditLab, n: number, tag = "r", query?: string): Promise<void> {
  const before = await headSeq(l);
  for (let i = 0; i < n; i += 10) {
    const batch = Array.from({ length: Math.min(10, n - i) }, async (_, j) => {
      const res = await l.broker.proxy(l.hp, `/${tag}/${i + j}${query ? `?${query}` : ""}`);
      await res.arrayBuffer();
      return res.status;
    });
    expect(await Promise.all(batch)).toEqual(Array(Math.min(10, n - i)).fill(200));
  }
  await until("the audit records", async () => (await headSeq(l)) >= before + n);
}

/** Waits until a stored checkpoint signed the vault's head at `seq` or later; its id. */
export async function checkpointed(l: AuditLab, seq: number): Promise<number> {
  return until(`a checkpoint at seq ${seq}`, async () => {
    const cps = await l.store.auditCheckpoints.listForVault(l.vaultId, 0, 1000);
    return cps.find((c) => c.heads.some((h) => h.vaultId === l.vaultId && h.seq >= seq))?.id;
  });
}

/** GET /v1/vaults/{vault}/audit/verify: the broker's own verification (the console's "verified up to"). */
export async function brokerVerify(l: AuditLab): Promise<{ ok: boolean; records: number; breaks: { kind: string; seq: number; message: string }[] }> {
  const r = await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/verify`, undefined, l.broker.userToken);
  expect(r.status).toBe(200);
  return r.body;
}

export async function checkpointsOf(l: AuditLab): Promise<ExportedCheckpoint[]> {
  return (await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/checkpoints?limit=1000`, undefined, l.broker.userToken)).body.checkpoints;
}

/**
 * What `broker audit verify --vault V` does online, in-process: the checkpoints (given, or read now), then every
 * export page (following a moved anchor), checked against `pem` (default: the key the broker publishes).
 */
export async function exportVerify(
  l: AuditLab,
  opts: { pem?: string; checkpoints?: ExportedCheckpoint[]; outside?: OutsideCheckpoints[] } = {},
): Promise<ChainVerification> {
  const key = opts.pem ?? (await l.broker.api("GET", "/v1/audit/public-key")).body.public_key_pem;
  const cps = opts.checkpoints ?? (await checkpointsOf(l));
  let verifier: Awaited<ReturnType<typeof createChainVerifier>> | undefined;
  for (let after: number | null | undefined; ; ) {
    const q = after === undefined ? "?limit=5000" : `?after_seq=${after}&limit=5000`;
    const page = (await l.broker.api("GET", `/v1/vaults/${l.vault}/audit/export${q}`, undefined, l.broker.userToken)).body;
    if (!verifier)
      verifier = await createChainVerifier({
        vaultId: page.vault_id,
        anchor: page.anchor,
        head: page.head,
        checkpoints: cps,
        publicKey: { pem: key },
        unchainedAfterChain: page.unchained?.after_chain,
        outsideCheckpoints: opts.outside ?? [],
        ...(page.signed_through !== null && { mustBeSigned: { through: page.signed_through, everyMs: page.checkpoint_seconds * 1000 } }),
      });
    else await verifier.moveAnchor(page.anchor);
    for (const r of page.records as ExportedAuditRecord[]) verifier.push(r);
    if (page.next_after_seq === null) break;
    after = page.next_after_seq;
  }
  return verifier!.finish();
}

/** The vault's chained rows, as stored. */
export function rows(l: AuditLab): Promise<AuditRow[]> {
  return l.store.audit.chained(l.vaultId, 0, 100_000);
}

/**
 * The attacker who knows the encoding: applies `edit` to the record at `fromSeq`, recomputes its hash and every
 * later one (each prev the new hash before it) and moves the head to the new last hash. Returns seq → new hash.
 */
export async function rewriteFrom(l: AuditLab, fromSeq: number, edit: Partial<AuditRow>): Promise<Map<number, string>> {
  const hashes = new Map<number, string>();
  let prev: string | undefined;
  for (const r of await rows(l)) {
    const seq = r.chainSeq!;
    if (seq < fromSeq) {
      hashes.set(seq, r.chainHash!);
      prev = r.chainHash!;
      continue;
    }
    const row = seq === fromSeq ? { ...r, ...edit } : r;
    const p = prev ?? r.chainPrev!;
    const hash = auditRecordHash({ ...row, vaultId: l.vaultId, seq, prev: p });
    await l.store.db.run("UPDATE audit_logs SET status = ?, path = ?, chain_prev = ?, chain_hash = ? WHERE id = ?", [row.status, row.path, p, hash, r.id]);
    hashes.set(seq, hash);
    prev = hash;
  }
  await l.store.db.run("UPDATE audit_chains SET head_hash = ? WHERE vault_id = ?", [prev!, l.vaultId]);
  return hashes;
}
