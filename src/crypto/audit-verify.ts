// The audit chain's verifier (issue 37, docs/audit-chain.md, "Verifying"): from a vault's anchor, its records in
// seq order and the checkpoints that cover it, it recomputes every hash, checks each record's seq, prev and id,
// each checkpoint's Ed25519 signature and that each signed head is a record of the chain with that hash. It names
// the first place where the chain breaks (and why), or says up to which record it holds. Pure: the broker's
// console and API, `broker audit verify` online and offline all run this same code over the export's fields.

import { auditRecordHash, type ChainedRecord } from "../store/index.ts";
import type { ChainBreak, ExportedAuditRecord, SignedAnchorPoint } from "./audit-export-shapes.ts";
export type { ChainBreak, ChainBreakKind, OutsideCheckpoints } from "./audit-export-shapes.ts";
import { MAX_BREAKS, type ChainVerification, type ChainVerifier, type ChainVerifierOptions } from "./audit-verify-api.ts";
export { MAX_BREAKS, UNSIGNED_GRACE_MS, type ChainVerification, type ChainVerifier, type ChainVerifierOptions } from "./audit-verify-api.ts";
import { anchorSignatureValid, checkpointKeyId, importCheckpointKey } from "./audit-signatures.ts";
import { checkCheckpoints, isoTime } from "./audit-verify-checkpoints.ts";

/** Records a content mismatch is remembered for, to find the record it was swapped with. */
const SWAP_WINDOW = 1000;

/** Prepares a verifier: checks every checkpoint's signature first (their heads are then what records must match). */
export async function createChainVerifier(opts: ChainVerifierOptions): Promise<ChainVerifier> {
  const breaks: ChainBreak[] = [];
  const add = (b: Omit<ChainBreak, "checkpoint"> & { checkpoint?: number | null }) => breaks.push({ checkpoint: null, ...b });

  // Checkpoints first: a signature that does not verify is a forged checkpoint, and its heads are not relied on.
  const key = opts.publicKey ? await importCheckpointKey(opts.publicKey.pem) : undefined;
  const keyId = opts.publicKey ? checkpointKeyId(opts.publicKey.pem) : undefined;
  const cps = await checkCheckpoints(opts.vaultId, opts.checkpoints ?? [], opts.outsideCheckpoints ?? [], key && keyId ? { key, keyId } : undefined);
  for (const b of cps.breaks) add(b);
  const { signed, signedUpTo, deleted, checked, unchecked } = cps;

  let anchor: SignedAnchorPoint = opts.anchor;
  /** Whether the anchor's signature holds (retention moved it); the genesis and an earlier run's record need none. */
  async function checkAnchor(a: SignedAnchorPoint, trusted: boolean): Promise<void> {
    if (a.seq !== 0 && !trusted && key && keyId) {
      const where = `anchor (seq ${a.seq})`;
      const why = !a.signature
        ? "not signed — records up to it are gone, and no signature by the broker's key says retention removed them"
        : a.key_id !== keyId
          ? `signed with key ${a.key_id}, not the broker's key ${keyId}`
          : (await anchorSignatureValid(key, keyId, opts.vaultId, a))
            ? undefined
            : "forged — its signature does not verify with the broker's public key";
      if (why) add({ kind: "anchor", seq: a.seq, id: null, message: `${where}: ${why}` });
    }
    // Checkpoints at the anchor are checked against it; those below it were of records retention removed since.
    for (const s of signed.get(a.seq) ?? []) {
      if (s.hash !== a.hash)
        add({
          kind: "rewritten",
          seq: a.seq,
          id: null,
          checkpoint: s.checkpoint,
          message: `anchor (seq ${a.seq}): rewritten — checkpoint ${s.checkpoint} (${isoTime(s.at)}) signed another hash for it`,
        });
    }
  }
  await checkAnchor(anchor, opts.anchorTrusted === true);
  /** The last record accepted before the anchor moved past it (still what was verified when nothing follows). */
  let beforeMove: { seq: number; id: number; at: number; hash: string } | undefined;

  let expectedSeq = anchor.seq + 1;
  let expectedPrev = anchor.hash;
  /** The last record accepted into the chain. */
  let last: { seq: number; id: number; at: number; hash: string } | undefined;
  /** The id of the record before `last` (for naming which of two records is out of place). */
  let idBeforeLast: number | undefined = opts.anchorId;
  /** The id the next record's must be above (an out-of-place record does not raise it). */
  let lastId = opts.anchorId ?? -Infinity;
  let count = 0;
  /** Records sharing one seq, held until the next seq shows which of them the chain goes on from. */
  let group: ExportedAuditRecord[] = [];
  /** Recent records whose contents did not match their hash: one of them may hold the contents of a later one. */
  const mismatched: { record: ExportedAuditRecord; index: number; breakAt: number }[] = [];
  /** A record whose id was above the next one's: waiting for the record it may have changed places with. */
  let highOutlier: { seq: number; id: number; idBefore: number; idAfter: number; breakAt: number } | undefined;
  const unchained = [...(opts.unchainedAfterChain ?? [])].sort((a, b) => a - b);
  let index = 0;

  const named = (r: { seq: number; id: number }) => `record seq ${r.seq} (id ${r.id})`;

  /** Unchained records with an id below `beforeId` sit before the record at `beforeSeq`: each is an insertion. */
  function placeUnchained(beforeSeq: number, beforeId: number): void {
    while (unchained.length && unchained[0]! < beforeId) {
      const id = unchained.shift()!;
      const where = beforeId === Infinity ? `after seq ${last?.seq ?? anchor.seq}` : `before seq ${beforeSeq}`;
      add({
        kind: "inserted",
        seq: beforeSeq,
        id,
        message: `record id ${id}: inserted — it has no seq, prev or hash, but was written after the chain began (${where})`,
      });
    }
  }

  /** Ids rise with seq; a record out of place is named, and does not move the bar for the next one. */
  function checkIds(r: ExportedAuditRecord): void {
    if (r.id > lastId) {
      if (highOutlier && r.id > highOutlier.id) highOutlier = undefined; // past where its partner could be
      lastId = r.id;
      return;
    }
    // Either the record before this one is too high (this one follows the one before it), or this one is too low.
    if (last && last.id === lastId && (idBeforeLast === undefined || idBeforeLast < r.id)) {
      add({
        kind: "out_of_order",
        seq: last.seq,
        id: last.id,
        message: `${named(last)}: out of order — its id is above that of the next record, seq ${r.seq} (id ${r.id}): records were swapped or moved`,
      });
      highOutlier = { seq: last.seq, id: last.id, idBefore: idBeforeLast ?? -Infinity, idAfter: r.id, breakAt: breaks.length - 1 };
      lastId = r.id;
      return;
    }
    // This one is too low; when it fits where an earlier too-high record was (and that one fits here), they changed places.
    const h = highOutlier;
    if (h && h.idBefore < r.id && r.id < h.idAfter && h.id > lastId) {
      breaks[h.breakAt] = {
        kind: "out_of_order",
        seq: h.seq,
        id: h.id,
        checkpoint: null,
        message: `${named(h)}: out of order — it and ${named(r)} changed places (each has the other's id): records were swapped`,
      };
      highOutlier = undefined;
      return;
    }
    add({
      kind: "out_of_order",
      seq: r.seq,
      id: r.id,
      message: `${named(r)}: out of order — its id is below that of an earlier record (id ${lastId}): records were swapped or moved`,
    });
  }

  /** A record whose contents do not match its hash: swapped with an earlier mismatched record, or edited. */
  function contentMismatch(r: ExportedAuditRecord): void {
    for (const m of mismatched) {
      if (index - m.index > SWAP_WINDOW) continue;
      const theirsHere = hashAs(m.record, r);
      const oursThere = hashAs(r, m.record);
      if (theirsHere === r.hash || oursThere === m.record.hash) {
        breaks[m.breakAt] = {
          kind: "out_of_order",
          seq: m.record.seq,
          id: m.record.id,
          checkpoint: null,
          message: `${named(m.record)}: out of order — it holds the contents of ${named(r)}, and that record holds its contents: the two were swapped`,
        };
        mismatched.splice(mismatched.indexOf(m), 1);
        return;
      }
    }
    add({ kind: "edited", seq: r.seq, id: r.id, message: `${named(r)}: edited — its hash does not match its contents` });
    mismatched.push({ record: r, index, breakAt: breaks.length - 1 });
    if (mismatched.length > 64) mismatched.shift();
  }

  /** The one record of its seq the chain continues from (the others were inserted). */
  function choose(candidates: readonly ExportedAuditRecord[], nextPrev: string | undefined): ExportedAuditRecord {
    if (candidates.length === 1) return candidates[0]!;
    const score = (r: ExportedAuditRecord) =>
      (hashOf(r) === r.hash ? 4 : 0) + (r.prev === expectedPrev ? 2 : 0) + (nextPrev !== undefined && r.hash === nextPrev ? 8 : 0) + (r.id > lastId ? 1 : 0);
    let best = candidates[0]!;
    for (const r of candidates) if (score(r) > score(best) || (score(r) === score(best) && r.id < best.id)) best = r;
    for (const r of candidates) {
      if (r === best) continue;
      add({
        kind: "inserted",
        seq: r.seq,
        id: r.id,
        message: `${named(r)}: inserted — a second record claims seq ${r.seq} (the chain goes on from id ${best.id})`,
      });
    }
    return best;
  }

  function accept(r: ExportedAuditRecord): void {
    placeUnchained(r.seq, r.id);
    if (r.seq <= anchor.seq) {
      add({ kind: "anchor", seq: r.seq, id: r.id, message: `${named(r)}: at or below the anchor (seq ${anchor.seq}), where retention removed records` });
      return;
    }
    if (last && r.seq < expectedSeq) {
      add({ kind: "out_of_order", seq: r.seq, id: r.id, message: `${named(r)}: out of order — it comes after seq ${last.seq} (id ${last.id})` });
      return;
    }
    const gap = r.seq > expectedSeq;
    if (gap) {
      const from = last ? `seq ${last.seq} (id ${last.id}) is followed by ${named(r)}` : `the chain starts at ${named(r)} but its anchor is seq ${anchor.seq}`;
      add({ kind: "missing", seq: expectedSeq, id: null, message: `${span(expectedSeq, r.seq - 1)}: missing — deleted; ${from}` });
    }
    if (hashOf(r) !== r.hash) contentMismatch(r);
    else if (!gap && r.prev !== expectedPrev) {
      if (!last)
        add({
          kind: "anchor",
          seq: r.seq,
          id: r.id,
          message: `${named(r)}: does not follow the anchor — its prev is not the anchor's hash (seq ${anchor.seq}): the anchor or the first record was changed`,
        });
      else
        add({
          kind: "edited",
          seq: last.seq,
          id: last.id,
          message: `${named(last)}: edited — its hash was recomputed over changed contents, so ${named(r)} no longer links to it`,
        });
    }
    checkIds(r);
    for (const s of signed.get(r.seq) ?? []) {
      if (s.hash !== r.hash)
        add({
          kind: "rewritten",
          seq: r.seq,
          id: r.id,
          checkpoint: s.checkpoint,
          message: `${named(r)}: rewritten — checkpoint ${s.checkpoint} (${isoTime(s.at)}) signed another hash for it: the chain up to it was recomputed`,
        });
    }
    if (opts.head && opts.head.seq === r.seq && opts.head.hash !== r.hash)
      add({ kind: "rewritten", seq: r.seq, id: r.id, message: `${named(r)}: rewritten — the vault's head names another hash for it` });
    // Whatever broke here, the chain goes on from this record as it is, so one tampering is named once.
    idBeforeLast = last?.id ?? opts.anchorId;
    last = { seq: r.seq, id: r.id, at: r.at, hash: r.hash };
    expectedSeq = r.seq + 1;
    expectedPrev = r.hash;
  }

  function flushGroup(nextPrev: string | undefined): void {
    if (group.length === 0) return;
    const r = choose(group, nextPrev);
    group = [];
    accept(r);
  }

  return {
    push(record) {
      count++;
      index++;
      if (group.length && group[0]!.seq !== record.seq) flushGroup(record.seq === group[0]!.seq + 1 ? record.prev : undefined);
      group.push(record);
    },
    async moveAnchor(a) {
      if (a.seq < anchor.seq) return; // an older read: anchors only move forward
      if (a.seq === anchor.seq) {
        if (a.hash !== anchor.hash) add({ kind: "anchor", seq: a.seq, id: null, message: `anchor (seq ${a.seq}): its hash changed while the chain was read` });
        return;
      }
      flushGroup(undefined);
      await checkAnchor(a, false);
      if (last && last.seq === a.seq && last.hash !== a.hash)
        add({ kind: "rewritten", seq: last.seq, id: last.id, message: `${named(last)}: rewritten — retention's signed anchor names another hash for it` });
      anchor = a;
      if (last && last.seq >= a.seq) return;
      // Retention removed records this read had not reached: the chain goes on from the anchor.
      beforeMove = last ?? beforeMove;
      last = undefined;
      idBeforeLast = undefined;
      expectedSeq = a.seq + 1;
      expectedPrev = a.hash;
    },
    finish() {
      flushGroup(undefined);
      const end = last
        ? ` (the chain ends at ${named(last)})`
        : anchor.seq
          ? ` (no record follows the anchor, seq ${anchor.seq})`
          : " (the chain has no records)";
      const lastSeq = Math.max(last?.seq ?? 0, anchor.seq);
      // Unchained records after the last chained one.
      placeUnchained(lastSeq + 1, Infinity);
      // Heads the chain must reach: every signed checkpoint's, then the head the broker reported.
      let truncatedAt: { seq: number; checkpoint: number | null; message: string } | undefined;
      for (const [seq, heads] of signed) {
        if (seq <= lastSeq) continue;
        const s = heads[0]!;
        if (!truncatedAt || seq > truncatedAt.seq)
          truncatedAt = {
            seq,
            checkpoint: s.checkpoint,
            message: `${span(lastSeq + 1, seq)}: missing — removed after checkpoint ${s.checkpoint} (${isoTime(s.at)}), which signed seq ${seq}${end}`,
          };
      }
      if (!truncatedAt && opts.head && opts.head.seq > lastSeq)
        truncatedAt = {
          seq: opts.head.seq,
          checkpoint: null,
          message: `${span(lastSeq + 1, opts.head.seq)}: missing — removed from the end; the vault's head is seq ${opts.head.seq}${end}`,
        };
      if (truncatedAt) add({ kind: "truncated", seq: lastSeq + 1, id: null, checkpoint: truncatedAt.checkpoint, message: truncatedAt.message });
      // Copies kept outside that the database lost, while records they signed are still kept.
      for (const d of deleted)
        if (d.seq > anchor.seq)
          add({
            kind: "deleted_checkpoint",
            seq: d.seq,
            id: null,
            checkpoint: d.checkpoint.id,
            message: `checkpoint ${d.checkpoint.id} (${isoTime(d.checkpoint.at)}): deleted — ${d.source} holds it (it signed seq ${d.seq}), the broker's database does not`,
          });
      // Records the broker says must be signed by now, above every head a valid checkpoint signed.
      const must = opts.mustBeSigned;
      const firstUnsigned = Math.max(signedUpTo, anchor.seq) + 1;
      if (must && Math.min(must.through, lastSeq) >= firstUnsigned)
        add({
          kind: "unsigned",
          seq: firstUnsigned,
          id: null,
          message: `${span(firstUnsigned, Math.min(must.through, lastSeq))}: unsigned — no checkpoint signs ${firstUnsigned === Math.min(must.through, lastSeq) ? "it" : "them"}, though the broker signs every record within ${must.everyMs / 1000} s of writing it and wrote ${firstUnsigned === Math.min(must.through, lastSeq) ? "it" : "them"} longer ago: checkpoints were deleted (or the broker could not make them)`,
        });
      const ordered = breaks.map((b, i) => ({ b, i })).sort((x, y) => x.b.seq - y.b.seq || x.i - y.i);
      const all = ordered.map((x) => x.b).slice(0, MAX_BREAKS);
      return {
        ok: all.length === 0,
        vaultId: opts.vaultId,
        records: count,
        verified: all.length === 0 ? (last ?? beforeMove ?? null) : null,
        checkpoints: checked,
        uncheckedCheckpoints: unchecked,
        breaks: all,
      };
    },
  };

  function hashOf(r: ExportedAuditRecord): string {
    return auditRecordHash(chainedRecord(opts.vaultId, r, r));
  }
  /** `contents`' hash were it at `place`'s seq and prev. */
  function hashAs(contents: ExportedAuditRecord, place: ExportedAuditRecord): string {
    return auditRecordHash(chainedRecord(opts.vaultId, contents, place));
  }
}

/** Verifies a whole chain at once (records in seq order). */
export async function verifyAuditChain(opts: ChainVerifierOptions & { readonly records: Iterable<ExportedAuditRecord> }): Promise<ChainVerification> {
  const v = await createChainVerifier(opts);
  for (const r of opts.records) v.push(r);
  return v.finish();
}

function span(from: number, to: number): string {
  return from === to ? `record seq ${from}` : `records seq ${from} to ${to}`;
}

/** The record's fields in the canonical encoding's terms, at `place`'s seq and prev. */
function chainedRecord(vaultId: number, r: ExportedAuditRecord, place: { seq: number; prev: string }): ChainedRecord {
  return {
    vaultId,
    seq: place.seq,
    prev: place.prev,
    at: r.at,
    principal: r.principal,
    vault: r.vault,
    ingress: r.ingress,
    method: r.method,
    host: r.host,
    path: r.path,
    service: r.service,
    credentialKeys: r.credential_keys,
    credentialRefs: r.credential_refs,
    status: r.status,
    bytesIn: r.bytes_in,
    bytesOut: r.bytes_out,
    durationMs: r.duration_ms,
    error: r.error,
    contained: r.contained,
    approvedBy: r.approved_by,
    llmModel: r.llm_model ?? null,
    inputTokens: r.input_tokens ?? null,
    outputTokens: r.output_tokens ?? null,
    totalTokens: r.total_tokens ?? null,
    costMicros: r.cost_micros ?? null,
    workloadIssuer: r.workload_issuer ?? null,
    workloadSubject: r.workload_subject ?? null,
  };
}
