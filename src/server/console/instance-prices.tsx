/** @jsxImportSource hono/jsx */
// The LLM price table on the owner's Settings page (issue 38): where the table in use came from and when its prices
// were taken, the models it prices, and a form to set another (the same JSON as BROKER_LLM_PRICES_FILE, read by the
// API's PriceTableInput) or go back to the file's or the shipped one.

import type { Hono } from "hono";
import { parseWith, PriceTableInput } from "../../contract/index.ts";
import { InvalidRequest } from "../../errors.ts";
import { requireOwner } from "../../identity/index.ts";
import { resetPrices, setPrices, type PriceTableView } from "../../workflows/index.ts";
import { Button, Name, PostForm, Section, Table } from "../ui/index.ts";
import { formOf, requireSignedIn, runAction, signedIn, type ConsoleEnv } from "./context.tsx";

const SOURCE_TEXT: Record<PriceTableView["source"], string> = {
  console: "set on this page",
  file: "the operator's file (BROKER_LLM_PRICES_FILE)",
  shipped: "the table shipped with the broker",
};

export function PricesSection(props: { prices: PriceTableView | undefined }) {
  const p = props.prices;
  if (!p) return null;
  const rows = Object.entries(p.models)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([model, price]) => ({ model, ...price }));
  return (
    <Section
      title="LLM prices"
      id="llm-prices"
      description="What metered LLM calls cost, for budgets, the logs and /metrics: per million tokens, in the table's currency. A model the table does not name counts its tokens and is shown as unpriced."
    >
      <dl class="overview" id="llm-prices-facts">
        <dt>In use</dt>
        <dd>{SOURCE_TEXT[p.source]}</dd>
        <dt>Prices taken</dt>
        <dd>
          {p.written} <span class="muted small">(prices change: keep your own table if you bill by them)</span>
        </dd>
        <dt>Currency</dt>
        <dd>{p.currency}</dd>
      </dl>
      <details class="disclosure" id="llm-price-models">
        <summary>
          The {rows.length} {rows.length === 1 ? "model" : "models"} it prices
        </summary>
        <Table
          id="llm-price-table"
          rows={rows}
          columns={[
            { label: "Model", cell: (r) => <Name>{r.model}</Name> },
            { label: `Input per million tokens`, class: "num", cell: (r) => `${r.input} ${p.currency}` },
            { label: `Output per million tokens`, class: "num", cell: (r) => `${r.output} ${p.currency}` },
          ]}
        />
      </details>
      <h3>Set your own table</h3>
      <PostForm action="/settings/llm-prices" id="llm-prices-form">
        <div class="field">
          <label for="llm-prices-json">Price table (JSON)</label>
          <textarea id="llm-prices-json" name="table" rows={10} spellcheck={false} aria-describedby="llm-prices-hint">
            {JSON.stringify({ currency: p.currency, written: p.written, models: p.models }, null, 2)}
          </textarea>
          <p class="hint" id="llm-prices-hint">
            <code>{'{"currency": "USD", "written": "YYYY-MM-DD", "models": {"gpt-4o": {"input": 2.5, "output": 10}}}'}</code>. A dated model name
            (gpt-4o-2024-08-06) is priced as its family. Every instance uses it at once.
          </p>
        </div>
        <div class="actions">
          <Button variant="primary">Save prices</Button>
        </div>
      </PostForm>
      {p.source === "console" ? (
        <PostForm action="/settings/llm-prices/reset" id="llm-prices-reset">
          <div class="actions">
            <Button>Go back to the file's or the shipped table</Button>
          </div>
        </PostForm>
      ) : null}
    </Section>
  );
}

/** POST /settings/llm-prices and /settings/llm-prices/reset (the owner only). */
export function priceRoutes(r: Hono<ConsoleEnv>): void {
  r.post("/settings/llm-prices", requireSignedIn, (c) =>
    runAction(c, {
      run: async () => {
        requireOwner(signedIn(c)); // anyone else is refused before what they typed is read
        let typed: unknown;
        try {
          typed = JSON.parse(formOf(c).table ?? "");
        } catch {
          throw new InvalidRequest('the price table must be JSON: {"currency", "written", "models"}', "table");
        }
        return setPrices(c.get("kit").d, signedIn(c), parseWith(PriceTableInput, typed));
      },
      success: (p) => `Saved: calls are priced by your table of ${Object.keys(p.models).length} models (${p.currency}, prices taken ${p.written}).`,
      redirect: "/settings#llm-prices",
      failure: "/settings#llm-prices",
    }),
  );
  r.post("/settings/llm-prices/reset", requireSignedIn, (c) =>
    runAction(c, {
      run: () => resetPrices(c.get("kit").d, signedIn(c)),
      success: (p) => `Saved: calls are priced by ${p.source === "file" ? "the operator's file" : "the shipped table"} again.`,
      redirect: "/settings#llm-prices",
    }),
  );
}
