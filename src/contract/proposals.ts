// The agent protocol's bodies: /discover, proposals (filed by agents, decided by humans) and their views.
// A proposal's services use the service schemas (service-auth.ts, policy's RulesList): the same `auth`
// and `rules` as a service.

import { z } from "zod";
import { NextCursor } from "./pages.ts";
import { LIMITS, parseHostPattern, RulesList } from "../policy/index.ts";
import { parsedBy, says } from "../schema-input.ts";
import { Secret } from "../secret.ts";
import { ReferenceInput, type CredentialSource } from "./secret-stores.ts";
import type { SecretReference } from "../policy/index.ts";
import { credentialValue, KeyName, omittedWhenEmpty, optionalText, urlCheckedBy } from "./fields.ts";
import { ServiceAuthInput } from "./service-auth.ts";
import { ServiceTemplate } from "./templates.ts";
import { readStatedService, TemplateFields } from "./template-input.ts";
import type { ProposedService } from "../store/index.ts";
import { HOST_TEXT } from "./services.ts";

const Role = z.enum(["proxy", "member", "admin"]);

export const DiscoveredService = z.object({
  host: z.string().describe("host pattern; host:port when the port is not 443"),
  description: z.string(),
  auth: z
    .looseObject({ type: z.string(), sent: z.string().optional().describe("how the credential travels, in words, where the agent must do something") })
    .describe("how the broker adds the credential: the type, and for query and path auth where it goes; never a key name or value"),
  rules: z.array(z.looseObject({ methods: z.array(z.string()), paths: z.array(z.string()), approve: z.literal("each").optional() })).optional(),
  allows: z.string().optional().describe("the rules in words"),
  template: ServiceTemplate.omit({ catalogue_rules: true }).optional().describe("the catalogue template the service was made from"),
});

export const Discovery = z.object({
  vault: z.string(),
  proxy_url: z.string().describe("{base_url}/proxy: the explicit proxy's prefix"),
  services: z.array(DiscoveredService).describe("enabled services only"),
  available_credentials: z.array(z.string()).describe("credential key names, never values"),
  templates: z
    .array(z.object({ id: z.string(), name: z.string(), hosts: z.array(z.string()), operations: z.array(z.string()) }))
    .describe("the catalogue: a proposal may name one ({template, operations}) instead of spelling out auth and rules"),
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
  template: z.string().optional().describe("asked for by this catalogue template"),
  operations: z.array(z.string()).optional(),
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

export const ProposalList = z.object({
  proposals: z.array(ProposalAnswer),
  next_cursor: NextCursor.describe("`before` for the next (older) page; null on the last"),
});

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
  worker: z
    .object({ id: z.number(), of: z.number() })
    .optional()
    .describe("with `broker server --workers N`: which worker answered (its connection stays with it), of how many"),
});

// What an agent may ask for (architecture.md D14: hosts without IP literals); every text has a limit,
// `obtain` is an https link, and a slot never carries a value: the human types it at approval.
const proposalText = (max: number) => optionalText(max);
const Action = z
  .literal("set", says('{field} must be "set" (the only supported action)'))
  .optional()
  .transform(() => "set" as const)
  .describe('"set", the only action (adds the service or replaces it)');
const OBTAIN = "{field} must be an https URL";
const Obtain = proposalText(2048)
  .transform((text, ctx) =>
    text === ""
      ? ""
      : urlCheckedBy(OBTAIN, (url) => (url.protocol === "https:" && !url.username && !url.password ? null : `${OBTAIN} without credentials`))(text, ctx),
  )
  .describe("https URL where a human can create the credential");
// Named so the answer is the broker's own: agents never send credential values.
const NeverAValue = z
  .unknown()
  .refine(() => false, says("{parent}: agents never send credential values; a human types them at approval"))
  .optional()
  .describe("refused: agents never send credential values; a human types them at approval");

/** A service an agent asks for: its host, auth and rules, or a catalogue template and operations. */
export const ProposedServiceInput = z
  .strictObject({
    rules: RulesList.nullish().transform((r) => r ?? undefined),
    action: Action,
    // An IP literal reads here as a service's would; the domain accepts it only where the network guard would dial it.
    host: parsedBy((v, field) => parseHostPattern(v, { allowIp: true }, field).text, HOST_TEXT)
      .optional()
      .describe("host pattern, host:port when the port is not 443; an IP address only where the broker's network guard allows it"),
    description: proposalText(500),
    auth: ServiceAuthInput.optional(),
    ...TemplateFields,
  })
  .transform(({ action, description, ...stated }, ctx): ProposedService => {
    const read = readStatedService(stated, ctx, true);
    if (!read) return z.NEVER;
    const { from, ...service } = read;
    return { action, description, ...service, ...(from && { template: from.template, operations: from.operations }) };
  });

/** One credential slot a proposal asks a human to fill (never a value). */
export const ProposedSlotInput = z.strictObject({
  value: NeverAValue,
  secret: NeverAValue,
  action: Action,
  key: KeyName,
  description: proposalText(500),
  obtain: Obtain,
  obtain_instructions: proposalText(2000),
});

const unique =
  <T>(field: string, what: string, of: (item: T) => string) =>
  (items: readonly T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    for (const item of items) {
      const value = of(item);
      if (seen.has(value)) ctx.addIssue({ code: "custom", message: `${field}: ${what} ${value} appears twice`, input: items });
      seen.add(value);
    }
  };

export const ProposalInput = z
  .strictObject({
    services: z
      .array(ProposedServiceInput, says("services must be a list"))
      .max(LIMITS.servicesPerProposal, says(`at most ${LIMITS.servicesPerProposal} services per proposal`))
      .nullish()
      .transform((s) => s ?? [])
      .describe(`at most ${LIMITS.servicesPerProposal}`)
      .superRefine(unique("services", "host", (s) => s.host)),
    credentials: z
      .array(ProposedSlotInput, says("credentials must be a list"))
      .max(LIMITS.credentialsPerProposal, says(`at most ${LIMITS.credentialsPerProposal} credential slots per proposal`))
      .nullish()
      .transform((c) => (c ?? []).map(({ value: _v, secret: _s, ...slot }) => slot))
      .describe(`at most ${LIMITS.credentialsPerProposal} slots; never values`)
      .superRefine(unique("credentials", "key", (c) => c.key)),
    message: proposalText(2000).describe("to the human approving: what the agent needs and why"),
    user_message: proposalText(2000),
  })
  .superRefine((p, ctx) => {
    if (p.services.length === 0 && p.credentials.length === 0)
      ctx.addIssue({ code: "custom", path: ["services"], message: "a proposal needs at least one service or credential slot", input: p });
  });

/**
 * One slot's answer: a value (text), or a reference (an object). Dispatched by its shape rather than by a
 * union, so a refusal says what is wrong with the one that was given (a line break in a value, a reference
 * without its connection), not that the answer is neither.
 */
const SlotValue = omittedWhenEmpty(credentialValue("{key}"));
const SlotAnswer = z
  .unknown()
  .transform((v, ctx): Secret | SecretReference | undefined => {
    const isObject = v !== null && typeof v === "object";
    if (isObject && (Array.isArray(v) || !("ref" in v))) {
      ctx.addIssue({ code: "custom", message: '{key} must be its value (text), or {"ref": "<connection>:<path>#<field>"}', input: "[redacted]" });
      return z.NEVER;
    }
    const read = isObject ? ReferenceInput.safeParse(v) : SlotValue.safeParse(v);
    if (read.success) return read.data;
    for (const issue of read.error.issues) ctx.addIssue({ code: "custom", message: issue.message, path: issue.path, input: "[redacted]" });
    return z.NEVER;
  })
  .describe('the value (text), or {"ref": "<connection>:<path>#<field>", "version"?}');

/** A person's approval: the slots' values by key, and rules by host replacing the ones asked for. */
export const ProposalApprovalInput = z.strictObject({
  credentials: z
    // "" is no value: a slot whose key the vault already has keeps the stored one.
    .record(z.string(), SlotAnswer, says("credentials must map each key to its value"))
    .nullish()
    .transform((values) =>
      Object.fromEntries(
        Object.entries(values ?? {}).flatMap(([key, v]): [string, CredentialSource][] =>
          v === undefined ? [] : [[key, v instanceof Secret ? { value: v } : { reference: v }]],
        ),
      ),
    )
    .describe('each slot\'s key → its value, or {"ref": "<connection>:<path>#<field>", "version"?} (optional for keys the vault already has)'),
  rules: z
    .record(z.string(), RulesList.nullable(), says("rules must map each host of the proposal to its rules"))
    .nullish()
    .transform((r) => r ?? undefined)
    .describe("host → rules replacing the ones asked for (null: no rules)"),
});

export type ProposalSpec = z.output<typeof ProposalInput>;

// The answers' types, for readers of the API (the CLI reads answers by them).
export type DiscoveryBody = z.infer<typeof Discovery>;
export type ProposalAnswerBody = z.infer<typeof ProposalAnswer>;
export type ProposalListBody = z.infer<typeof ProposalList>;
