// The LLM price table in use (issue 38): anyone signed in may read it (budgets and logs show money by it); the owner
// sets one on the console or the API over the operator's file (or the shipped table), and can go back to that. The
// table set is kept in the settings, so a restart and every instance (told by the change feed on PostgreSQL) price by it.

import { Unavailable } from "../errors.ts";
import type { Domain, Principal } from "../identity/index.ts";
import { requireOwner } from "../identity/index.ts";
import { PRICE_SETTING, type PriceTable, type PriceSource } from "../policy/index.ts";

export interface PriceTableView {
  source: PriceSource;
  currency: string;
  written: string;
  models: Record<string, { input: number; output: number }>;
}

function book(d: Domain) {
  if (!d.prices) throw new Unavailable("this server does not meter LLM calls");
  return d.prices;
}

export function viewPrices(d: Domain): PriceTableView {
  const b = book(d);
  const t = b.current();
  return { source: b.source(), currency: t.currency, written: t.written, models: { ...t.models } };
}

/** Sets the table every instance prices by (the owner); model names are kept lower-case, as they are looked up. */
export async function setPrices(d: Domain, p: Principal, table: PriceTable): Promise<PriceTableView> {
  requireOwner(p);
  const models = Object.fromEntries(Object.entries(table.models).map(([name, price]) => [name.toLowerCase(), { input: price.input, output: price.output }]));
  const kept: PriceTable = { currency: table.currency, written: table.written, models };
  await d.store.settings.put(PRICE_SETTING, kept, d.now());
  book(d).use(kept);
  return viewPrices(d);
}

/** Back to the operator's file (or the shipped table). */
export async function resetPrices(d: Domain, p: Principal): Promise<PriceTableView> {
  requireOwner(p);
  await d.store.settings.put(PRICE_SETTING, null, d.now());
  book(d).use(undefined);
  return viewPrices(d);
}

/** Reads the table set on the console, if any, into the price book (at start, and when another instance changed it). */
export async function restorePrices(d: Domain): Promise<void> {
  if (!d.prices) return;
  const stored = await d.store.settings.get<PriceTable | null>(PRICE_SETTING);
  d.prices.use(stored && typeof stored === "object" && stored.models ? stored : undefined);
}
