// A vault's services: the bodies that add and change one, and the answers. The host is read by the
// same grammar as everywhere a host pattern is named (policy's parseHostPattern), the rules by
// policy's RulesList, the auth by service-auth.ts.

import { z } from "zod";
import { NextCursor } from "./pages.ts";
import { parseHostPattern, RulesList } from "../policy/index.ts";
import { parsedBy, says } from "../schema-input.ts";
import { ServiceAuthInput } from "./service-auth.ts";
import { PolicyModeInput } from "./fields.ts";
import { readStatedService, readTemplatePatch, TemplateFields } from "./template-input.ts";
import { ServiceTemplate } from "./templates.ts";

export { AUTH_TYPES, ServiceAuthInput } from "./service-auth.ts";

/** A service's host: a name or an IP address, `*.` for one label, `:port` when it is not 443. */
export const HOST_TEXT = z.string(says("{field}: must be a host name"));
export const ServiceHost = parsedBy((v, field) => parseHostPattern(v, { allowIp: true }, field).text, HOST_TEXT).describe(
  "host pattern; host:port when the port is not 443; *.example.com matches one label",
);

const DESCRIPTION = "{field} must be text of at most 500 characters";
const Description = z.string(says(DESCRIPTION)).max(500, says(DESCRIPTION)).nullable();
const Enabled = z.boolean(says("{field} must be true or false"));
// A proposal's services (proposals.ts) have no such field: only a person switches rules to report mode.
const RULES_MODE =
  '"report": a request the rules refuse goes through, its audit record marked would_refuse; "enforce": refused; null or absent: the vault\'s policy_mode (human admins only)';

export const ServiceInput = z
  .strictObject({
    host: ServiceHost.optional(),
    description: Description.optional().transform((d) => d ?? ""),
    auth: ServiceAuthInput.optional(),
    enabled: Enabled.optional().transform((e) => e ?? true),
    rules: RulesList.nullish().transform((r) => r ?? undefined),
    rules_mode: PolicyModeInput.nullish().describe(RULES_MODE),
    ...TemplateFields,
  })
  .transform(({ description, enabled, rules_mode, ...stated }, ctx) => {
    const read = readStatedService(stated, ctx, true);
    return read ? { ...read, description, enabled, ...(rules_mode && { rules_mode }) } : z.NEVER;
  });

/**
 * A change to a service: an absent field keeps what the service has; `rules: null` removes its rules.
 * Naming a template (again) sets the auth and rules from its operations, as a catalogue update is applied.
 */
export const ServiceUpdateInput = z
  .strictObject({
    description: Description.transform((d) => d ?? "").optional(),
    auth: ServiceAuthInput.optional(),
    enabled: Enabled.optional(),
    rules: RulesList.nullable().optional().describe("allowed methods and paths; absent: keep them; null: remove them (everything allowed)"),
    rules_mode: PolicyModeInput.nullable().optional().describe(`${RULES_MODE}; absent: keep it`),
    ...TemplateFields,
  })
  .transform(readTemplatePatch);

const Rule = z.object({ methods: z.array(z.string()), paths: z.array(z.string()), approve: z.literal("each").optional() });
export const ServiceAnswer = z.object({
  host: z.string(),
  description: z.string(),
  auth: z.looseObject({ type: z.string() }),
  enabled: z.boolean(),
  rules: z.array(Rule).optional(),
  rules_mode: z.enum(["enforce", "report"]).optional().describe("the service's own rules mode; absent: the vault's policy_mode"),
  template: ServiceTemplate.optional().describe("present when the service was made from a catalogue template"),
});
export const ServiceList = z.object({ services: z.array(ServiceAnswer), next_cursor: NextCursor.describe("`after` for the next page; null on the last") });

// The answers' types, for readers of the API (the CLI reads answers by them).
export type ServiceAnswerBody = z.infer<typeof ServiceAnswer>;
export type ServiceListBody = z.infer<typeof ServiceList>;
export type ServiceSpec = z.output<typeof ServiceInput>;
export type ServicePatch = z.output<typeof ServiceUpdateInput>;
