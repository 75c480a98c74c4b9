// An exported audit record and span carry what a metered LLM call used (issue 38) under OpenTelemetry's GenAI names,
// and nothing of the kind for any other request.

import { expect, test } from "bun:test";
import type { AuditEntry } from "../../../src/egress/index.ts";
import { auditAttributes, llmAttributes } from "../../../src/telemetry/audit-records.ts";

const plain: AuditEntry = {
  at: 1,
  principal: "agent:1",
  vaultId: 1,
  vault: "v",
  ingress: "explicit",
  method: "POST",
  host: "api.openai.com",
  path: "/v1/chat/completions",
  service: "api.openai.com",
  credentialKeys: "OPENAI_KEY",
  status: 200,
  bytesIn: 10,
  bytesOut: 20,
  durationMs: 5,
  error: null,
  contained: false,
  approvedBy: null,
};

test("a metered call: gen_ai.usage.* tokens, the model and the cost", () => {
  const metered = { ...plain, llmModel: "gpt-4o-mini", inputTokens: 12, outputTokens: 7, totalTokens: 19, costMicros: 6 };
  expect(auditAttributes(metered)).toMatchObject({
    "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": 7,
    "gen_ai.response.model": "gpt-4o-mini",
    "broker.llm.cost_micros": 6,
  });
  // Unpriced: no cost attribute.
  expect(llmAttributes({ ...metered, costMicros: null })).toEqual({
    "gen_ai.usage.input_tokens": 12,
    "gen_ai.usage.output_tokens": 7,
    "gen_ai.response.model": "gpt-4o-mini",
  });
});

test("any other request: none of them", () => {
  expect(Object.keys(auditAttributes(plain)).filter((k) => k.startsWith("gen_ai.") || k.startsWith("broker.llm."))).toEqual([]);
});
