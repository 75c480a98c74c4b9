// The audit log's signed checkpoints (docs/audit-chain.md, Checkpoints): the public key that verifies them
// and a vault's checkpoints. Hashes, numbers and the key: nothing a record does not already show.

import { z } from "zod";

const Hash = z.string().describe("64 lower-case hex digits (SHA-256)");

export const AuditCheckpointHead = z.object({
  vault_id: z.number().describe("the vault's internal id (stays when it is renamed or deleted)"),
  seq: z.number().describe("the head's place in the vault's chain"),
  hash: Hash,
});

export const AuditPublicKeyAnswer = z.object({
  key_id: z.string().describe("the first 16 hex digits of the SHA-256 of the public key's SPKI DER"),
  public_key_pem: z.string().describe("the Ed25519 public key, SubjectPublicKeyInfo in PEM"),
  created_at: z.string().describe("ISO-8601, UTC"),
});

export const AuditCheckpoint = z.object({
  id: z.number(),
  at: z.number().describe("when it was signed, milliseconds since the Unix epoch"),
  key_id: z.string(),
  heads: z.array(AuditCheckpointHead).describe("this vault's head only"),
  signed_heads: z.array(AuditCheckpointHead).describe("every head the signature covers (this vault's among them), sorted by vault_id"),
  signature: z.string().describe("base64url (no padding) Ed25519 signature of the checkpoint message over signed_heads"),
});

export const AuditCheckpointPage = z.object({
  checkpoints: z.array(AuditCheckpoint),
  next_after_id: z.number().nullable().describe("`after_id` for the next page; null on the last"),
});

export type AuditPublicKeyAnswerBody = z.infer<typeof AuditPublicKeyAnswer>;
export type AuditCheckpointBody = z.infer<typeof AuditCheckpoint>;
export type AuditCheckpointPageBody = z.infer<typeof AuditCheckpointPage>;
