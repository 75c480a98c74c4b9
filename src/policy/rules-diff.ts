// What a change of service rules adds to what is allowed today, decided on the patterns alone: the
// approval page and the console mark a proposal "wider than now" from it (words/ says it in words),
// and a pattern covers another when every path the second matches, the first matches too.

import type { Rules, ServiceRule } from "./path-rules.ts";

/**
 * What `next` allows that `current` does not: "everything" when the rules would be removed, the
 * added (method, path) rules otherwise, undefined when nothing is added. Conservative: a pattern
 * counts as covered only when one current pattern with that method covers it on its own. Asking a
 * person less is wider too: a rule without `approve` is not covered by a current approval rule, and
 * a request a person approves today that `next` allows without asking is added (as a plain rule).
 */
export function widening(current: Rules | undefined, next: Rules | undefined): Rules | "everything" | undefined {
  if (current === undefined) return undefined; // today every method and path is allowed already
  if (next === undefined) return "everything";
  const added = new Map<string, string[]>(); // "approve"? + methods (joined) -> paths
  const add = (methods: readonly string[], path: string, held: boolean) => {
    const key = `${held ? "approve " : ""}${methods.join(" ")}`;
    added.set(key, [...(added.get(key) ?? []), path]);
  };
  const within = (rules: Rules, method: string, path: string, held: (r: ServiceRule) => boolean) =>
    rules.some((r) => held(r) && r.methods.includes(method) && r.paths.some((p) => covers(p, path)));
  for (const rule of next) {
    const held = rule.approve === "each";
    for (const path of rule.paths) {
      // A rule that asks a person is covered by any current rule; one that does not, only by a current rule that does not ask either.
      const methods = rule.methods.filter((m) => !within(current, m, path, (c) => held || c.approve !== "each"));
      if (methods.length) add(methods, path, held);
    }
  }
  for (const rule of current) {
    if (rule.approve !== "each") continue;
    for (const path of rule.paths) {
      const methods = rule.methods.filter((m) => !within(next, m, path, (n) => n.approve === "each") && within(next, m, path, () => true));
      if (methods.length) add(methods, path, false);
    }
  }
  if (added.size === 0) return undefined;
  return [...added].map(([key, paths]) => {
    const words = key.split(" ");
    const held = words[0] === "approve";
    return { methods: held ? words.slice(1) : words, paths: [...new Set(paths)], ...(held ? { approve: "each" as const } : {}) };
  });
}

type Token = { kind: "literal"; value: string } | { kind: "one" } | { kind: "any" };

function tokens(pattern: string): Token[] {
  return pattern
    .slice(1)
    .split("/")
    .map((part): Token => {
      if (part === "*") return { kind: "one" };
      if (part === "**") return { kind: "any" };
      try {
        return { kind: "literal", value: decodeURIComponent(part) };
      } catch {
        return { kind: "literal", value: part };
      }
    });
}

/** Whether every path `inner` matches is matched by `outer` (`*` one non-empty segment, `**` any number). */
export function covers(outer: string, inner: string): boolean {
  const q = tokens(outer);
  const p = tokens(inner);
  // can[j]: q[0..i) covers p[0..j)
  let can = new Array<boolean>(p.length + 1).fill(false);
  can[0] = true;
  for (const t of q) {
    const next = new Array<boolean>(p.length + 1).fill(false);
    for (let j = 0; j <= p.length; j++) {
      if (t.kind === "any") {
        next[j] = can[j]! || (j > 0 && next[j - 1]!);
        continue;
      }
      const s = p[j - 1];
      if (j === 0 || !can[j - 1] || !s) continue;
      if (t.kind === "one") next[j] = s.kind === "one" || (s.kind === "literal" && s.value !== "");
      else next[j] = s.kind === "literal" && s.value === t.value;
    }
    can = next;
  }
  return can[p.length]!;
}
