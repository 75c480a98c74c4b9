// The agent protocol's bodies: /discover, proposals (filed by agents, decided by humans) and their views.
// A proposal's services use the service schemas (services.ts): the same `auth` and `rules` as a service.

import { z } from "zod";
import { RulesInput, ServiceAuthInput } from "./vaults.ts";

const Role = z.enum(["proxy", "member", "admin"]);

export const DiscoveredService = z.object({
  host: z.string().describe("host pattern; host:port when the port is not 443"),
  description: z.string(),
  auth: z
    .looseObject({ type: z.string(), sent: z.string().optional().describe("how the credential travels, in words, where the agent must do something") })
    .describe("how the broker adds the credential: the type, and for query and path auth where it goes; never a key name or value"),
  rules: z.array(z.looseObject({ methods: z.array(z.string()), paths: z.array(z.string()), approve: z.literal("each").optional() })).optional(),
  allows: z.string().optional().describe("the rules in words"),
});

export const Discovery = z.object({
  vault: z.string(),
  proxy_url: z.string().describe("{base_url}/proxy: the explicit proxy's prefix"),
  services: z.array(DiscoveredService).describe("enabled services only"),
  available_credentials: z.array(z.string()).describe("credential key names, never values"),
});

/** One credential slot a proposal asks a human to fill (never a value). */
export const ProposedSlotInput = z.strictObject({
  action: z.literal("set").optional(),
  key: z.string().describe("credential key name (A-Z, 0-9, _; starting with a letter)"),
  description: z.string().nullish(),
  obtain: z.string().nullish().describe("https URL where a human can create the credential"),
  obtain_instructions: z.string().nullish(),
  // Named so the domain answers with its own message: agents never send credential values.
  value: z.never().optional().describe("refused: agents never send credential values; a human types them at approval"),
  secret: z.never().optional().describe("refused, as value"),
});

export const ProposalCreated = z.object({
  id: z.number(),
  status: z.literal("pending"),
  vault: z.string(),
  approval_url: z.string().describe("a read-only link for a human (24 hours)"),
  message: z.string(),
});

const ProposedServiceView = z.looseObject({
  action: z.literal("set"),
  host: z.string(),
  description: z.string(),
  auth: z.looseObject({ type: z.string() }),
  rules: z.array(z.looseObject({})).optional(),
});
const ProposedSlotView = z.object({ action: z.literal("set"), key: z.string(), description: z.string(), obtain: z.string(), obtain_instructions: z.string() });

export const ProposalAnswer = z.object({
  id: z.number(),
  status: z.enum(["pending", "applied", "rejected", "expired"]),
  vault: z.string(),
  message: z.string(),
  user_message: z.string(),
  services: z.array(ProposedServiceView),
  credentials: z.array(ProposedSlotView),
  created_at: z.string(),
  expires_at: z.string(),
  decided_at: z.string().nullable(),
  requested_by: z.string().optional().describe("people only: who asked, by name"),
  requested_by_kind: z.enum(["agent", "user", "session", "unknown"]).optional(),
  requested_by_role: Role.nullable().optional(),
});

export const ProposalList = z.object({ proposals: z.array(ProposalAnswer) });

export const ProposalApprovalLink = z.object({ id: z.number(), approval_url: z.string(), expires_at: z.string() });

export const HealthView = z.object({
  status: z.enum(["ok", "degraded"]),
  version: z.string(),
  database: z
    .object({
      backend: z.enum(["sqlite", "postgres"]),
      reachable: z.boolean(),
      announcements: z.enum(["listening", "lost"]).optional(),
      audit_queued: z.number(),
    })
    .optional(),
});

export const ProposedServiceInput = z.strictObject({
  action: z.literal("set").optional().describe('"set", the only action (adds the service or replaces it)'),
  host: z.string().describe("host pattern (no IP literals), host:port when the port is not 443"),
  description: z.string().nullish(),
  auth: ServiceAuthInput,
  rules: RulesInput,
});

export const ProposalInput = z.strictObject({
  services: z.array(ProposedServiceInput).nullish().describe("at most 10"),
  credentials: z.array(ProposedSlotInput).nullish().describe("at most 10 slots; never values"),
  message: z.string().nullish().describe("to the human approving: what the agent needs and why"),
  user_message: z.string().nullish(),
});

export const ProposalApprovalInput = z.strictObject({
  credentials: z.record(z.string(), z.unknown()).nullish().describe("each slot's key → its value (optional for keys the vault already has)"),
  rules: z.record(z.string(), z.unknown()).nullish().describe("host → rules replacing the ones asked for (null: no rules)"),
});

// The answers' types, for readers of the API (the CLI reads answers by them).
export type DiscoveryBody = z.infer<typeof Discovery>;
export type ProposalAnswerBody = z.infer<typeof ProposalAnswer>;
export type ProposalListBody = z.infer<typeof ProposalList>;
