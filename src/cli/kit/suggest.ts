// "Did you mean …": the real names closest to a mistyped command or flag. Pure: edit distance
// (optimal string alignment, so two swapped letters count as one edit) and a prefix rule.

/** Edits (insert, delete, replace, swap two neighbours) that turn `a` into `b`. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = d[i] as number[];
      const up = d[i - 1] as number[];
      row[j] = Math.min((up[j] as number) + 1, (row[j - 1] as number) + 1, (up[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j] as number, ((d[i - 2] as number[])[j - 2] as number) + 1);
    }
  }
  return (d[a.length] as number[])[b.length] as number;
}

/**
 * The names `word` most likely meant, best first (at most three, all equally close): names it begins
 * (two letters or more), else names within a few edits (one for short words, more for longer ones).
 * Empty when nothing is close enough: a far-fetched guess is worse than none.
 */
export function closestNames(word: string, names: readonly string[]): string[] {
  const typed = word.toLowerCase();
  if (typed.length >= 2) {
    const prefixed = names.filter((n) => n.toLowerCase().startsWith(typed));
    if (prefixed.length > 0) return prefixed.slice(0, 3);
  }
  const limit = typed.length <= 5 ? 1 : typed.length <= 8 ? 2 : 3;
  const scored = names.map((name) => ({ name, distance: editDistance(typed, name.toLowerCase()) })).filter((s) => s.distance <= limit);
  const best = Math.min(...scored.map((s) => s.distance));
  return scored
    .filter((s) => s.distance === best)
    .map((s) => s.name)
    .slice(0, 3);
}

/** `["a"]` → "a"; `["a", "b"]` → "a or b"; `["a", "b", "c"]` → "a, b or c". */
export function orList(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} or ${items.at(-1)}`;
}
