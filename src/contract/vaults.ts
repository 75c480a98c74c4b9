// Vaults and what lives in one: members, invites, credentials (values only where people ask to read
// them), services (their auth and rules), webhooks and the audit log. Request bodies are strict: a
// field they do not name is refused. Types are loose where the domain's own reader checks the value
// (and words its error), so both always agree on what is accepted.

import { z } from "zod";

const Role = z.enum(["proxy", "member", "admin"]);
const Time = z.string().describe("ISO-8601, UTC");

export const VaultInput = z.strictObject({ name: z.unknown().describe("1-63 lower-case letters, digits or '-'") });
export const VaultUpdateInput = z.strictObject({
  unmatched_hosts: z.unknown().optional().describe('"tunnel" (blind tunnels to hosts that are no service) or "deny"'),
});
export const VaultAnswer = z.object({ name: z.string(), role: Role, created_at: Time, unmatched_hosts: z.enum(["tunnel", "deny"]).optional() });
export const VaultList = z.object({ vaults: z.array(z.object({ name: z.string(), role: Role, created_at: Time })) });
export const MemberList = z.object({ members: z.array(z.object({ email: z.string(), role: Role })) });

export const VaultInviteInput = z.strictObject({
  email: z.unknown().optional().describe("only this address may accept"),
  role: z.unknown().optional().describe("admin, member (default) or proxy"),
});
export const AgentInviteInput = z.strictObject({
  name: z.unknown().optional().describe("the agent's name (default: a generated one)"),
  role: z.unknown().optional().describe("admin, member or proxy (default)"),
  token_ttl_seconds: z.unknown().optional().describe("60 to 315360000, or null: the agent token never expires"),
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

export const CredentialInput = z.strictObject({
  value: z.unknown().describe("the credential's value (at most 64 KiB); never shown again except to people who reveal it"),
});
export const CredentialSet = z.object({ key: z.string(), updated_at: Time });
export const CredentialList = z.object({
  credentials: z.array(z.object({ key: z.string(), updated_at: Time, value: z.string().optional().describe("only with ?reveal=true, for people") })),
});
export const CredentialRevealed = z.object({ key: z.string(), value: z.string().describe("the value, for a person who asked to read it"), updated_at: Time });

const RuleInput = z.strictObject({
  methods: z.unknown().describe("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
  paths: z.unknown().describe("patterns starting with /; * one segment, ** any number"),
  approve: z.unknown().optional().describe('"each": every matching request waits for a person to approve it'),
});
export const RulesInput = z.array(RuleInput).nullish().describe("allowed methods and paths; absent: everything; null (update): remove them");

/** A service's auth: the type decides which fields apply (docs/api.md, Services). */
export const ServiceAuthInput = z
  .strictObject({
    type: z.unknown().describe("bearer, basic, header, query, path, passthrough, oauth2_client_credentials, oauth2_refresh, aws_sigv4, github_app"),
    token: z.unknown().optional().describe("credential key whose value is sent"),
    username: z.unknown().optional(),
    header: z.unknown().optional(),
    prefix: z.unknown().optional(),
    param: z.unknown().optional(),
    template: z.unknown().optional(),
    token_url: z.unknown().optional(),
    client_id: z.unknown().optional(),
    client_secret: z.unknown().optional(),
    refresh_token: z.unknown().optional(),
    scopes: z.unknown().optional(),
    audience: z.unknown().optional(),
    client_auth: z.unknown().optional(),
    access_key_id: z.unknown().optional(),
    secret_access_key: z.unknown().optional(),
    session_token: z.unknown().optional(),
    region: z.unknown().optional(),
    service: z.unknown().optional(),
    app_id: z.unknown().optional(),
    installation_id: z.unknown().optional(),
    private_key: z.unknown().optional(),
    api_url: z.unknown().optional(),
  })
  .describe("how the credential is added; key names only, never values");

export const ServiceInput = z.strictObject({
  host: z.unknown().describe("host pattern; host:port when the port is not 443; *.example.com matches one label"),
  description: z.unknown().optional(),
  auth: ServiceAuthInput,
  enabled: z.unknown().optional(),
  rules: RulesInput,
});
export const ServiceUpdateInput = z.strictObject({
  description: z.unknown().optional(),
  auth: ServiceAuthInput.optional(),
  enabled: z.unknown().optional(),
  rules: RulesInput,
});

const Rule = z.object({ methods: z.array(z.string()), paths: z.array(z.string()), approve: z.literal("each").optional() });
export const ServiceAnswer = z.object({
  host: z.string(),
  description: z.string(),
  auth: z.looseObject({ type: z.string() }),
  enabled: z.boolean(),
  rules: z.array(Rule).optional(),
});
export const ServiceList = z.object({ services: z.array(ServiceAnswer) });

export const WebhookInput = z.strictObject({
  url: z.unknown().describe("https:// (or http://) receiver"),
  format: z.unknown().optional().describe('"json" (default) or "slack"'),
  slack: z.unknown().optional(),
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
      status: z.number(),
      bytes_in: z.number(),
      bytes_out: z.number(),
      duration_ms: z.number(),
      error: z.string().nullable(),
      contained: z.boolean(),
      approved_by: z.string().nullable(),
      approved_by_name: z.string().nullable(),
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
export const RequestApprovalList = z.object({ request_approvals: z.array(RequestApprovalAnswer) });

// The answers' types, for readers of the API (the CLI reads answers by them).
export type VaultAnswerBody = z.infer<typeof VaultAnswer>;
export type VaultListBody = z.infer<typeof VaultList>;
export type MemberListBody = z.infer<typeof MemberList>;
export type InviteCreatedBody = z.infer<typeof InviteCreated>;
export type InviteListBody = z.infer<typeof InviteList>;
export type CredentialListBody = z.infer<typeof CredentialList>;
export type CredentialRevealedBody = z.infer<typeof CredentialRevealed>;
export type ServiceAnswerBody = z.infer<typeof ServiceAnswer>;
export type ServiceListBody = z.infer<typeof ServiceList>;
export type WebhookCreatedBody = z.infer<typeof WebhookCreated>;
export type WebhookListBody = z.infer<typeof WebhookList>;
export type AuditPageAnswerBody = z.infer<typeof AuditPageAnswer>;
export type RequestApprovalAnswerBody = z.infer<typeof RequestApprovalAnswer>;
export type RequestApprovalListBody = z.infer<typeof RequestApprovalList>;
