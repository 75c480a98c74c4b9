// What an LLM call cost (src/policy/llm-prices.ts): a model's price by its exact name or the family a dated name
// extends (the longest match, so gpt-4o-mini is not gpt-4o), the cost in integer micro-units rounded up, unpriced
// models left unpriced, and an operator's table read strictly.

import { describe, expect, test } from "bun:test";
import { chargedMicros, costMicros, parsePriceTable, priceOf, SHIPPED_PRICES } from "../../../src/policy/llm-prices.ts";

describe("prices", () => {
  test("exact names, dated and versioned names, the longest family first, Gemini's models/ prefix", () => {
    expect(priceOf(SHIPPED_PRICES, "gpt-4o")).toEqual({ input: 2.5, output: 10 });
    expect(priceOf(SHIPPED_PRICES, "gpt-4o-2024-08-06")).toEqual({ input: 2.5, output: 10 });
    expect(priceOf(SHIPPED_PRICES, "gpt-4o-mini-2024-07-18")).toEqual({ input: 0.15, output: 0.6 });
    expect(priceOf(SHIPPED_PRICES, "claude-sonnet-4-5-20250929")).toEqual({ input: 3, output: 15 });
    expect(priceOf(SHIPPED_PRICES, "claude-sonnet-4-20250514")).toEqual({ input: 3, output: 15 });
    expect(priceOf(SHIPPED_PRICES, "models/gemini-2.0-flash-001")).toEqual({ input: 0.1, output: 0.4 });
    expect(priceOf(SHIPPED_PRICES, "GPT-4O")).toEqual({ input: 2.5, output: 10 });
    for (const unknown of ["gpt-4o2", "llama-3.1-70b", "", null]) expect(priceOf(SHIPPED_PRICES, unknown)).toBeUndefined();
    expect(SHIPPED_PRICES.written).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  test("cost in micro-units, rounded up; unpriced models cost nothing known", () => {
    // gpt-4o-mini: 1,000 in × $0.15/M + 500 out × $0.60/M = $0.00045 = 450 micro-dollars.
    expect(costMicros(SHIPPED_PRICES, "gpt-4o-mini", 1000, 500)).toBe(450);
    // text-embedding-3-small: 3 tokens × $0.02/M = 0.06 micro-dollars, rounded up to 1.
    expect(costMicros(SHIPPED_PRICES, "text-embedding-3-small", 3, 0)).toBe(1);
    expect(costMicros(SHIPPED_PRICES, "no-such-model", 1000, 1000)).toBeUndefined();
  });

  test("an operator's table: read strictly, each refusal says which field", () => {
    const table = parsePriceTable(JSON.stringify({ currency: "EUR", written: "2026-11-01", models: { "Local-Llama": { input: 0, output: 0.5 } } }));
    expect(priceOf(table, "local-llama-3")).toEqual({ input: 0, output: 0.5 });
    for (const [bad, why] of [
      ["{", "not JSON"],
      ["[]", '"currency"'],
      [JSON.stringify({ currency: "euro", written: "2026-11-01", models: {} }), '"currency"'],
      [JSON.stringify({ currency: "EUR", written: "yesterday", models: {} }), '"written"'],
      [JSON.stringify({ currency: "EUR", written: "2026-11-01", models: [] }), '"models"'],
      [JSON.stringify({ currency: "EUR", written: "2026-11-01", models: { m: { input: -1, output: 1 } } }), "models.m"],
      [JSON.stringify({ currency: "EUR", written: "2026-11-01", models: { m: { input: "1", output: 1 } } }), "models.m"],
    ] as const)
      expect(() => parsePriceTable(bad)).toThrow(why);
  });
});

test("an unpriced model is charged its tokens at the table's dearest prices; a priced one its cost", () => {
  const table = { currency: "USD", written: "2026-01-01", models: { a: { input: 1, output: 2 }, b: { input: 3, output: 0.5 } } };
  expect(chargedMicros(table, undefined, 10, 10)).toBe(3 * 10 + 2 * 10);
  expect(chargedMicros(table, 7, 10, 10)).toBe(7);
});
