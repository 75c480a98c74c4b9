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
  /** Per vault, (time, seq) samples, oldest first, seqs rising; at most one per `spacing`. */
  const samples = new Map<number, { at: number; seq: number }[]>();
  const spacing = Math.max(1_000, Math.floor(opts.everyMs / 64));
  return {
    observe(vaultId, seq, at) {
      const list = samples.get(vaultId) ?? [];
      if (!samples.has(vaultId)) samples.set(vaultId, list);
      const last = list.at(-1);
      if (last && seq <= last.seq) return;
      if (last && at - last.at < spacing) last.seq = seq;
      else list.push({ at, seq });
    },
    signedThrough(vaultId, now) {
      const list = samples.get(vaultId);
      if (!list) return undefined;
      const before = now - opts.everyMs - opts.graceMs;
      // The newest sample old enough is the answer; older ones are no longer needed.
      let i = -1;
      while (i + 1 < list.length && list[i + 1]!.at <= before) i++;
      if (i < 0) return undefined;
      if (i > 0) list.splice(0, i);
      return list[0]!.seq;
    },
  };
}
