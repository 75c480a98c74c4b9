// A vault's audit chain for readers outside the broker (docs/audit-chain.md, "Export" and "Verifying"): its chained
// records page by page in seq order with the anchor and head (GET /v1/vaults/:vault/audit/export, `broker audit
// export`), and the broker's own verification of the chain with the verifier every reader runs (GET …/audit/verify,
// the console's "verified up to"), kept per vault while its head stays. Names and numbers only.

import {
  createChainVerifier,
  type ChainBreak,
  type ChainPoint,
  type ExportedAuditRecord,
  type ExportedCheckpoint,
  type SignedAnchorPoint,
} from "../crypto/index.ts";
import { InvalidRequest } from "../errors.ts";
import type { Domain, OpenVault } from "../identity/index.ts";
import { iso, requireInVault } from "../identity/index.ts";
import { AUDIT_CHAIN_GENESIS, type AuditCheckpointRow, type AuditRow, type Store } from "../store/index.ts";
import { createPrincipalNamer } from "./audit-log.ts";

export const AUDIT_EXPORT_PAGE_MAX = 5000;
export const AUDIT_EXPORT_PAGE_DEFAULT = 1000;
/** Ids of records without chain fields written after the chain began, reported at most. */
const UNCHAINED_SHOWN = 100;
/** Checkpoints read per query when verifying. */
const CHECKPOINT_PAGE = 1000;
/** A verification is kept while the vault's head and anchor stay, at most this long. */
const VERIFIED_TTL_MS = 10 * 60_000;
/** Reads of an export page while retention keeps moving the anchor over it; then its removed records are left out. */
const ANCHOR_TRIES = 3;

export interface AuditExportPage {
  vault: string;
  vault_id: number;
  anchor: SignedAnchorPoint;
  head: ChainPoint;
  exported_at: number;
  checkpoint_seconds: number | null;
  signed_through: number | null;
  records: ExportedAuditRecord[];
  next_after_seq: number | null;
  principal_names: Record<string, string>;
  unchained: { before_chain: number; after_chain: number[] } | null;
}

export interface AuditVerifyView {
  vault: string;
  vault_id: number;
  ok: boolean;
  records: number;
  verified: { seq: number; id: number; at: number; time: string; hash: string } | null;
  checkpoints: { checked: number; unchecked: number };
  breaks: ChainBreak[];
  anchor: SignedAnchorPoint;
  head: ChainPoint;
  unchained_before_chain: number;
  checked_at: string;
}

/** A stored record as the export carries it: the fields the canonical encoding takes, under its names. */
export function exportedRecord(r: AuditRow): ExportedAuditRecord {
  return {
    id: r.id,
    seq: r.chainSeq!,
    prev: r.chainPrev ?? "",
    hash: r.chainHash ?? "",
    at: r.at,
    principal: r.principal,
    vault: r.vault,
    ingress: r.ingress,
    method: r.method,
    host: r.host,
    path: r.path,
    service: r.service,
    credential_keys: r.credentialKeys,
    credential_refs: r.credentialRefs ?? null,
    status: r.status,
    bytes_in: r.bytesIn,
    bytes_out: r.bytesOut,
    duration_ms: r.durationMs,
    error: r.error,
    contained: r.contained,
    approved_by: r.approvedBy,
    llm_model: r.llmModel ?? null,
    input_tokens: r.inputTokens ?? null,
    output_tokens: r.outputTokens ?? null,
    total_tokens: r.totalTokens ?? null,
    cost_micros: r.costMicros ?? null,
    workload_issuer: r.workloadIssuer ?? null,
    workload_subject: r.workloadSubject ?? null,
  };
}

/** The vault's chain row as its signed anchor and head (the genesis before its first record). */
async function chainPoints(store: Store, vaultId: number): Promise<{ anchor: SignedAnchorPoint; head: ChainPoint }> {
  const c = await store.auditChains.get(vaultId);
  const genesis = { seq: 0, hash: AUDIT_CHAIN_GENESIS };
  if (!c) return { anchor: { ...genesis, at: null, key_id: null, signature: null }, head: genesis };
  return {
    anchor: { seq: c.anchorSeq, hash: c.anchorHash, at: c.anchorAt, key_id: c.anchorKeyId, signature: c.anchorSignature },
    head: { seq: c.headSeq, hash: c.headHash },
  };
}

/**
 * Up to `limit` chained records after `afterSeq`, in seq order. A full page also takes every other record that
 * claims its last seq (an insertion), so paging by seq never splits a seq between two pages.
 */
async function chainedPage(store: Store, vaultId: number, afterSeq: number, limit: number): Promise<AuditRow[]> {
  const rows = await store.audit.chained(vaultId, afterSeq, limit);
  if (rows.length < limit) return rows;
  const lastSeq = rows.at(-1)!.chainSeq!;
  const have = new Set(rows.map((r) => r.id));
  for (const r of await store.audit.chainedAt(vaultId, lastSeq)) if (!have.has(r.id)) rows.push(r);
  return rows;
}

/** One page of the vault's chain (readers of the vault's logs, as `read_logs` says). */
export async function exportAuditChain(d: Domain, open: OpenVault, q: { afterSeq?: number | undefined; limit: number }): Promise<AuditExportPage> {
  requireInVault(open, "read_logs");
  if (!Number.isInteger(q.limit) || q.limit < 1 || q.limit > AUDIT_EXPORT_PAGE_MAX)
    throw new InvalidRequest(`limit must be 1 to ${AUDIT_EXPORT_PAGE_MAX}`, "limit");
  const vaultId = open.vault.id;
  const afterSeq = q.afterSeq ?? 0;
  // The head before the records (they reach it), the anchor after them: retention removing records meanwhile
  // moved it, and the page is read again; when it moves every time, the records it removed are left out.
  const points = await chainPoints(d.store, vaultId);
  let anchor = points.anchor;
  let read: AuditRow[] = [];
  let rows: AuditRow[] = [];
  for (let i = 0; i < ANCHOR_TRIES; i++) {
    read = await chainedPage(d.store, vaultId, afterSeq, q.limit);
    const again = (await chainPoints(d.store, vaultId)).anchor;
    const moved = again.seq !== anchor.seq;
    anchor = again;
    rows = moved ? read.filter((r) => r.chainSeq! > again.seq) : read;
    if (!moved) break;
  }
  const unchained = q.afterSeq === undefined ? await d.store.audit.unchained(vaultId, UNCHAINED_SHOWN) : undefined;
  const names = createPrincipalNamer(d);
  const principalNames: Record<string, string> = {};
  for (const r of rows) for (const p of [r.principal, r.approvedBy]) if (p && !(p in principalNames)) principalNames[p] = (await names(p)).name;
  return {
    vault: open.vault.name,
    vault_id: vaultId,
    anchor,
    head: points.head,
    exported_at: d.now(),
    checkpoint_seconds: d.auditCheckpoints ? d.auditCheckpoints.everyMs / 1000 : null,
    signed_through: d.auditCheckpoints?.signedThrough(vaultId) ?? null,
    records: rows.map(exportedRecord),
    next_after_seq: read.length >= q.limit ? read.at(-1)!.chainSeq! : null,
    principal_names: principalNames,
    unchained: unchained ? { before_chain: unchained.beforeChain, after_chain: unchained.afterChain } : null,
  };
}

interface Verified {
  readonly head: ChainPoint;
  readonly anchorSeq: number;
  /** The vault's newest checkpoint when it ran: a later one may sign records this run found unsigned. */
  readonly checkpointId: number;
  readonly at: number;
  readonly view: AuditVerifyView;
}

interface VaultCache {
  readonly done: Map<number, Verified>;
  readonly running: Map<number, Promise<AuditVerifyView>>;
}

/** Per store (a test process runs many brokers), per vault. */
const caches = new WeakMap<Store, VaultCache>();

function cacheOf(store: Store): VaultCache {
  let c = caches.get(store);
  if (!c) caches.set(store, (c = { done: new Map(), running: new Map() }));
  return c;
}

/**
 * The broker's verification of the vault's chain (readers of the vault's logs). Kept while the vault's head
 * and anchor stay (at most VERIFIED_TTL_MS); when only new records came since an intact result, only they are
 * verified, from the last verified record on. Callers at once share one run.
 */
export async function verifyAuditChainOf(d: Domain, open: OpenVault): Promise<AuditVerifyView> {
  requireInVault(open, "read_logs");
  const vaultId = open.vault.id;
  const cache = cacheOf(d.store);
  const running = cache.running.get(vaultId);
  if (running) return running;
  const points = await chainPoints(d.store, vaultId);
  const checkpointId = await d.store.auditCheckpoints.newestIdFor(vaultId);
  const prior = cache.done.get(vaultId);
  const fresh = prior && d.now() - prior.at < VERIFIED_TTL_MS && prior.anchorSeq === points.anchor.seq;
  const same = fresh && prior.checkpointId === checkpointId && prior.head.seq === points.head.seq && prior.head.hash === points.head.hash;
  if (same) return { ...prior.view, vault: open.vault.name };
  const from = fresh && prior.view.ok && prior.head.seq < points.head.seq ? prior : undefined;
  const run = verifyStored(d, vaultId, open.vault.name, from)
    .then((v) => {
      cache.done.set(vaultId, { head: v.head, anchorSeq: v.anchor.seq, checkpointId, at: from ? from.at : d.now(), view: v });
      return v;
    })
    .finally(() => cache.running.delete(vaultId));
  cache.running.set(vaultId, run);
  return run;
}

/** The vault's checkpoints (every head each one signed), oldest first. */
async function storedCheckpoints(store: Store, vaultId: number): Promise<ExportedCheckpoint[]> {
  const out: ExportedCheckpoint[] = [];
  for (let after = 0; ; ) {
    const page = await store.auditCheckpoints.listForVault(vaultId, after, CHECKPOINT_PAGE);
    for (const c of page) out.push(exportedCheckpoint(c, vaultId));
    if (page.length < CHECKPOINT_PAGE) return out;
    after = page.at(-1)!.id;
  }
}

/** A stored checkpoint as the API gives it for one vault: that vault's head, and every head signed. */
function exportedCheckpoint(c: AuditCheckpointRow, vaultId: number): ExportedCheckpoint {
  const signed = c.heads.map((h) => ({ vault_id: h.vaultId, seq: h.seq, hash: h.hash }));
  return { id: c.id, at: c.at, key_id: c.keyId, heads: signed.filter((h) => h.vault_id === vaultId), signed_heads: signed, signature: c.signature };
}

/**
 * Verifies what the store holds, from the anchor (or from `from`'s last verified record, when it was intact).
 * Retention may move the anchor while the records are read: it is read again after each page, and the verifier
 * goes on from the newer (signed) anchor, leaving out the records that page read and retention removed since.
 */
async function verifyStored(d: Domain, vaultId: number, vault: string, from: Verified | undefined): Promise<AuditVerifyView> {
  // What must be signed by now, before the checkpoints are read: every checkpoint that signs it is then among them.
  const through = d.auditCheckpoints?.signedThrough(vaultId);
  // The last checkpoint this instance made for the vault, from memory (deleting it from the database shows); taken
  // before the stored ones are read, so one made meanwhile is among them rather than "missing".
  const remembered = d.auditCheckpoints?.lastMade(vaultId);
  const points = await chainPoints(d.store, vaultId);
  // Checkpoints before records: every head they signed was written before the records are read.
  const checkpoints = await storedCheckpoints(d.store, vaultId);
  // The key this instance loaded and checked at start: a key row added to the database since is not trusted.
  const key = d.auditKey ?? (await d.store.auditCheckpoints.signingKey());
  const unchained = await d.store.audit.unchained(vaultId, UNCHAINED_SHOWN);
  const start = from?.view.verified;
  const verifier = await createChainVerifier({
    vaultId,
    anchor: start ? { seq: start.seq, hash: start.hash } : points.anchor,
    anchorTrusted: start !== undefined && start !== null,
    anchorId: start?.id,
    head: points.head,
    checkpoints,
    ...(remembered && {
      outsideCheckpoints: [{ source: "this broker's memory of the checkpoints it made", checkpoints: [exportedCheckpoint(remembered, vaultId)] }],
    }),
    ...(d.auditCheckpoints && through !== undefined && { mustBeSigned: { through, everyMs: d.auditCheckpoints.everyMs } }),
    publicKey: key ? { pem: key.publicKeyPem } : undefined,
    unchainedAfterChain: unchained.afterChain,
  });
  let anchor = points.anchor;
  // From the chain's start, not the anchor: a record kept at or below a moved anchor is named, not skipped.
  for (let after = start?.seq ?? 0; ; ) {
    const rows = await chainedPage(d.store, vaultId, after, AUDIT_EXPORT_PAGE_MAX);
    const now = (await chainPoints(d.store, vaultId)).anchor;
    const moved = now.seq !== anchor.seq;
    if (moved) {
      anchor = now;
      await verifier.moveAnchor(now);
    }
    for (const r of rows) if (!moved || r.chainSeq! > now.seq) verifier.push(exportedRecord(r));
    if (rows.length < AUDIT_EXPORT_PAGE_MAX) break;
    after = rows.at(-1)!.chainSeq!;
  }
  const result = verifier.finish();
  const verified = result.verified ?? (result.ok && start ? start : null);
  return {
    vault,
    vault_id: vaultId,
    ok: result.ok,
    records: result.records + (from ? from.view.records : 0),
    verified: verified && { seq: verified.seq, id: verified.id, at: verified.at, time: iso(verified.at), hash: verified.hash },
    checkpoints: { checked: result.checkpoints, unchecked: result.uncheckedCheckpoints },
    breaks: [...result.breaks],
    anchor,
    head: points.head,
    unchained_before_chain: unchained.beforeChain,
    checked_at: iso(d.now()),
  };
}
