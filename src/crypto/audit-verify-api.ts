// The audit chain verifier's interface (crypto/audit-verify.ts implements it): what it is given (the anchor, the head,
// the checkpoints stored and kept outside, what must be signed by now, the public key), how records are fed to it,
// and what it answers. The broker's own verification, `broker audit verify` and the console all speak it.

import type {
  ChainBreak,
  ChainPoint,
  CheckpointKey,
  ExportedAuditRecord,
  ExportedCheckpoint,
  OutsideCheckpoints,
  SignedAnchorPoint,
} from "./audit-export-shapes.ts";

export interface ChainVerification {
  readonly ok: boolean;
  readonly vaultId: number;
  /** Chained records examined. */
  readonly records: number;
  /** The last record of an intact chain (null when none, or when the chain breaks). */
  readonly verified: { readonly seq: number; readonly id: number; readonly at: number; readonly hash: string } | null;
  /** Checkpoints covering the vault whose signature verified. */
  readonly checkpoints: number;
  /** Checkpoints covering the vault that could not be checked: no public key was given. */
  readonly uncheckedCheckpoints: number;
  /** Every break found, first (lowest seq) first; at most MAX_BREAKS. */
  readonly breaks: readonly ChainBreak[];
}

export interface ChainVerifierOptions {
  readonly vaultId: number;
  /**
   * Where verification starts: the last record retention removed (seq 0 and 64 zeros before any was). Above the
   * genesis it must carry retention's signature (checked when a public key is given), unless `anchorTrusted`.
   */
  readonly anchor: SignedAnchorPoint;
  /** The anchor is a record an earlier run verified (the console's cache), not retention's: no signature to check. */
  readonly anchorTrusted?: boolean;
  /**
   * The vault's head as the broker reported it before the records were read: the chain must reach it. Records
   * after it are fine (written while the export ran). Absent: not checked.
   */
  readonly head?: ChainPoint;
  /** Checkpoints that cover the vault (others are ignored); checked before any record. */
  readonly checkpoints?: readonly ExportedCheckpoint[];
  /** Copies kept outside the database: checked as the others, and each one missing from `checkpoints` is named. */
  readonly outsideCheckpoints?: readonly OutsideCheckpoints[];
  /**
   * What the broker says must be signed by now: every record up to `through` was written more than its checkpoint
   * interval (`everyMs`) plus UNSIGNED_GRACE_MS ago, and it signs every record within the interval of writing it;
   * one that no valid checkpoint signs means checkpoints were deleted. Absent: not checked.
   */
  readonly mustBeSigned?: { readonly through: number; readonly everyMs: number };
  /** Without it, checkpoints are counted as unchecked and their heads are not relied on. */
  readonly publicKey?: CheckpointKey;
  /** Ids of records that carry no chain fields although written after the chain began (each is an insertion). */
  readonly unchainedAfterChain?: readonly number[];
  /**
   * The id of the record at the anchor, when verification continues from an earlier run (the console's cache):
   * the next record's id must be above it.
   */
  readonly anchorId?: number;
}

/** More breaks than anyone reads; the first is the one that matters. */
export const MAX_BREAKS = 100;

/** Every break of a chain, and up to where it holds, for records given one at a time in seq order (then id). */
export interface ChainVerifier {
  /** The next record (seq order; records sharing a seq in id order). */
  push(record: ExportedAuditRecord): void;
  /**
   * Retention moved the anchor while the chain was read (a later export page says so): records at or below it are
   * gone; the chain goes on from it. Its signature is checked as the first anchor's.
   */
  moveAnchor(anchor: SignedAnchorPoint): Promise<void>;
  /** After the last record: the checks that need the end of the chain, and the result. */
  finish(): ChainVerification;
}

/** Slack for the broker's checkpointer (it looks every second) and a busy database, on top of the interval. */
export const UNSIGNED_GRACE_MS = 10_000;
