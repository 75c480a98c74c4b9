// What an LLM call cost (issue 38): a price table per model, shipped in the binary with the date it was written, that
// an operator can replace (BROKER_LLM_PRICES_FILE), and the cost of a call's tokens by it. Money is counted in
// micro-units of the table's currency (integers: sums over millions of calls stay exact). A model the table does not
// name is unpriced: its tokens are counted, its cost is not guessed.

/** Price of one model, per million tokens, in the table's currency. */
export interface ModelPrice {
  readonly input: number;
  readonly output: number;
}

export interface PriceTable {
  readonly currency: string;
  /** When the prices were taken from the providers' published price pages (YYYY-MM-DD). */
  readonly written: string;
  /** Model name (or prefix ending in `*`) → price. A dated model name ("gpt-4o-2024-08-06") matches its family. */
  readonly models: Readonly<Record<string, ModelPrice>>;
}

/**
 * The shipped table: standard (not batch, not cached-input) prices for text, as the providers published them when it
 * was written. Prices change: an operator who bills by them should keep their own table (BROKER_LLM_PRICES_FILE).
 */
export const SHIPPED_PRICES: PriceTable = {
  currency: "USD",
  written: "2025-11-01",
  models: {
    "gpt-4o": { input: 2.5, output: 10 },
    "gpt-4o-mini": { input: 0.15, output: 0.6 },
    "gpt-4.1": { input: 2, output: 8 },
    "gpt-4.1-mini": { input: 0.4, output: 1.6 },
    "gpt-4.1-nano": { input: 0.1, output: 0.4 },
    o3: { input: 2, output: 8 },
    "o4-mini": { input: 1.1, output: 4.4 },
    "text-embedding-3-small": { input: 0.02, output: 0 },
    "text-embedding-3-large": { input: 0.13, output: 0 },
    "claude-opus-4-1": { input: 15, output: 75 },
    "claude-opus-4": { input: 15, output: 75 },
    "claude-sonnet-4-5": { input: 3, output: 15 },
    "claude-sonnet-4": { input: 3, output: 15 },
    "claude-haiku-4-5": { input: 1, output: 5 },
    "claude-3-5-haiku": { input: 0.8, output: 4 },
    "gemini-2.5-pro": { input: 1.25, output: 10 },
    "gemini-2.5-flash": { input: 0.3, output: 2.5 },
    "gemini-2.5-flash-lite": { input: 0.1, output: 0.4 },
    "gemini-2.0-flash": { input: 0.1, output: 0.4 },
  },
};

/** The price of `model` in `table`: its exact name, else the longest name it extends with a date or version suffix. */
export function priceOf(table: PriceTable, model: string | null): ModelPrice | undefined {
  if (!model) return undefined;
  const name = model.toLowerCase().replace(/^models\//, "");
  const exact = table.models[name];
  if (exact) return exact;
  let best: string | undefined;
  for (const key of Object.keys(table.models)) {
    const prefix = key.endsWith("*") ? key.slice(0, -1) : `${key}-`;
    // "gpt-4o-2024-08-06" is gpt-4o, but "gpt-4o-mini" is not: a longer name in the table wins.
    if (name.startsWith(prefix) && (!best || key.length > best.length)) best = key;
  }
  return best ? table.models[best] : undefined;
}

/** The call's cost in micro-units of the table's currency, or undefined when the model is unpriced. */
export function costMicros(table: PriceTable, model: string | null, inputTokens: number, outputTokens: number): number | undefined {
  const p = priceOf(table, model);
  if (!p) return undefined;
  // Per million tokens × tokens = micro-units, rounded up: a budget never under-counts.
  return Math.ceil(p.input * inputTokens + p.output * outputTokens);
}

/**
 * What a money limit counts for a call: its cost, or, for a model the table does not price, its tokens at the table's
 * dearest input and output prices (a model missing from the table, a fine-tune, a new one, must not spend freely).
 */
export function chargedMicros(table: PriceTable, cost: number | undefined, inputTokens: number, outputTokens: number): number {
  if (cost !== undefined) return cost;
  let input = 0;
  let output = 0;
  for (const p of Object.values(table.models)) {
    input = Math.max(input, p.input);
    output = Math.max(output, p.output);
  }
  return Math.ceil(input * inputTokens + output * outputTokens);
}

/** Reads an operator's table (JSON: {"currency", "written", "models": {name: {"input", "output"}}}); throws why not. */
export function parsePriceTable(text: string): PriceTable {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new Error("not JSON");
  }
  const o = v as Partial<PriceTable> | null;
  if (!o || typeof o !== "object") throw new Error("not a JSON object");
  if (typeof o.currency !== "string" || !/^[A-Z]{3}$/.test(o.currency)) throw new Error('"currency" must be a three-letter code, e.g. "USD"');
  if (typeof o.written !== "string" || !/^\d{4}-\d{2}-\d{2}$/.test(o.written)) throw new Error('"written" must be the date the prices were taken, YYYY-MM-DD');
  if (!o.models || typeof o.models !== "object" || Array.isArray(o.models)) throw new Error('"models" must map model names to {"input", "output"}');
  const models: Record<string, ModelPrice> = {};
  for (const [name, p] of Object.entries(o.models)) {
    const price = p as Partial<ModelPrice> | null;
    const ok = (n: unknown) => typeof n === "number" && Number.isFinite(n) && n >= 0 && n <= 1_000_000;
    if (!price || !ok(price.input) || !ok(price.output))
      throw new Error(`models.${name}: "input" and "output" must be prices per million tokens (0 to 1,000,000)`);
    models[name.toLowerCase()] = { input: price.input!, output: price.output! };
  }
  return { currency: o.currency, written: o.written, models };
}

/** Where the table in use came from: a person on the console (or the API), the operator's file, or the binary. */
export type PriceSource = "console" | "file" | "shipped";

/**
 * The price table in use, changeable while the broker runs: the operator's file (or the shipped table) underneath,
 * and a table an owner set on the console over it, until they go back.
 */
export interface PriceBook {
  current(): PriceTable;
  source(): PriceSource;
  /** A table set on the console, or undefined to go back to the file's (or the shipped one). */
  use(table: PriceTable | undefined): void;
}

export function createPriceBook(base: PriceTable, baseSource: Exclude<PriceSource, "console">): PriceBook {
  let set: PriceTable | undefined;
  return {
    current: () => set ?? base,
    source: () => (set ? "console" : baseSource),
    use(table) {
      set = table;
    },
  };
}

/** The setting the console's table is kept under (the settings table; changes are announced to every instance). */
export const PRICE_SETTING = "llm_prices";
