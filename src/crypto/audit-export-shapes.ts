// The audit chain's parts as the broker exports them and every verifier reads them (docs/audit-chain.md,
// "Export"): records with the fields the canonical encoding takes, checkpoints with the heads they signed, the
// anchor with retention's signature, the public key, and the breaks a verifier names. Shapes only.

/** A chained record as the export carries it (docs/audit-chain.md, "Export"): the fields the encoding takes. */
export interface ExportedAuditRecord {
  readonly id: number;
  readonly seq: number;
  readonly prev: string;
  readonly hash: string;
  readonly at: number;
  readonly principal: string;
  readonly vault: string;
  readonly ingress: string;
  readonly method: string;
  readonly host: string;
  readonly path: string;
  readonly service: string | null;
  readonly credential_keys: string;
  readonly credential_refs: string | null;
  readonly status: number;
  readonly bytes_in: number;
  readonly bytes_out: number;
  readonly duration_ms: number;
  readonly error: string | null;
  readonly contained: boolean;
  readonly approved_by: string | null;
  /**
   * The LLM usage (issue 38; null on records that are not LLM calls). Absent from exports made before usage existed:
   * read as null. A record with any of them set is hashed with the v2 encoding (docs/audit-chain.md).
   */
  readonly llm_model?: string | null;
  readonly input_tokens?: number | null;
  readonly output_tokens?: number | null;
  readonly total_tokens?: number | null;
  readonly cost_micros?: number | null;
  /**
   * The workload that asked (issue 39): its platform token's issuer and subject; null on every other record, absent
   * from exports made before. A record with either set is hashed with the v3 encoding.
   */
  readonly workload_issuer?: string | null;
  readonly workload_subject?: string | null;
}

export interface ExportedCheckpointHead {
  readonly vault_id: number;
  readonly seq: number;
  readonly hash: string;
}

/** A signed checkpoint as the broker publishes it (docs/audit-chain.md, "Checkpoints"; GET …/audit/checkpoints). */
export interface ExportedCheckpoint {
  readonly id: number;
  readonly at: number;
  readonly key_id: string;
  /** The vault's own head (GET /v1/vaults/{vault}/audit/checkpoints gives that vault's only). */
  readonly heads: readonly ExportedCheckpointHead[];
  /** Every head the signature covers, the vault's among them (absent: `heads` is what was signed). */
  readonly signed_heads?: readonly ExportedCheckpointHead[];
  /** base64url Ed25519 signature of checkpointMessage() over the signed heads. */
  readonly signature: string;
}

export interface ChainPoint {
  readonly seq: number;
  readonly hash: string;
}

/** An anchor as the export gives it: above the genesis, retention's signature of it (docs/audit-chain.md, "Heads and anchors"). */
export interface SignedAnchorPoint extends ChainPoint {
  /** When retention moved it (ms since the epoch); null at the genesis. */
  readonly at?: number | null;
  readonly key_id?: string | null;
  /** base64url Ed25519 signature of ["broker-audit-anchor-v1", vault_id, seq, hash, at, key_id]. */
  readonly signature?: string | null;
}

/** The broker's checkpoint key: its SPKI PEM (GET /v1/audit/public-key); its id is the PEM's (auditKeyId). */
export interface CheckpointKey {
  readonly pem: string;
}

export type ChainBreakKind =
  /** A record's hash does not match its contents, or its hash was recomputed and the next record no longer links to it. */
  | "edited"
  /** Records missing between two kept ones (deleted), or between the anchor and the first kept record. */
  | "missing"
  /** A record that has no place in the chain: a second record with a seq, or one without chain fields written after the chain began. */
  | "inserted"
  /** Records whose ids do not rise with seq, or that hold each other's contents: swapped or moved. */
  | "out_of_order"
  /** The first kept record does not follow the anchor (or lies at or below it), or the anchor carries no valid signature of retention's. */
  | "anchor"
  /** Records a signed checkpoint (or the vault's head) covers are gone from the end of the chain. */
  | "truncated"
  /** A record's hash is not the one a checkpoint signed for its seq: the chain up to it was recomputed. */
  | "rewritten"
  /** A checkpoint whose signature does not verify with the broker's key. */
  | "forged_checkpoint"
  /** A checkpoint a copy outside the database holds (a webhook delivery, this broker's memory) is gone from the database. */
  | "deleted_checkpoint"
  /** Records older than the checkpoint interval allows that no checkpoint signs: checkpoints were deleted. */
  | "unsigned";

export interface ChainBreak {
  readonly kind: ChainBreakKind;
  /** Where in the chain: the record's seq (for missing records, the first missing seq; for a checkpoint, the seq it signed). */
  readonly seq: number;
  /** The record named (null when it is missing, or for a checkpoint). */
  readonly id: number | null;
  /** The checkpoint concerned, for forged_checkpoint, truncated and rewritten breaks found through one. */
  readonly checkpoint: number | null;
  /** One line a person reads, e.g. "record seq 41 (id 1234): edited — its hash does not match its contents". */
  readonly message: string;
}

/** Checkpoints kept outside the broker's database, and where they came from (for the messages). */
export interface OutsideCheckpoints {
  /** e.g. "checkpoints.jsonl", "this broker's memory". */
  readonly source: string;
  readonly checkpoints: readonly ExportedCheckpoint[];
}
