// The query of every list that can grow (a vault's services, agents, sessions, proposals, held requests):
// `limit` and the cursor a previous page's `next_cursor` gave, named as the audit log names it (`before`
// for a list read newest first, `after` for the others). One schema per cursor's shape; a malformed limit
// or cursor is the broker's 400 naming it. Every answer carries `next_cursor`, null on the last page.

import { z } from "zod";
import { LIMITS } from "../policy/index.ts";
import { says } from "../schema-input.ts";

const MAX = LIMITS.listPageMax;
const LIMIT = `{field} must be a whole number from 1 to ${MAX}`;
const CURSOR = "{field} must be the next_cursor of a previous page";

/** How many entries a page holds; absent, LIMITS.listPageDefault. */
const Limit = z
  .string(says(LIMIT))
  .regex(/^\d{1,6}$/, says(LIMIT))
  .transform(Number)
  .refine((n) => n >= 1 && n <= MAX, says(LIMIT))
  .optional()
  .transform((n) => n ?? LIMITS.listPageDefault);

/** A host or a name, as the list is ordered by: printable ASCII without spaces (a cursor is only ever one of ours). */
const TextCursor = z.string(says(CURSOR)).regex(/^[\x21-\x7e]{1,300}$/, says(CURSOR));

/** A row id: ids are positive integers below 2^53. */
const IdCursor = z
  .string(says(CURSOR))
  .regex(/^\d{1,15}$/, says(CURSOR))
  .transform(Number);

/** Where a held-request page ended: `a<id>` among those awaiting a decision, `r<id>` in the rest. */
const HeldCursor = z
  .string(says(CURSOR))
  .regex(/^[ar]\d{1,15}$/, says(CURSOR))
  .transform((v) => ({ part: v.startsWith("a") ? ("awaiting" as const) : ("rest" as const), id: Number(v.slice(1)) }));

/** A list in host or name order (a vault's services, agents): `after` the last one shown. */
export const PageAfterName = z.object({ limit: Limit, after: TextCursor.optional() });
/** A list in creation order (sessions): `after` the last one shown. */
export const PageAfterId = z.object({ limit: Limit, after: IdCursor.optional() });
/** A list newest first (proposals): `before` the last one shown, as the audit log's pages. */
export const PageBeforeId = z.object({ limit: Limit, before: IdCursor.optional() });
/** Held requests, awaiting a decision first: `after` the last one shown. */
export const PageAfterHeld = z.object({ limit: Limit, after: HeldCursor.optional() });

/** The cursor of the next page, for the answers. */
export const NextCursor = z.string().nullable().describe("the next page's cursor (pass it back as its query names); null on the last page");
