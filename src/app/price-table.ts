// The LLM price table in use (issue 38): the operator's BROKER_LLM_PRICES_FILE, read and checked before the broker
// starts (a table that does not check out stops the start, saying why), or the one shipped in the binary.

import { readFileSync } from "node:fs";
import type { Config } from "../config.ts";
import { parsePriceTable, SHIPPED_PRICES, type PriceTable } from "../policy/index.ts";

export function loadPriceTable(config: Config): PriceTable {
  if (!config.pricesFile) return SHIPPED_PRICES;
  let text: string;
  try {
    text = readFileSync(config.pricesFile, "utf8");
  } catch {
    throw new Error(`BROKER_LLM_PRICES_FILE: cannot read ${config.pricesFile}`);
  }
  try {
    return parsePriceTable(text);
  } catch (err) {
    throw new Error(`BROKER_LLM_PRICES_FILE: ${config.pricesFile} is not a price table: ${(err as Error).message}`);
  }
}
