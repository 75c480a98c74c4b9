// The verifier's first pass (crypto/audit-verify.ts): every checkpoint that covers the vault, stored or kept outside
// the database, checked before any record. A checkpoint naming another key, whose `heads` differ from what it signed
// or whose signature does not verify is forged and not relied on; the others give, per seq, the hashes records must
// carry, and the highest seq signed. A copy from outside that the database no longer holds is kept for the end (named
// there while records it signed are still kept).

import { checkpointSignatureValid } from "./audit-signatures.ts";
import type { ChainBreak, ExportedCheckpoint, ExportedCheckpointHead, OutsideCheckpoints } from "./audit-export-shapes.ts";

/** A checkpoint that signed the vault's head at some seq. */
export interface SignedHead {
  readonly checkpoint: number;
  readonly at: number;
  readonly hash: string;
}

export interface CheckedCheckpoints {
  /** seq → the valid checkpoints that signed this vault's head at it. */
  readonly signed: Map<number, SignedHead[]>;
  /** The highest seq a valid checkpoint signed for this vault (records above it are unsigned); 0 for none. */
  readonly signedUpTo: number;
  /** Valid copies from outside that the database does not hold, with the seq each signed. */
  readonly deleted: readonly { checkpoint: ExportedCheckpoint; source: string; seq: number }[];
  readonly checked: number;
  /** Not checked: no public key was given. */
  readonly unchecked: number;
  /** forged_checkpoint breaks. */
  readonly breaks: readonly ChainBreak[];
}

export async function checkCheckpoints(
  vaultId: number,
  stored: readonly ExportedCheckpoint[],
  outsideSets: readonly OutsideCheckpoints[],
  key: { readonly key: CryptoKey; readonly keyId: string } | undefined,
): Promise<CheckedCheckpoints> {
  const mine = (heads: readonly ExportedCheckpointHead[] | undefined) => heads?.find((h) => h.vault_id === vaultId);
  const covering = stored.filter((c) => mine(c.heads) ?? mine(c.signed_heads));
  const storedIds = new Set(covering.map((c) => c.id));
  const seen = new Set(covering.map((c) => `${c.id}:${c.signature}`));
  const all: { c: ExportedCheckpoint; source: string | undefined }[] = covering.map((c) => ({ c, source: undefined }));
  for (const o of outsideSets)
    for (const c of o.checkpoints) {
      if (!(mine(c.heads) ?? mine(c.signed_heads)) || seen.has(`${c.id}:${c.signature}`)) continue;
      seen.add(`${c.id}:${c.signature}`);
      all.push({ c, source: o.source });
    }
  const signed = new Map<number, SignedHead[]>();
  const deleted: { checkpoint: ExportedCheckpoint; source: string; seq: number }[] = [];
  const breaks: ChainBreak[] = [];
  let signedUpTo = 0;
  let checked = 0;
  let unchecked = 0;
  for (const { c, source } of all.sort((a, b) => a.c.id - b.c.id)) {
    const shown = mine(c.heads);
    const head = mine(c.signed_heads ?? c.heads);
    if (!key) {
      unchecked++;
      continue;
    }
    const forged = (why: string) =>
      breaks.push({
        kind: "forged_checkpoint",
        seq: (head ?? shown)!.seq,
        id: null,
        checkpoint: c.id,
        message: `checkpoint ${c.id} (${isoTime(c.at)}): forged — ${why}`,
      });
    if (c.key_id !== key.keyId) {
      forged(`signed with key ${c.key_id}, not the broker's key ${key.keyId}`);
      continue;
    }
    if (!head || (shown && (shown.seq !== head.seq || shown.hash !== head.hash))) {
      forged("the head it names for this vault is not one it signed");
      continue;
    }
    if (!(await checkpointSignatureValid(key.key, c))) {
      forged("its signature does not verify with the broker's public key");
      continue;
    }
    checked++;
    const at = signed.get(head.seq) ?? [];
    at.push({ checkpoint: c.id, at: c.at, hash: head.hash });
    signed.set(head.seq, at);
    signedUpTo = Math.max(signedUpTo, head.seq);
    if (source !== undefined && !storedIds.has(c.id)) deleted.push({ checkpoint: c, source, seq: head.seq });
  }
  return { signed, signedUpTo, deleted, checked, unchecked, breaks };
}

export function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}
