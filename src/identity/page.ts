// A page of a list that can grow (services, agents, sessions, proposals, held requests): its limit is
// checked here as the API's query schema checks it, and each list reads one entry more than the page
// holds, so the last page says it is the last (next_cursor null) instead of leaving an empty page after it.

import { InvalidRequest } from "../errors.ts";
import { LIMITS } from "../policy/index.ts";

export interface Page<T> {
  readonly rows: T[];
  /** Where the next page starts, as the list's query takes it back; null on the last page. */
  readonly next_cursor: string | null;
}

/** Refuses a limit outside 1 to LIMITS.listPageMax: the console and in-process callers reach the domain without the query schema. */
export function checkPageLimit(limit: number): number {
  if (!Number.isInteger(limit) || limit < 1 || limit > LIMITS.listPageMax) throw new InvalidRequest(`limit must be 1 to ${LIMITS.listPageMax}`, "limit");
  return limit;
}

/** The page of `rows` (read with `limit + 1`): the first `limit`, and the cursor after the last of them when there were more. */
export function cutPage<T>(rows: readonly T[], limit: number, cursorOf: (last: T) => string): Page<T> {
  if (rows.length <= limit) return { rows: [...rows], next_cursor: null };
  const page = rows.slice(0, limit);
  return { rows: page, next_cursor: cursorOf(page.at(-1)!) };
}
