// People and machines signing in: registration, sign-in, sessions, the owner's settings, agents, agent
// invite redemption, identity-provider sign-in and the CA. Request bodies are strict; types are loose
// where the domain's reader checks the value and words its error.

import { z } from "zod";

const Time = z.string().describe("ISO-8601, UTC");
const User = z.object({ id: z.number(), email: z.string(), role: z.enum(["owner", "member"]) });

export const CredentialsInput = z.strictObject({ email: z.unknown().describe("an email address"), password: z.unknown().describe("at least 8 characters") });
/** Accepting a vault invite: nothing with a session; email and password to register through it. */
export const InviteAcceptInput = z.strictObject({ email: z.unknown().optional(), password: z.unknown().optional() });
export const ChangePasswordInput = z.strictObject({ current_password: z.unknown(), new_password: z.unknown() });
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
    z.looseObject({
      id: z.string(),
      kind: z.enum(["user", "scoped"]),
      vault: z.string().nullable(),
      role: z.string().nullable(),
      created_at: Time,
      expires_at: Time.nullable(),
    }),
  ),
});
export const InviteAccepted = z.object({ vault: z.string(), role: z.enum(["proxy", "member", "admin"]), token: z.string().optional(), user: User.optional() });

export const OwnerSettingsInput = z.strictObject({
  allowed_domains: z.unknown().optional().describe("email domains that may sign up; [] allows any"),
  rate_limits: z.unknown().optional().describe('{"profile"?, "auth"?: {"rps"?, "burst"?}, "authed"?, "proxy"?, "global"?}'),
});
export const OwnerSettingsAnswer = z.looseObject({ allowed_domains: z.array(z.string()), rate_limits: z.looseObject({}).optional() });

export const AgentList = z.object({ agents: z.array(z.looseObject({ name: z.string() })) });
export const AgentRedeemed = z.object({
  token: z.string().describe("the agent token (av_agt_…), shown once"),
  agent: z.object({ name: z.string(), role: z.enum(["owner", "member"]) }),
  broker_url: z.string(),
  proxy_url: z.string(),
  https_proxy: z.string(),
  vaults: z.array(z.object({ name: z.string(), role: z.enum(["proxy", "member", "admin"]) })),
  expires_at: Time.nullable(),
});

export const OidcStatus = z.object({ enabled: z.boolean(), name: z.string().optional() });
export const OidcCliExchangeInput = z.strictObject({ code: z.unknown(), cli_nonce: z.unknown().optional() });
export const IdentityList = z.object({ identities: z.array(z.looseObject({ id: z.number() })) });

export const CaRotated = z.object({ certificate: z.string().describe("PEM"), not_after: Time });
export const Message = z.object({ message: z.string() });

// The answers' types, for readers of the API (the CLI reads answers by them).
export type SignedInBody = z.infer<typeof SignedIn>;
export type FreshSessionBody = z.infer<typeof FreshSession>;
export type WhoamiBody = z.infer<typeof Whoami>;
export type InviteAcceptedBody = z.infer<typeof InviteAccepted>;
export type OidcStatusBody = z.infer<typeof OidcStatus>;
export type CaRotatedBody = z.infer<typeof CaRotated>;
