// Reading a list the server answers a page at a time (services, agents, sessions, proposals, held
// requests): every page, following next_cursor, so a list command prints the whole list as it did
// before paging; `--limit N` stops after the first N. Servers from before paging answer the whole list
// without a cursor, which reads as one page.

import { LIMITS } from "../../policy/index.ts";
import { CliFailure } from "./fail.ts";

export const limitArg = {
  limit: { type: "string", description: "Show at most this many (default: every one, read from the server a page at a time)" },
} as const;

/** `--limit N`: a whole number from 1; absent, undefined (every entry). */
export function parseListLimit(raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  const n = /^\d{1,9}$/.test(raw.trim()) ? Number(raw.trim()) : 0;
  if (n < 1) throw new CliFailure(`--limit: "${raw}" is not a whole number from 1`, "for example --limit 20", 2);
  return n;
}

/** What every page's answer carries besides its entries. */
export interface PageAnswer {
  readonly next_cursor?: string | null;
}

/**
 * The entries of every page (or the first `max`). `fetchPage` is given each page's query
 * (`limit=500`, then `limit=500&after=…`) and answers its body; `cursor` is the query parameter the
 * list takes its cursor by. A cursor the server repeats would loop for ever: it is refused.
 */
export async function readPages<B extends PageAnswer, T>(
  fetchPage: (query: string) => Promise<B>,
  entries: (body: B) => readonly T[],
  cursor: "after" | "before",
  max?: number,
): Promise<T[]> {
  const out: T[] = [];
  const seen = new Set<string>();
  let next: string | null | undefined;
  for (;;) {
    const query = new URLSearchParams({ limit: String(Math.min(LIMITS.listPageMax, (max ?? Number.MAX_SAFE_INTEGER) - out.length)) });
    if (next) query.set(cursor, next);
    const body = await fetchPage(query.toString());
    out.push(...entries(body));
    next = body.next_cursor;
    if (!next || (max !== undefined && out.length >= max)) return max === undefined ? out : out.slice(0, max);
    if (seen.has(next)) throw new CliFailure("the server sent the same page twice", "try again; if it keeps happening, pass --limit");
    seen.add(next);
  }
}
