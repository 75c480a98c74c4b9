// The body of one retention batch, the same on every backend (store/audit.ts deletePrunable for PostgreSQL and the
// memory store, store/sqlite-read-worker.ts on SQLite's worker connection): inside the caller's transaction, the
// prefix of ids [fromId, toId] that is over the row cap or the age limit, stopped before any record no checkpoint has
// signed yet (its anchor could not be checked), each vault's anchor moved to its last removed record (signed where
// the records check out: store/audit-chain-check.ts), then the prefix deleted.

import type { AnchorSigning } from "./audit-anchors.ts";
import { CHAIN_CHECK_STATEMENTS, moveAnchorsChecked, type ReadRows, type RunStatement, type UnsignedAnchor } from "./audit-chain-check.ts";

/** The statements a batch runs (store/audit.ts RETENTION_STATEMENTS). */
export interface PruneStatements {
  readonly firstKept: string;
  readonly anchorsIn: string;
  readonly hashAt: string;
  readonly moveAnchor: string;
  readonly deleteRange: string;
}

export interface PrefixRemoval {
  readonly removed: number;
  /** Anchors moved unsigned: the records removed did not check out (tampering before retention reached them). */
  readonly unsigned: readonly UnsignedAnchor[];
  /** The batch stopped before records no checkpoint signs yet: the next one waits for a checkpoint. */
  readonly waiting: boolean;
}

/** Removes what may go among ids [fromId, toId]: at or below `throughId` (the row cap) or begun before `olderThan`. */
export async function removePrefix(
  read: ReadRows,
  run: RunStatement,
  sql: PruneStatements,
  range: { readonly fromId: number; readonly toId: number; readonly throughId: number; readonly olderThan: number; readonly waitForCheckpoints: boolean },
  signing: AnchorSigning | undefined,
): Promise<PrefixRemoval> {
  const { fromId, toId } = range;
  const stop = (await read(sql.firstKept, [fromId, toId, range.throughId, range.olderThan]))[0]?.stop;
  let upTo = stop == null ? toId : Number(stop) - 1;
  let waiting = false;
  if (signing && range.waitForCheckpoints && upTo >= fromId) {
    // A record no checkpoint signed yet cannot be checked against one: it stays until the next checkpoint.
    const unsigned = (await read(CHAIN_CHECK_STATEMENTS.firstUnsigned, [fromId, upTo]))[0]?.id;
    if (unsigned != null) {
      upTo = Number(unsigned) - 1;
      waiting = true;
    }
  }
  if (upTo < fromId) return { removed: 0, unsigned: [], waiting };
  const unsignedAnchors = await moveAnchorsChecked(read, run, sql, fromId, upTo, signing);
  const removed = Number(await run(sql.deleteRange, [fromId, upTo]));
  return { removed, unsigned: unsignedAnchors, waiting };
}
