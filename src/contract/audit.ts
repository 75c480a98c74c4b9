// The audit log's export and verification (docs/audit-chain.md, "Export" and "Verifying"): a vault's chained
// records page by page in seq order with the chain's anchor and head, and the broker's own verification of the
// chain. Names and numbers only, as the audit log holds: never a credential value, header value, body or query.

import { z } from "zod";

const Time = z.string().describe("ISO-8601, UTC");
const Hash = z.string().describe("64 lower-case hex digits (SHA-256)");
const ChainPoint = z.object({ seq: z.number(), hash: Hash });
const SignedAnchor = ChainPoint.extend({
  at: z.number().nullable().describe("when retention moved it (ms since the epoch); null at the genesis"),
  key_id: z.string().nullable().describe("the signing key's id"),
  signature: z.string().nullable().describe('base64url Ed25519 signature of ["broker-audit-anchor-v1", vault_id, seq, hash, at, key_id]; null at the genesis'),
});

/** One chained record, its fields as the canonical encoding takes them (docs/audit-chain.md). */
export const AuditExportRecord = z.object({
  id: z.number(),
  seq: z.number().describe("its place in the vault's chain"),
  prev: Hash.describe("the hash of the vault's record seq - 1 (or the anchor's)"),
  hash: Hash.describe("SHA-256 of its canonical encoding"),
  at: z.number().describe("when the request began, milliseconds since the Unix epoch"),
  principal: z.string().describe("the internal principal id, e.g. agent:3"),
  vault: z.string().describe("the vault's name when the record was written"),
  ingress: z.string(),
  method: z.string(),
  host: z.string(),
  path: z.string().describe("no query"),
  service: z.string().nullable(),
  credential_keys: z.string().describe("the key names joined with ,"),
  credential_refs: z.string().nullable().describe("the references as a JSON array in a string; never values"),
  status: z.number(),
  bytes_in: z.number(),
  bytes_out: z.number(),
  duration_ms: z.number(),
  error: z.string().nullable(),
  contained: z.boolean(),
  approved_by: z.string().nullable(),
  // The LLM usage (issue 38): optional, so an export made before it still reads (as null).
  llm_model: z.string().nullable().optional().describe("the model an LLM call named; null when not an LLM call"),
  input_tokens: z.number().nullable().optional().describe("input tokens the provider reported; null when not an LLM call"),
  output_tokens: z.number().nullable().optional().describe("output tokens the provider reported"),
  total_tokens: z.number().nullable().optional().describe("total tokens the provider reported"),
  cost_micros: z
    .number()
    .nullable()
    .optional()
    .describe("the call's cost in integer micro-units of the price table's currency; null when unpriced or not an LLM call"),
  // The workload (issue 39): optional, so an export made before it still reads (as null).
  workload_issuer: z.string().nullable().optional().describe("the platform token's iss of a workload's session; null for anyone else"),
  workload_subject: z.string().nullable().optional().describe("the platform token's sub of a workload's session; null for anyone else"),
});

export const AuditExportAnswer = z.object({
  vault: z.string(),
  vault_id: z.number().describe("the vault's internal id, which every record's hash covers"),
  anchor: SignedAnchor.describe(
    "where verification starts: the last record retention removed, signed by it (seq 0 and 64 zeros before any was); read after this page's records",
  ),
  head: ChainPoint.describe("the last record written when this page was read"),
  exported_at: z.number().describe("when this page was read (ms since the epoch, the broker's clock)"),
  checkpoint_seconds: z.number().nullable().describe("BROKER_AUDIT_CHECKPOINT_SECONDS: every record is signed by a checkpoint within it of its writing"),
  signed_through: z
    .number()
    .nullable()
    .describe("every record up to this seq was written longer ago than the interval plus 10 s, so a checkpoint must sign it (null: none yet)"),
  records: z.array(AuditExportRecord).describe("seq order (records sharing a seq, which only an insertion makes, in id order)"),
  next_after_seq: z.number().nullable().describe("`after_seq` for the next page; null on the last"),
  principal_names: z.record(z.string(), z.string()).describe("who each principal of this page is (an agent's name, a person's email); not part of the chain"),
  unchained: z
    .object({
      before_chain: z.number().describe("records written before the chain began (before migration 23): not verified"),
      after_chain: z.array(z.number()).describe("ids of records without chain fields written after it began: insertions (at most 100)"),
    })
    .nullable()
    .describe("on the first page (no after_seq) only"),
});

export const AuditChainBreak = z.object({
  kind: z.enum(["edited", "missing", "inserted", "out_of_order", "anchor", "truncated", "rewritten", "forged_checkpoint", "deleted_checkpoint", "unsigned"]),
  seq: z.number().describe("the record's seq; for missing records the first missing one; for a checkpoint the seq it signed"),
  id: z.number().nullable().describe("the record named, when there is one"),
  checkpoint: z.number().nullable().describe("the checkpoint concerned"),
  message: z.string().describe('e.g. "record seq 41 (id 1234): edited — its hash does not match its contents"'),
});

export const AuditVerifyAnswer = z.object({
  vault: z.string(),
  vault_id: z.number(),
  ok: z.boolean().describe("true when no break was found"),
  records: z.number().describe("chained records verified"),
  verified: z
    .object({ seq: z.number(), id: z.number(), at: z.number(), time: Time, hash: Hash })
    .nullable()
    .describe("the last record of the intact chain; null when it breaks or holds no record"),
  checkpoints: z.object({
    checked: z.number().describe("checkpoints covering the vault whose signature verified"),
    unchecked: z.number().describe("checkpoints not checked (the broker has no signing key)"),
  }),
  breaks: z.array(AuditChainBreak).describe("first (lowest seq) first; at most 100"),
  anchor: SignedAnchor,
  head: ChainPoint,
  unchained_before_chain: z.number().describe("records written before the chain began: not verified"),
  checked_at: Time.describe("when this verification ran (the broker keeps it while the vault's head stays)"),
});

export type AuditExportRecordBody = z.infer<typeof AuditExportRecord>;
export type AuditExportAnswerBody = z.infer<typeof AuditExportAnswer>;
export type AuditChainBreakBody = z.infer<typeof AuditChainBreak>;
export type AuditVerifyAnswerBody = z.infer<typeof AuditVerifyAnswer>;
