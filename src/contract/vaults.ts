// Vaults and what lives in one: members, invites, credentials (values only where people ask to read
// them), webhooks and the audit log; services are in services.ts. Request bodies are strict (a field
// they do not name is refused) and their schemas are the one check they get: a handler receives what
// they read, a credential value already in its Secret.

import { z } from "zod";
import { NextCursor } from "./pages.ts";
import { says } from "../schema-input.ts";
import { credentialValue } from "./fields.ts";
import { CredentialReferenceView, ReferenceInput, type CredentialSource } from "./secret-stores.ts";
import { AgentName, Email, VaultName, VaultRoleInput } from "./people-fields.ts";
import { WebhookInput } from "./webhook-input.ts";
import { PolicyModeInput } from "./fields.ts";

/** A vault's policy mode, a service's rules mode (report mode): read with parseWith(PolicyModeInput, raw, "rules_mode"). */
export { PolicyModeInput };

export { WebhookInput };
/** A credential's key as a URL names it (`/credentials/:key`): read with parseWith(KeyName, raw, "key"). */
export { KeyName } from "./fields.ts";

const Role = z.enum(["proxy", "member", "admin"]);
const Time = z.string().describe("ISO-8601, UTC");

export const VaultInput = z.strictObject({ name: VaultName });
export const VaultUpdateInput = z.strictObject({
  unmatched_hosts: z
    .enum(["tunnel", "deny"], says("{field} must be tunnel or deny"))
    .optional()
    .describe('"tunnel" (blind tunnels to hosts that are no service) or "deny"'),
  policy_mode: PolicyModeInput.optional().describe(
    '"enforce" (the default) or "report": what the rules or unmatched_hosts would refuse goes through, its audit record marked would_refuse (human admins only)',
  ),
});
export const VaultAnswer = z.object({
  name: z.string(),
  role: Role,
  created_at: Time,
  unmatched_hosts: z.enum(["tunnel", "deny"]).optional(),
  policy_mode: z.enum(["enforce", "report"]).optional(),
});
export const VaultList = z.object({ vaults: z.array(z.object({ name: z.string(), role: Role, created_at: Time })) });
export const MemberList = z.object({ members: z.array(z.object({ email: z.string(), role: Role })) });

export const VaultInviteInput = z.strictObject({
  email: Email.nullish()
    .transform((e) => e ?? null)
    .describe("only this address may accept"),
  role: VaultRoleInput.nullish().describe("admin, member (default) or proxy; never above your own"),
});

const AGENT_TTL_MAX = 10 * 365 * 86400;
const AGENT_TTL = `{field} must be an integer from 60 to ${AGENT_TTL_MAX}, or null for no expiry`;
// Keys in the order they were always checked, so a body with several faults is answered about the same one.
export const AgentInviteInput = z.strictObject({
  role: VaultRoleInput.nullish().describe("admin, member or proxy (default); never above your own"),
  token_ttl_seconds: z
    .number(says(AGENT_TTL))
    .int(says(AGENT_TTL))
    .min(60, says(AGENT_TTL))
    .max(AGENT_TTL_MAX, says(AGENT_TTL))
    .nullish()
    .describe(`60 to ${AGENT_TTL_MAX}, or null: the agent token never expires`),
  name: AgentName.nullish().describe("the agent's name (default: a generated one)"),
});
export const InviteCreated = z.object({
  id: z.string(),
  token: z.string().describe("shown once"),
  invite_url: z.string(),
  email: z.string().nullable().optional(),
  name: z.string().optional(),
  role: Role,
  expires_at: Time,
});
export const InviteList = z.object({
  invites: z.array(z.object({ id: z.string(), email: z.string().nullable().optional(), name: z.string().nullable().optional(), role: Role, expires_at: Time })),
});

/** A value, or a reference into a secret store (`ref`, with `version`): exactly one. */
export const CredentialInput = z
  .strictObject({
    value: credentialValue().optional().describe("the credential's value (at most 64 KiB); never shown again except to people who reveal it"),
    ref: z.string().optional().describe("instead of a value: <connection>:<path>#<field> in a secret store the vault may use"),
    version: z.string().optional().describe("with ref: a version the store keeps (absent: the latest)"),
  })
  .transform((b, ctx): CredentialSource => {
    if ((b.value === undefined) === (b.ref === undefined)) {
      ctx.addIssue({ code: "custom", path: ["value"], message: 'give exactly one of "value" and "ref"', input: "[redacted]" });
      return z.NEVER;
    }
    if (b.value !== undefined) {
      if (b.version !== undefined) ctx.addIssue({ code: "custom", path: ["version"], message: '{field} goes with "ref" only', input: b.version });
      return { value: b.value };
    }
    const read = ReferenceInput.safeParse({ ref: b.ref, ...(b.version !== undefined && { version: b.version }) });
    if (!read.success) {
      for (const issue of read.error.issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message, input: issue.input });
      return z.NEVER;
    }
    return { reference: read.data };
  });
export const CredentialSet = z.object({ key: z.string(), updated_at: Time, reference: CredentialReferenceView.optional() });
export type CredentialSetBody = z.output<typeof CredentialSet>;
export const CredentialList = z.object({
  credentials: z.array(
    z.object({
      key: z.string(),
      updated_at: Time,
      value: z.string().optional().describe("only with ?reveal=true, for people; never for a reference"),
      reference: CredentialReferenceView.optional().describe("a reference credential: where its value lives and how its last read went"),
    }),
  ),
});
export const CredentialRevealed = z.object({
  key: z.string(),
  value: z.string().optional().describe("the value, for a person who asked to read it (a reference's value stays in its store)"),
  reference: CredentialReferenceView.optional(),
  updated_at: Time,
});

const Webhook = z.object({
  id: z.number(),
  url: z.string(),
  format: z.enum(["json", "slack"]),
  created_at: Time,
  delivery: z.object({ status: z.string(), event: z.string().nullable(), attempts: z.number(), error: z.string().nullable(), at: Time.nullable() }),
});
export const WebhookCreated = Webhook.extend({ secret: z.string().describe("whsec_…, shown once: verify Broker-Signature with it"), message: z.string() });
export const WebhookList = z.object({ webhooks: z.array(Webhook) });

export const AuditPageAnswer = z.object({
  logs: z.array(
    z.object({
      id: z.number(),
      time: Time,
      principal: z.string(),
      principal_name: z.string(),
      principal_kind: z.enum(["agent", "user", "unknown"]),
      ingress: z.string(),
      method: z.string(),
      host: z.string(),
      path: z.string(),
      service: z.string().nullable(),
      credential_keys: z.array(z.string()),
      credential_refs: z.array(z.string()).describe("the credentials by reference among them, as `connection:path#field`; never values"),
      status: z.number(),
      bytes_in: z.number(),
      bytes_out: z.number(),
      duration_ms: z.number(),
      error: z.string().nullable(),
      contained: z.boolean(),
      approved_by: z.string().nullable(),
      approved_by_name: z.string().nullable(),
      llm: z
        .object({
          model: z.string().nullable(),
          input_tokens: z.number(),
          output_tokens: z.number(),
          total_tokens: z.number(),
          cost: z.number().nullable().describe("in `currency`; null when the price table does not price the model"),
          currency: z.string(),
        })
        .nullable()
        .optional()
        .describe("what the request's LLM call used, when the broker metered it (issue 38); null for any other request"),
      workload: z
        .object({ issuer: z.string().nullable(), subject: z.string() })
        .nullable()
        .optional()
        .describe("the workload that asked, by its platform token's iss and sub (issue 39); null for people, agents and their sessions"),
    }),
  ),
  next_cursor: z.string().nullable(),
});

export const RequestApprovalAnswer = z.object({
  id: z.string(),
  vault: z.string(),
  state: z.enum(["pending", "approved", "denied", "used", "expired"]),
  method: z.string(),
  url: z.string(),
  service: z.string(),
  headers: z.array(z.tuple([z.string(), z.string()])),
  body: z.string().nullable(),
  body_bytes: z.number(),
  body_truncated: z.boolean(),
  body_sha256: z.string(),
  requested_by: z.string(),
  requested_by_name: z.string(),
  requested_by_kind: z.enum(["agent", "user", "session", "unknown"]),
  created_at: Time,
  expires_at: Time,
  decided_at: Time.nullable(),
  decided_by: z.string().nullable(),
  used_at: Time.nullable(),
  approval_id: z.string(),
  approval_url: z.string(),
  poll_url: z.string(),
});
export const RequestApprovalList = z.object({
  request_approvals: z.array(RequestApprovalAnswer),
  next_cursor: NextCursor.describe("`after` for the next page; null on the last"),
});

// The answers' types, for readers of the API (the CLI reads answers by them).
export type VaultAnswerBody = z.infer<typeof VaultAnswer>;
export type VaultListBody = z.infer<typeof VaultList>;
export type MemberListBody = z.infer<typeof MemberList>;
export type InviteCreatedBody = z.infer<typeof InviteCreated>;
export type InviteListBody = z.infer<typeof InviteList>;
export type CredentialListBody = z.infer<typeof CredentialList>;
export type CredentialRevealedBody = z.infer<typeof CredentialRevealed>;
export type WebhookCreatedBody = z.infer<typeof WebhookCreated>;
export type WebhookListBody = z.infer<typeof WebhookList>;
export type AuditPageAnswerBody = z.infer<typeof AuditPageAnswer>;
export type RequestApprovalAnswerBody = z.infer<typeof RequestApprovalAnswer>;
export type RequestApprovalListBody = z.infer<typeof RequestApprovalList>;
