// People and machines signing in: registration, sign-in, sessions, the owner's settings, agents, agent
// invite redemption, identity-provider sign-in and the CA. Request bodies are strict, and their schemas
// are the one check they get: what a handler receives is read (an email lower-cased, a password in its
// Secret).

import { z } from "zod";
import { NextCursor } from "./pages.ts";
import { says } from "../schema-input.ts";
import { Email, Password } from "./people-fields.ts";

export { OwnerSettingsInput } from "./owner-settings.ts";
/** A password typed on its own (the console asks for it before showing a value). */
export { Password } from "./people-fields.ts";

const Time = z.string().describe("ISO-8601, UTC");
const User = z.object({ id: z.number(), email: z.string(), role: z.enum(["owner", "member"]) });

export const CredentialsInput = z.strictObject({ email: Email, password: Password });
/** Accepting a vault invite: nothing with a session; email and password to register through it. */
export const InviteAcceptInput = z.strictObject({
  email: Email.optional().describe("without a session: an email address, to register through the invite"),
  password: Password.optional().describe("without a session: the new account's password"),
});
export const ChangePasswordInput = z.strictObject({ current_password: Password, new_password: Password });
export const SignedIn = z.object({ token: z.string().describe("a user session token (av_sess_…), shown once"), user: User });
export const FreshSession = z.object({ token: z.string().describe("your new session token; every other session of yours has ended") });
export const Whoami = z.object({
  kind: z.enum(["user", "agent", "scoped"]),
  user: User.optional(),
  agent: z.object({ name: z.string(), role: z.enum(["owner", "member"]) }).optional(),
  vault: z.string().nullable().optional(),
  role: z.enum(["proxy", "member", "admin"]).optional(),
  session: z.object({ id: z.string(), expires_at: Time.nullable() }),
});
export const OwnSessions = z.object({
  sessions: z.array(
    z.object({
      id: z.string(),
      kind: z.enum(["user", "scoped"]),
      vault: z.string().nullable(),
      role: z.string().nullable(),
      channel: z
        .enum(["form", "api", "oidc", "oidc_cli"])
        .nullable()
        .describe("how it was made: a page's sign-in form, the JSON API, an identity provider in the browser or for the CLI (null: not recorded)"),
      client: z.string().nullable().describe("the creating client's User-Agent, cut to 256 characters"),
      address: z.string().nullable().describe("the address it was created from"),
      created_at: Time,
      last_seen_at: Time,
      expires_at: Time.nullable(),
      current: z.boolean().describe("the session this request was made with"),
    }),
  ),
  next_cursor: NextCursor.describe("`after` for the next page; null on the last"),
});
export const InviteAccepted = z.object({ vault: z.string(), role: z.enum(["proxy", "member", "admin"]), token: z.string().optional(), user: User.optional() });

const Tier = z.object({ rps: z.number(), burst: z.number() });
export const OwnerSettingsAnswer = z.object({
  allowed_domains: z.array(z.string()),
  rate_limits: z
    .object({
      profile: z.string(),
      locked: z.boolean().describe("pinned by BROKER_RATELIMIT_LOCK: read-only"),
      auth: Tier.describe("per client IP, before sign-in"),
      authed: Tier.describe("per principal"),
      proxy: Tier.describe("per principal, /proxy and the tunnel"),
      global: z.object({ rps: z.number(), inflight: z.number() }).describe("the whole server"),
    })
    .optional()
    .describe("absent when rate limiting is not configured"),
});

/** The settings a running broker was started with, as `broker doctor` checks them: no secret among them. */
export const EffectiveSettings = z.object({
  bind_host: z.string(),
  api_port: z.number(),
  proxy_port: z.number().nullable(),
  public_url: z.string().nullable().describe("BROKER_PUBLIC_URL, or null when unset"),
  allow_private_ranges: z.boolean(),
  network_allowlist: z.array(z.string()),
  host_mappings: z.array(z.string()).describe("BROKER_RESOLVE entries, host:port:address"),
  database: z.enum(["sqlite", "postgres"]),
  oidc_issuer: z.string().nullable(),
  rate_limit_profile: z.string(),
});

export const AgentList = z.object({
  agents: z.array(
    z.object({
      name: z.string(),
      role: z.enum(["owner", "member"]),
      created_at: Time,
      vaults: z.array(z.object({ name: z.string(), role: z.enum(["proxy", "member", "admin"]) })),
      sessions: z.number().describe("active sessions"),
    }),
  ),
  next_cursor: NextCursor.describe("`after` for the next page; null on the last"),
});
export const AgentRedeemed = z.object({
  token: z.string().describe("the agent token (av_agt_…), shown once"),
  agent: z.object({
    name: z.string(),
    role: z.enum(["owner", "member"]).describe("the agent's instance role (the same as instance_role; kept for older readers)"),
    instance_role: z.enum(["owner", "member"]).describe("the agent's role on this broker instance, not in a vault"),
  }),
  broker_url: z.string(),
  proxy_url: z.string(),
  https_proxy: z.string(),
  vaults: z.array(z.object({ name: z.string(), role: z.enum(["proxy", "member", "admin"]).describe("the agent's role in this vault") })),
  expires_at: Time.nullable(),
});

export const OidcStatus = z.object({ enabled: z.boolean(), name: z.string().optional() });
/** Either missing is the same failed sign-in as a wrong one (the domain's 401), so both are optional here. */
export const OidcCliExchangeInput = z.strictObject({
  code: z.string(says("{field} must be text")).optional().describe("the one-time code the sign-in callback handed the CLI"),
  cli_nonce: z.string(says("{field} must be text")).optional().describe("the nonce the CLI chose when it started the sign-in"),
});
export const IdentityList = z.object({ identities: z.array(z.looseObject({ id: z.number() })) });

export const CaRotated = z.object({ certificate: z.string().describe("PEM"), not_after: Time });
export const Message = z.object({ message: z.string() });

// The answers' types, for readers of the API (the CLI reads answers by them).
export type SignedInBody = z.infer<typeof SignedIn>;
export type FreshSessionBody = z.infer<typeof FreshSession>;
export type WhoamiBody = z.infer<typeof Whoami>;
export type OwnSessionsBody = z.infer<typeof OwnSessions>;
export type OwnerSettingsBody = z.infer<typeof OwnerSettingsAnswer>;
export type AgentListBody = z.infer<typeof AgentList>;
export type AgentRedeemedBody = z.infer<typeof AgentRedeemed>;
export type EffectiveSettingsBody = z.infer<typeof EffectiveSettings>;
export type InviteAcceptedBody = z.infer<typeof InviteAccepted>;
export type OidcStatusBody = z.infer<typeof OidcStatus>;
export type CaRotatedBody = z.infer<typeof CaRotated>;
