// A request's own values shorter than MIN_SHARED (echo-needles.ts): not in the set every answer is
// scanned for (one vault's short value would redact every vault's answers), but looked for in the
// answers of the service that sends them, for as long as shared values are (24 h after they were
// last sent): a short value rotated a minute ago, or a short minted token, is still found there.
// Kept per vault and service, at most PER_SERVICE values each, the oldest dropped first.

import { MIN_SHARED, RECENT_LIMITS } from "./echo-needles.ts";
import { Needles, NO_NEEDLES } from "./redact.ts";

const PER_SERVICE = 64;

export interface ShortValues {
  /** SECRET: the set for one answer of `service`: `sent` (what this request sent) and what it sent lately. */
  forAnswer(service: string, sent: readonly string[]): Needles;
}

export function createShortValues(now: () => number, ttlMs = RECENT_LIMITS.ttlMs): ShortValues {
  const byService = new Map<string, { values: Map<string, number>; compiled: Needles }>();
  return {
    forAnswer(service, sent) {
      const at = now();
      let entry = byService.get(service);
      let changed = false;
      for (const v of sent) {
        if (!v || v.length >= MIN_SHARED) continue;
        if (!entry) byService.set(service, (entry = { values: new Map(), compiled: NO_NEEDLES }));
        if (!entry.values.has(v)) changed = true;
        entry.values.delete(v);
        entry.values.set(v, at); // last sent: the newest at the end
      }
      if (!entry) return NO_NEEDLES;
      for (const [v, t] of entry.values) {
        if (at - t <= ttlMs && entry.values.size <= PER_SERVICE) break;
        entry.values.delete(v);
        changed = true;
      }
      if (changed) entry.compiled = entry.values.size ? new Needles([...entry.values.keys()]) : NO_NEEDLES;
      return entry.compiled;
    },
  };
}
