// The LLM price table over the API and the console (issue 38): anyone signed in reads it and where it came from; the
// owner sets one (read by the same schema as the file, model names kept lower-case) and goes back; nobody else may;
// a table that does not check out is refused naming the field; the console's Settings page shows and sets it.

import { beforeEach, describe, expect, test } from "bun:test";
import { createPriceBook, SHIPPED_PRICES } from "../../../src/policy/index.ts";
import { restorePrices } from "../../../src/workflows/index.ts";
import { createHarness, register, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  (h.domain as { prices?: unknown }).prices = createPriceBook(SHIPPED_PRICES, "shipped");
  owner = (await register(h, "owner@example.com")).token;
});

const TABLE = { currency: "EUR", written: "2026-11-01", models: { "GPT-Test": { input: 1.5, output: 6 } } };

describe("the LLM price table", () => {
  test("the shipped table by default, readable by anyone signed in", async () => {
    const other = (await register(h, "ann@example.com")).token;
    const r = await h.call("GET", "/v1/owner/llm-prices", { token: other });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ source: "shipped", currency: "USD", written: SHIPPED_PRICES.written });
    expect(r.body.models["gpt-4o"]).toEqual({ input: 2.5, output: 10 });
  });

  test("the owner sets one, every later price uses it, a restart keeps it, and DELETE goes back", async () => {
    const set = await h.call("PUT", "/v1/owner/llm-prices", { token: owner, body: TABLE });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ source: "console", currency: "EUR", written: "2026-11-01", models: { "gpt-test": { input: 1.5, output: 6 } } });
    expect(h.domain.prices!.current().currency).toBe("EUR");
    // Another instance (or a restart) reads it from the settings.
    const fresh = createPriceBook(SHIPPED_PRICES, "file");
    await restorePrices({ ...h.domain, prices: fresh });
    expect(fresh.source()).toBe("console");
    expect(fresh.current().models["gpt-test"]).toEqual({ input: 1.5, output: 6 });
    const back = await h.call("DELETE", "/v1/owner/llm-prices", { token: owner });
    expect(back.body).toMatchObject({ source: "shipped", currency: "USD" });
    await restorePrices({ ...h.domain, prices: fresh });
    expect(fresh.source()).toBe("file");
  });

  test("only the owner sets or resets it", async () => {
    const other = (await register(h, "ann@example.com")).token;
    expect((await h.call("PUT", "/v1/owner/llm-prices", { token: other, body: TABLE })).status).toBe(403);
    expect((await h.call("DELETE", "/v1/owner/llm-prices", { token: other })).status).toBe(403);
    expect(h.domain.prices!.source()).toBe("shipped");
  });

  test("a table that does not check out is refused, naming the field", async () => {
    const bad = async (body: unknown) => (await h.call("PUT", "/v1/owner/llm-prices", { token: owner, body })).body;
    expect(await bad({ ...TABLE, currency: "euro" })).toMatchObject({ error: "invalid_request", field: "currency" });
    expect(await bad({ ...TABLE, written: "yesterday" })).toMatchObject({ error: "invalid_request", field: "written" });
    expect(await bad({ ...TABLE, models: { x: { input: -1, output: 1 } } })).toMatchObject({ error: "invalid_request" });
    expect(await bad({ ...TABLE, models: { x: { input: 1 } } })).toMatchObject({ error: "invalid_request" });
    expect(await bad({ ...TABLE, extra: 1 })).toMatchObject({ error: "invalid_request" });
    expect(h.domain.prices!.source()).toBe("shipped");
  });
});

describe("the LLM price table on the owner's Settings page", () => {
  test("shown with where it came from and when the prices were taken; the owner sets one and goes back", async () => {
    const { setUpOwnerConsole } = await import("./console-fixtures.ts");
    const { h: hc, b } = await setUpOwnerConsole();
    (hc.domain as { prices?: unknown }).prices = createPriceBook(SHIPPED_PRICES, "shipped");
    const page = await b.get("/settings");
    expect(page.text).toContain("LLM prices");
    expect(page.text).toContain("the table shipped with the broker");
    expect(page.text).toContain(SHIPPED_PRICES.written);
    const saved = await b.submit("/settings/llm-prices", { table: JSON.stringify(TABLE) });
    expect(saved.text).toContain("Saved: calls are priced by your table of 1 models (EUR, prices taken 2026-11-01).");
    expect(saved.text).toContain("set on this page");
    expect(hc.domain.prices!.current().currency).toBe("EUR");
    const refused = await b.submit("/settings/llm-prices", { table: "{not json" });
    expect(refused.text).toContain("The price table must be JSON");
    const bad = await b.submit("/settings/llm-prices", { table: JSON.stringify({ ...TABLE, written: "soon" }) });
    expect(bad.text).toContain("flash-error");
    expect(hc.domain.prices!.current().written).toBe("2026-11-01");
    const back = await b.submit("/settings/llm-prices/reset", {});
    expect(back.text).toContain("priced by the shipped table again");
    expect(hc.domain.prices!.source()).toBe("shipped");
  });
});
