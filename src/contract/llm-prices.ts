// The LLM price table an owner sets on the console or with PUT /v1/owner/llm-prices (issue 38), and how it is shown:
// the same JSON shape as BROKER_LLM_PRICES_FILE, prices per million tokens in the table's currency, with the date
// they were taken from the providers' price pages.

import { z } from "zod";
import { says } from "../schema-input.ts";

const Price = z
  .number(says("{field} must be a price per million tokens"))
  .min(0, says("{field} must be 0 or more"))
  .max(1_000_000, says("{field} must be at most 1000000"));

export const PriceTableInput = z.strictObject(
  {
    currency: z.string(says('{field} must be a three-letter code, e.g. "USD"')).regex(/^[A-Z]{3}$/, says('{field} must be a three-letter code, e.g. "USD"')),
    written: z
      .string(says("{field} must be the date the prices were taken, YYYY-MM-DD"))
      .regex(/^\d{4}-\d{2}-\d{2}$/, says("{field} must be the date the prices were taken, YYYY-MM-DD")),
    models: z
      .record(
        z.string().min(1, says("a model name must not be empty")).max(200, says("a model name may have at most 200 characters")),
        z.strictObject({ input: Price, output: Price }, says('{field} must be {"input": <price>, "output": <price>}')),
        says('{field} must map model names to {"input", "output"}'),
      )
      .refine((m) => Object.keys(m).length <= 5000, says("{field} may name at most 5000 models")),
  },
  { error: (iss) => (iss.code === "invalid_type" ? 'expected a JSON object {"currency", "written", "models"}' : undefined) },
);

export const PriceTableView = z.object({
  source: z.enum(["console", "file", "shipped"]).describe("set on the console, BROKER_LLM_PRICES_FILE, or the table shipped in the binary"),
  currency: z.string(),
  written: z.string().describe("when the prices were taken from the providers' price pages"),
  models: z.record(z.string(), z.object({ input: z.number(), output: z.number() })).describe("per million tokens"),
});

export type PriceTableInputBody = z.infer<typeof PriceTableInput>;
export type PriceTableViewBody = z.infer<typeof PriceTableView>;
