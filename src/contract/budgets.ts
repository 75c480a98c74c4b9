// Budgets (issue 38): PUT /v1/vaults/:vault/budgets/:name sets one (the console and `broker budget set` send the same
// body), and every budget view says what it limits, what it used this period and when the period ends. Counts and
// money only: nothing a request carried.

import { z } from "zod";
import { says } from "../schema-input.ts";

const Count = (what: string) =>
  z
    .number(says(`{field} must be a whole number of ${what}`))
    .int(says(`{field} must be a whole number of ${what}`))
    .min(1, says("{field} must be at least 1"))
    .max(1e15, says("{field} is too large"))
    .nullable()
    .optional();

export const BudgetInput = z
  .strictObject(
    {
      scope: z.enum(["vault", "agent", "service", "hosts"], says('{field} must be "vault", "agent", "service" or "hosts"')).describe("what the budget counts"),
      agent: z.string(says("{field} must be an agent's name")).min(1).max(200).optional().describe('with scope "agent": the agent (its sessions too)'),
      service: z.string(says("{field} must be a service's host pattern")).min(1).max(300).optional().describe('with scope "service": the service'),
      hosts: z
        .array(z.string(says("{field} must be host names")).min(1).max(300), says("{field} must be a list of host names"))
        .min(1, says("{field} must name at least one host"))
        .max(100, says("{field} may name at most 100 hosts"))
        .optional()
        .describe('with scope "hosts": the hosts'),
      template: z
        .string(says("{field} must be a template's id"))
        .min(1)
        .max(100)
        .optional()
        .describe('with scope "hosts", instead of hosts: a catalogue template\'s hosts (GET /v1/templates)'),
      period: z.enum(["hour", "day", "week", "month", "none"], says('{field} must be "hour", "day", "week", "month" or "none"')).describe("UTC periods"),
      limits: z
        .strictObject({
          requests: Count("requests"),
          input_tokens: Count("tokens"),
          output_tokens: Count("tokens"),
          total_tokens: Count("tokens"),
          cost: z
            .number(says("{field} must be an amount in the price table's currency"))
            .min(0.000001, says("{field} must be at least 0.000001 (money is counted in millionths)"))
            .max(1e9, says("{field} is too large"))
            .nullable()
            .optional()
            .describe("money, in the price table's currency (USD by default)"),
        })
        .describe("at least one; a request that finds one reached gets 429 budget_exceeded"),
      soft_percent: z
        .number(says("{field} must be a percent"))
        .int()
        .min(1, says("{field} must be 1 to 99"))
        .max(99, says("{field} must be 1 to 99"))
        .nullable()
        .optional(),
      soft_action: z
        .enum(["notify", "approve"], says('{field} must be "notify" or "approve"'))
        .optional()
        .describe('"notify" (a webhook) or "approve" (requests held for a person)'),
    },
    { error: (iss) => (iss.code === "invalid_type" ? "expected a JSON object with scope, period and limits" : undefined) },
  )
  .superRefine((b, ctx) => {
    const l = b.limits;
    if ([l.requests, l.input_tokens, l.output_tokens, l.total_tokens, l.cost].every((v) => v === undefined || v === null))
      ctx.addIssue({ code: "custom", path: ["limits"], message: "{field} must set at least one limit" });
    const needs = { agent: "agent", service: "service" } as const;
    for (const [scope, field] of Object.entries(needs))
      if (b.scope === scope && b[field] === undefined) ctx.addIssue({ code: "custom", path: [field], message: `{field} is required with scope "${scope}"` });
    if (b.scope === "hosts" && b.hosts === undefined && b.template === undefined)
      ctx.addIssue({ code: "custom", path: ["hosts"], message: '{field} is required with scope "hosts" (or a template)' });
    if (b.hosts !== undefined && b.template !== undefined)
      ctx.addIssue({ code: "custom", path: ["template"], message: "{field} is instead of hosts: give one of them, not both" });
    for (const field of ["agent", "service", "hosts"] as const)
      if (b[field] !== undefined && b.scope !== field) ctx.addIssue({ code: "custom", path: [field], message: `{field} is only for scope "${field}"` });
    if (b.template !== undefined && b.scope !== "hosts") ctx.addIssue({ code: "custom", path: ["template"], message: '{field} is only for scope "hosts"' });
    if (b.soft_action === "approve" && (b.soft_percent === undefined || b.soft_percent === null))
      ctx.addIssue({ code: "custom", path: ["soft_percent"], message: '{field} is required with soft_action "approve"' });
  });

const Measures = z.object({
  requests: z.number().nullable(),
  input_tokens: z.number().nullable(),
  output_tokens: z.number().nullable(),
  total_tokens: z.number().nullable(),
  cost: z.number().nullable().describe("in `currency`"),
});

export const BudgetView = z.object({
  name: z.string(),
  scope: z.enum(["vault", "agent", "service", "hosts"]),
  agent: z.string().nullable(),
  service: z.string().nullable(),
  hosts: z.array(z.string()).nullable(),
  period: z.enum(["hour", "day", "week", "month", "none"]),
  currency: z.string(),
  limits: Measures,
  soft_percent: z.number().nullable(),
  soft_action: z.enum(["notify", "approve"]),
  used: Measures.extend({ unpriced_calls: z.number().describe("LLM calls whose model the price table does not name") }),
  state: z.enum(["ok", "soft", "exceeded"]),
  period_start: z.string().nullable().describe("ISO-8601; null for a budget without a period"),
  resets_at: z.string().nullable().describe("ISO-8601; null for a budget without a period"),
});

export const BudgetList = z.object({ budgets: z.array(BudgetView) });

export type BudgetInputBody = z.infer<typeof BudgetInput>;
export type BudgetViewBody = z.infer<typeof BudgetView>;
export type BudgetListBody = z.infer<typeof BudgetList>;
