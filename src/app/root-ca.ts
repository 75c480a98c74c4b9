// The broker's root CA as a running broker holds it: the active certificate, the leaf certificates minted under it for
// intercepted hosts, rotation (the leaves minted under the old one go), and a reload when another instance rotated it
// (announced as a `ca` change).

import { createLeafCache, loadRootCa, mintLeaf, rotateRootCa, type CaHolder, type LeafCache } from "../crypto/index.ts";
import type { Logger } from "../log.ts";
import type { Store } from "../store/index.ts";

export interface RunningRootCa {
  readonly ca: CaHolder;
  readonly leaves: LeafCache;
  /** Reads the active CA again; when another instance rotated it, it replaces this one and the leaves are dropped. */
  reload(): Promise<void>;
}

export async function openRootCa(
  store: Store,
  dataKey: CryptoKey,
  deps: { readonly now: () => number; readonly log: Logger; readonly onLookup?: (outcome: "hit" | "mint") => void },
): Promise<RunningRootCa> {
  const { now, log } = deps;
  let rootCa = await loadRootCa(store, dataKey, now());
  const leaves = createLeafCache((host) => mintLeaf(rootCa, host, now()), { max: 10_000, now, ...(deps.onLookup && { onLookup: deps.onLookup }) });
  return {
    leaves,
    ca: {
      get current() {
        return rootCa;
      },
      async rotate() {
        rootCa = await rotateRootCa(store, dataKey, now());
        leaves.clear();
        return rootCa;
      },
    },
    reload: () =>
      loadRootCa(store, dataKey, now()).then((fresh) => {
        if (fresh.certPem === rootCa.certPem) return;
        rootCa = fresh;
        leaves.clear();
        log.info("ca_reloaded", { not_after: new Date(fresh.notAfter).toISOString() });
      }),
  };
}
