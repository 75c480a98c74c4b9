// Vaults as code (issue 39): the file `broker export` writes and `broker apply` reads (YAML on disk, JSON on the wire
// to POST /v1/apply), and the plan an apply answers with. Every section is read by the schema its own endpoint reads
// it with (a service as POST …/services does, a budget as PUT …/budgets/:name, a webhook as POST …/webhooks, a
// reference as PUT …/credentials/:key), strict throughout: a key the file does not know is an error naming it.

import { z } from "zod";
import { says } from "../schema-input.ts";
import { BudgetInput } from "./budgets.ts";
import { KeyName, PolicyModeInput } from "./fields.ts";
import { AgentName, Email, VaultName, VaultRoleInput } from "./people-fields.ts";
import { ReferenceInput } from "./secret-stores.ts";
import { ServiceInput } from "./services.ts";
import { WebhookInput } from "./webhook-input.ts";
import { WorkloadBindingInput } from "./workload.ts";

/** What the export writes in place of a receiver URL's secret part (webhook-url.ts); such a URL is matched, never sent to. */
export const HIDDEN_URL_PART = "…";

const FileCredential = z
  .strictObject({
    key: KeyName,
    ref: z
      .string(says("{field} must be text: <connection>:<path>#<field>"))
      .optional()
      .describe("a reference into a secret store; absent: a value set by hand"),
    version: z.string(says("{field} must be text")).optional().describe("with ref: a version the store keeps"),
  })
  .transform((c, ctx) => {
    if (c.ref === undefined) {
      if (c.version !== undefined) ctx.addIssue({ code: "custom", path: ["version"], message: "{field} goes with ref", input: c.version });
      return { key: c.key };
    }
    const read = ReferenceInput.safeParse({ ref: c.ref, ...(c.version !== undefined && { version: c.version }) });
    if (!read.success) {
      for (const issue of read.error.issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message, input: c.ref });
      return z.NEVER;
    }
    return { key: c.key, reference: read.data };
  });

const FileWebhook = z
  .strictObject({
    url: z.string(says("{field} must be an http(s) URL")).describe("the receiver; as exported, its secret part hidden as …"),
    format: z.enum(["json", "slack"], says('{field} must be "json" or "slack"')).optional(),
  })
  .transform((w, ctx) => {
    const format = w.format ?? "json";
    // A hidden URL is matched with a webhook the vault has; it is never a receiver the broker could send to.
    if (w.url.includes(HIDDEN_URL_PART)) return { hidden: w.url, format };
    const read = WebhookInput.safeParse({ url: w.url, format });
    if (!read.success) {
      for (const issue of read.error.issues) ctx.addIssue({ code: "custom", path: issue.path, message: issue.message, input: w.url });
      return z.NEVER;
    }
    return read.data;
  });

/** A workload binding to this vault (its vault is the one it is listed under): POST …/workload-issuers/{issuer}/bindings' body. */
const FileBinding = WorkloadBindingInput.omit({ vault: true }).extend({
  issuer: z.string(says("{field} must name a trusted workload issuer")).describe("the trusted workload issuer whose tokens it admits"),
});

const BUDGET_NAME = "{key}: a budget's name is 1 to 64 lower-case letters, digits, '.', '_' or '-'";
const BudgetName = z.string(says(BUDGET_NAME)).regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, says(BUDGET_NAME));
const list = <T extends z.ZodType>(item: T, what: string) => z.array(item, says(`{field} must be a list of ${what}`));

/** Each entry of `items` named once by `name`: a second one is refused at its own place. */
function once<T>(items: readonly T[] | undefined, name: (item: T) => string, field: string, what: string, ctx: z.RefinementCtx, at: PropertyKey[]) {
  const seen = new Set<string>();
  items?.forEach((item, i) => {
    const n = name(item);
    if (seen.has(n)) ctx.addIssue({ code: "custom", path: [...at, i, field], message: `{field}: ${what} ${n} is in the list twice`, input: n });
    seen.add(n);
  });
}

export const VaultCodeInput = z
  .strictObject({
    managed: z.boolean(says("{field} must be true or false")).optional().describe("true: the vault changes only through broker apply"),
    unmatched_hosts: z.enum(["tunnel", "deny"], says("{field} must be tunnel or deny")).optional(),
    policy_mode: PolicyModeInput.optional(),
    services: list(ServiceInput, "services").optional(),
    credentials: list(FileCredential, "credentials (key, and ref for a reference)").optional(),
    agents: list(z.strictObject({ name: AgentName, role: VaultRoleInput }), "agents (name and role)").optional(),
    members: list(z.strictObject({ email: Email, role: VaultRoleInput }), "members (email and role)").optional(),
    webhooks: list(FileWebhook, "webhooks (url and format)").optional(),
    budgets: z.record(BudgetName, BudgetInput, says("{field} must map budget names to budgets")).optional(),
    workload_bindings: list(FileBinding, "workload bindings (issuer, name, conditions, role, max_session_seconds)")
      .optional()
      .describe("the workload bindings to this vault; changing them takes the instance owner"),
  })
  .superRefine((v, ctx) => {
    once(v.services, (s) => s.host, "host", "the service for", ctx, ["services"]);
    once(v.credentials, (c) => c.key, "key", "the credential", ctx, ["credentials"]);
    once(v.agents, (a) => a.name, "name", "the agent", ctx, ["agents"]);
    once(v.members, (m) => m.email, "email", "the member", ctx, ["members"]);
    once(v.workload_bindings, (b) => `${b.issuer}/${b.name}`, "name", "the binding", ctx, ["workload_bindings"]);
  });

export const VaultFile = z.strictObject(
  {
    version: z.literal(1, says("{field} must be 1 (the only version of the vault file)")),
    vaults: z.record(VaultName, VaultCodeInput, says("{field} must map vault names to vaults")),
  },
  { error: (iss) => (iss.code === "invalid_type" ? "expected a vault file: version: 1 and vaults" : undefined) },
);

const Said = z.object({
  kind: z.enum(["vault", "service", "credential", "agent", "member", "webhook", "budget", "binding"]),
  name: z.string(),
  said: z.string(),
});

export const ApplyAnswer = z.object({
  dry_run: z.boolean().describe("true: nothing was changed"),
  changes: z.number().describe("how many changes were made (a dry run: would be); 0: the instance already matches the file"),
  vaults: z.array(
    z.object({
      vault: z.string(),
      changes: z.array(Said.extend({ action: z.enum(["add", "change", "remove"]) })),
      pending: z.array(Said).describe("what the file asks for that a person does by hand (a value, an invite); never a change"),
    }),
  ),
  webhook_secrets: z
    .array(z.object({ vault: z.string(), url: z.string().describe("masked"), secret: z.string().describe("shown once") }))
    .describe("signing secrets of the webhooks this apply added"),
});

/** A vault file as written, before it is read: the export's answer (the CLI writes it as YAML). */
export type VaultFileBody = z.input<typeof VaultFile>;
export type ApplyAnswerBody = z.infer<typeof ApplyAnswer>;
