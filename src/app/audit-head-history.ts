// When each vault's audit head passed which seq, as this instance saw it (the records its audit writer wrote, and
// the heads its checkpointer read each second): the broker signs every record within BROKER_AUDIT_CHECKPOINT_SECONDS
// of its writing, so every record at or below a head seen longer ago than that (plus a grace) must be signed by now.
// A verification that finds one unsigned knows checkpoints were deleted (docs/audit-chain.md, `unsigned`). Kept in
// memory, never read back from the database: someone who can write it cannot move what was seen.

export interface HeadHistory {
  /** Vault `vaultId`'s head was at `seq` (or past it) at `at`. */
  observe(vaultId: number, seq: number, at: number): void;
  /** The highest seq seen at least the interval plus `graceMs` before `now`: every record up to it must be signed. */
  signedThrough(vaultId: number, now: number): number | undefined;
}

export function createHeadHistory(opts: { readonly everyMs: number; readonly graceMs: number }): HeadHistory {
  /**
   * Per vault, samples oldest first: the highest seq seen from `opened` until `at`, dated `at` (a seq is never dated
   * before it was seen); a new sample opens once the last one has been open `spacing`, so there are at most about
   * (interval + grace) / spacing + 2 of them, older ones dropped as they come.
   */
  const samples = new Map<number, { opened: number; at: number; seq: number }[]>();
  const spacing = Math.max(1_000, Math.floor(opts.everyMs / 64));
  const window = opts.everyMs + opts.graceMs;
  /** Drops samples the answer no longer needs: all but the newest one old enough for `now`. */
  const prune = (list: { at: number }[], now: number) => {
    let old = 0;
    while (old + 1 < list.length && list[old + 1]!.at <= now - window) old++;
    if (old > 0) list.splice(0, old);
  };
  return {
    observe(vaultId, seq, at) {
      let list = samples.get(vaultId);
      if (!list) samples.set(vaultId, (list = []));
      const last = list.at(-1);
      if (last && seq <= last.seq) return;
      if (last && at - last.opened < spacing) {
        last.seq = seq;
        last.at = Math.max(last.at, at);
      } else {
        list.push({ opened: at, at, seq });
        prune(list, at);
      }
    },
    signedThrough(vaultId, now) {
      const list = samples.get(vaultId);
      if (!list) return undefined;
      prune(list, now);
      const first = list[0]!;
      return first.at <= now - window ? first.seq : undefined;
    },
  };
}
