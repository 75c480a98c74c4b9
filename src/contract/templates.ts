// The catalogue as the API shows it (GET /v1/templates, /v1/templates/{id}) and a template-made
// service's record in service answers and /discover.

import { z } from "zod";

const Rule = z.object({ methods: z.array(z.string()), paths: z.array(z.string()), approve: z.literal("each").optional() });

export const TemplateOperationView = z.object({
  name: z.enum(["read", "write", "destructive"]),
  summary: z.string(),
  rules: z.array(Rule),
});

export const TemplateView = z.object({
  id: z.string(),
  name: z.string(),
  hosts: z.array(z.string()),
  auth: z.looseObject({ type: z.string() }).describe("with the suggested credential key names in its key fields; never a value"),
  keys: z.array(z.object({ field: z.string(), suggested: z.string() })).describe("the auth fields that name a credential key"),
  docs: z.string().describe("the provider's page the auth details were taken from"),
  obtain: z.string().describe("where a person creates the credential"),
  operations: z.array(TemplateOperationView),
  connect: z.boolean().describe("a person can connect an account in the console instead of pasting a credential"),
  fill: z
    .record(z.string(), z.string())
    .describe("what is the person's own, by field (host, username, app_id, installation_id): give it as host or in settings"),
});

export const TemplateList = z.object({ templates: z.array(TemplateView) });

/** A service made from a template, in service answers and /discover. */
export const ServiceTemplate = z.object({
  id: z.string(),
  name: z.string(),
  operations: z.array(z.string()),
  said: z.string().describe('in words: "GitHub (api.github.com), read only"'),
  catalogue_rules: z
    .array(Rule)
    .optional()
    .describe("this release's rules for the chosen operations, when they differ from the service's: a person applies them"),
});

export type TemplateViewBody = z.infer<typeof TemplateView>;
export type TemplateListBody = z.infer<typeof TemplateList>;
