// The audit log's hash chain (issue 37, docs/audit-chain.md): each record's SHA-256 over its canonical
// encoding, which includes the previous record's hash in the same vault, so an edit, a deletion, an
// insertion or a reordering anywhere breaks every hash after it. The encoding is a JSON array in a fixed
// field order (docs/audit-chain.md says it exactly), so a tool outside the broker can recompute it. In the
// store, not crypto/, because retention (on SQLite in its worker thread) checks what it removes before it
// signs the anchor; nothing here but JSON and SHA-256.
/** The encoding's name, its first element: a later encoding gets another. */
export const AUDIT_CHAIN_ENCODING = "broker-audit-v1";
/**
 * A record with LLM usage (issue 38): v1's elements under this name, then the five usage fields. v1 stays for every
 * record without usage, so hashes written before usage existed (and every unmetered record since) keep verifying.
 */
export const AUDIT_CHAIN_ENCODING_USAGE = "broker-audit-v2";
/**
 * A record made by a workload (issue 39): v2's elements (usage fields null when it has none), then the workload's
 * issuer and subject. Records without a workload keep v1 or v2.
 */
export const AUDIT_CHAIN_ENCODING_WORKLOAD = "broker-audit-v3";

/** A record's fields as the chain covers them, in the encoding's order (docs/audit-chain.md). */
export interface ChainedRecord {
  readonly vaultId: number;
  /** Its place in the vault's chain: 1, 2, 3… */
  readonly seq: number;
  /** The hash of the vault's record seq - 1 (or the genesis / the anchor). */
  readonly prev: string;
  readonly at: number;
  readonly principal: string;
  readonly vault: string;
  readonly ingress: string;
  readonly method: string;
  readonly host: string;
  readonly path: string;
  readonly service: string | null;
  readonly credentialKeys: string;
  readonly credentialRefs?: string | null;
  readonly status: number;
  readonly bytesIn: number;
  readonly bytesOut: number;
  readonly durationMs: number;
  readonly error: string | null;
  readonly contained: boolean;
  readonly approvedBy: string | null;
  /** The LLM usage (issue 38); absent or null on records that are not LLM calls (and on every record made before). */
  readonly llmModel?: string | null;
  readonly inputTokens?: number | null;
  readonly outputTokens?: number | null;
  readonly totalTokens?: number | null;
  readonly costMicros?: number | null;
  /** The workload's token issuer and subject (issue 39); absent or null on every other record. */
  readonly workloadIssuer?: string | null;
  readonly workloadSubject?: string | null;
}

/**
 * Whether the record takes the usage encoding (v2). The broker meters a record with all three token counts, but any
 * usage field set selects v2: a rule on input tokens alone would leave a model or cost added to an unmetered record
 * outside every hash.
 */
function carriesUsage(r: ChainedRecord): boolean {
  return [r.llmModel, r.inputTokens, r.outputTokens, r.totalTokens, r.costMicros].some((v) => v !== null && v !== undefined);
}

/** Whether the record takes the workload encoding (v3): either workload field set (so neither is left unhashed). */
function carriesWorkload(r: ChainedRecord): boolean {
  return [r.workloadIssuer, r.workloadSubject].some((v) => v !== null && v !== undefined);
}

/** The canonical encoding: a JSON array (no spaces, strings as JSON escapes them, integers, null, true/false). */
export function canonicalAuditRecord(r: ChainedRecord): string {
  const workload = carriesWorkload(r);
  const usage = workload || carriesUsage(r);
  const base = [
    workload ? AUDIT_CHAIN_ENCODING_WORKLOAD : usage ? AUDIT_CHAIN_ENCODING_USAGE : AUDIT_CHAIN_ENCODING,
    r.vaultId,
    r.seq,
    r.prev,
    r.at,
    r.principal,
    r.vault,
    r.ingress,
    r.method,
    r.host,
    r.path,
    r.service,
    r.credentialKeys,
    r.credentialRefs ?? null,
    r.status,
    r.bytesIn,
    r.bytesOut,
    r.durationMs,
    r.error,
    r.contained,
    r.approvedBy,
  ];
  if (!usage) return JSON.stringify(base);
  const withUsage = [...base, r.llmModel ?? null, r.inputTokens ?? null, r.outputTokens ?? null, r.totalTokens ?? null, r.costMicros ?? null];
  if (!workload) return JSON.stringify(withUsage);
  return JSON.stringify([...withUsage, r.workloadIssuer ?? null, r.workloadSubject ?? null]);
}

/** The record's hash: lower-case hex SHA-256 of its canonical encoding's UTF-8 bytes. */
export function auditRecordHash(r: ChainedRecord): string {
  // The one-shot digest: the same bytes as a CryptoHasher's, without making one per record (half the cost, and every
  // proxied request hashes its record).
  return Bun.SHA256.hash(canonicalAuditRecord(r), "hex");
}

/** The checkpoint encoding's name (docs/audit-chain.md, Checkpoints). */
export const AUDIT_CHECKPOINT_ENCODING = "broker-audit-checkpoint-v1";

/** One vault's head as a checkpoint signs it. */
export interface CheckpointHead {
  readonly vaultId: number;
  readonly seq: number;
  readonly hash: string;
}

/** The bytes a checkpoint's Ed25519 signature covers: its id, time, key id and heads (sorted by vault id). */
export function checkpointMessage(c: {
  readonly id: number;
  readonly at: number;
  readonly keyId: string;
  readonly heads: readonly CheckpointHead[];
}): Uint8Array {
  const heads = [...c.heads].sort((a, b) => a.vaultId - b.vaultId).map((h) => [h.vaultId, h.seq, h.hash]);
  return new TextEncoder().encode(JSON.stringify([AUDIT_CHECKPOINT_ENCODING, c.id, c.at, c.keyId, heads]));
}
