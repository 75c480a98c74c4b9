// Scoped sessions (POST /v1/sessions): the request body and the answers, one schema each.

import { z } from "zod";

export const ScopedSessionInput = z.strictObject({
  vault: z.string().describe("the vault's name"),
  role: z.enum(["proxy", "member", "admin"]).nullish().describe("defaults to your own role in the vault; never above it"),
  ttl_seconds: z.number().nullish().describe("300 (5 minutes) to 604800 (7 days); default 86400"),
  contained: z.boolean().optional().describe("set by `vault run --contain`: the audit log marks every request made with the session"),
});

export const ScopedSessionView = z.object({
  id: z.string(),
  vault: z.string(),
  role: z.enum(["proxy", "member", "admin"]),
  created_at: z.string(),
  expires_at: z.string().nullable(),
  contained: z.boolean(),
});

export const ScopedSessionCreated = z.object({
  id: z.string(),
  token: z.string().describe("the session's token (av_sess_…), shown once"),
  vault: z.string(),
  role: z.enum(["proxy", "member", "admin"]),
  expires_at: z.string(),
  contained: z.boolean(),
  proxy_port: z.number().nullable().describe("the CONNECT listener's port, for HTTPS_PROXY"),
});

export const ScopedSessionList = z.object({ sessions: z.array(ScopedSessionView) });

// The answers' types, for readers of the API (the CLI reads answers by them).
export type ScopedSessionCreatedBody = z.infer<typeof ScopedSessionCreated>;
