// Workload identity (issue 39 points 1–3): the owner's trusted issuers and their bindings, and the RFC 8693 token
// exchange an agent signs in with. The exchange's subject_token is a platform token: read here, never described
// back, logged or echoed.

import { z } from "zod";
import { ACCESS_TOKEN_TYPE, CLAIM_LIMITS, JWKS_MAX_CHARS, JWT_TOKEN_TYPES, NAME_PATTERN, TOKEN_EXCHANGE_GRANT } from "../policy/index.ts";
import { says } from "../schema-input.ts";

export { ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPES, TOKEN_EXCHANGE_GRANT };

const IssuerName = z
  .string(says("{field} must be 1-24 lower-case letters, digits or '-'"))
  .max(24, says("{field} must be 1-24 lower-case letters, digits or '-'"))
  .regex(NAME_PATTERN, says("{field} must be 1-24 lower-case letters, digits or '-'"));
const BindingName = z
  .string(says("{field} must be 1-32 lower-case letters, digits or '-'"))
  .max(32, says("{field} must be 1-32 lower-case letters, digits or '-'"))
  .regex(NAME_PATTERN, says("{field} must be 1-32 lower-case letters, digits or '-'"));

const HttpsUrl = z
  .string(says("{field} must be an https:// URL"))
  .max(2000, says("{field} is too long"))
  .refine((v) => URL.canParse(v) && new URL(v).protocol === "https:" && !new URL(v).username && !new URL(v).password, says("{field} must be an https:// URL"));

export const WorkloadIssuerInput = z
  .strictObject({
    name: IssuerName.describe("how bindings, the CLI and the agents made for them name the issuer"),
    issuer: HttpsUrl.describe("the `iss` its tokens carry, exactly (https://token.actions.githubusercontent.com)"),
    jwks_url: HttpsUrl.optional().describe("where its keys are; absent (and no `jwks`): found by OIDC discovery from the issuer"),
    jwks: z
      .string(says("{field} must be a JWKS document (JSON text)"))
      .max(JWKS_MAX_CHARS, says(`{field} must be at most ${JWKS_MAX_CHARS} characters`))
      .optional()
      .describe("the issuer's public keys as a JWKS document (a file's text), for an issuer the broker cannot reach; instead of jwks_url"),
    audiences: z
      .array(z.string(says("{field} must be audience strings")).min(1).max(500), says("{field} must be a list of audiences"))
      .min(1, says("{field} must name at least one audience"))
      .max(20, says("{field} may name at most 20 audiences"))
      .describe("a token's aud must contain one of them"),
    clock_skew_seconds: z.number().int().min(0).max(300, says("{field} must be 0 to 300")).default(60).describe("tolerance for exp, nbf and iat"),
    require_jti: z.boolean(says("{field} must be true or false")).default(false).describe("refuse a token without a jti (so every token is exchanged once)"),
  })
  .superRefine((i, ctx) => {
    if (i.jwks_url !== undefined && i.jwks !== undefined)
      ctx.addIssue({ code: "custom", path: ["jwks"], message: "{field} is instead of jwks_url: give one of them, not both" });
  });
export type WorkloadIssuerInput = z.infer<typeof WorkloadIssuerInput>;

const Pattern = z
  .string(says("{field} must be a string"))
  .min(1, says("{field} must not be empty"))
  .max(CLAIM_LIMITS.patternChars, says("{field} is too long"));
const ClaimPath = z
  .string()
  .min(1)
  .max(CLAIM_LIMITS.pathChars)
  .refine((p) => !p.split("/").some((s) => s === ""), says("a claim path is claim names joined by '/', none empty"));

export const WorkloadBindingInput = z.strictObject({
  name: BindingName.describe("unique under its issuer; the agent standing for its workloads is wl-<issuer>-<name>"),
  conditions: z
    .record(ClaimPath, z.union([Pattern, z.array(Pattern).min(1).max(CLAIM_LIMITS.patterns)]), says("{field} must map claim paths to patterns"))
    .refine((c) => Object.keys(c).length >= 1, says("{field} must hold at least one condition"))
    .refine((c) => Object.keys(c).length <= CLAIM_LIMITS.conditions, says(`{field} may hold at most ${CLAIM_LIMITS.conditions} conditions`))
    .describe("claim path → exact string, glob (* and ?) or a list of them; every condition must match"),
  vault: z.string().regex(NAME_PATTERN, says("{field} must be a vault's name")).describe("the vault its sessions are bound to"),
  role: z.enum(["proxy", "member", "admin"], says('{field} must be "proxy", "member" or "admin"')).default("proxy"),
  max_session_seconds: z.number().int().min(60, says("{field} must be at least 60")).max(86_400, says("{field} must be at most 86400")).default(3600),
});
export type WorkloadBindingInput = z.infer<typeof WorkloadBindingInput>;

export const WorkloadIssuerView = z.object({
  name: z.string(),
  issuer: z.string(),
  jwks_url: z.string().nullable(),
  jwks: z.string().nullable().describe("the public key set given as a document, as stored; null when keys are fetched"),
  jwks_kids: z.array(z.string()).nullable().describe("the key ids of that key set; null when keys are fetched"),
  audiences: z.array(z.string()),
  clock_skew_seconds: z.number(),
  require_jti: z.boolean(),
  created_at: z.string(),
});
export const WorkloadIssuerList = z.object({ issuers: z.array(WorkloadIssuerView) });

export const WorkloadBindingView = z.object({
  name: z.string(),
  issuer: z.string(),
  conditions: z.record(z.string(), z.union([z.string(), z.array(z.string())])),
  vault: z.string(),
  role: z.enum(["proxy", "member", "admin"]),
  max_session_seconds: z.number(),
  agent: z.string().nullable().describe("the agent its sessions act as; null once revoked (re-add the binding)"),
  created_at: z.string(),
});
export const WorkloadBindingList = z.object({ bindings: z.array(WorkloadBindingView) });

/**
 * RFC 8693 §2.1, form-encoded or JSON; `audience`, `resource` and `scope` are accepted and ignored (the binding decides
 * the vault and role). Strict like every body: a parameter the broker does not read (`actor_token`: no delegation) is
 * refused by name rather than silently dropped.
 */
export const TokenExchangeInput = z.strictObject({
  grant_type: z.literal(TOKEN_EXCHANGE_GRANT, says(`{field} must be ${TOKEN_EXCHANGE_GRANT}`)),
  subject_token: z.string(says("{field} is required")).min(1, says("{field} is required")).max(16_384, says("{field} is too long")), // SECRET: never log
  subject_token_type: z.enum(JWT_TOKEN_TYPES, says(`{field} must be ${JWT_TOKEN_TYPES.join(" or ")}`)),
  audience: z.string().max(2000).optional(),
  resource: z.string().max(2000).optional(),
  scope: z.string().max(2000).optional(),
  requested_token_type: z.literal(ACCESS_TOKEN_TYPE).optional(),
});
export type TokenExchangeInput = z.infer<typeof TokenExchangeInput>;

export const TokenExchangeAnswer = z.object({
  access_token: z.string().describe("a session bound to the binding's vault: the bearer or proxy token"),
  issued_token_type: z.literal(ACCESS_TOKEN_TYPE),
  token_type: z.literal("Bearer"),
  expires_in: z.number().describe("seconds"),
  vault: z.string(),
  role: z.enum(["proxy", "member", "admin"]),
  proxy_port: z.number().nullable(),
});
export type TokenExchangeAnswerBody = z.infer<typeof TokenExchangeAnswer>;
export type WorkloadIssuerViewBody = z.infer<typeof WorkloadIssuerView>;
export type WorkloadBindingViewBody = z.infer<typeof WorkloadBindingView>;
export type WorkloadIssuerListBody = z.infer<typeof WorkloadIssuerList>;
export type WorkloadBindingListBody = z.infer<typeof WorkloadBindingList>;
