// Scoped sessions (POST /v1/sessions): the request body and the answers, one schema each. Whether the
// role asked for is within the minter's own is the domain's decision; the body's shape is read here.

import { z } from "zod";
import { NextCursor } from "./pages.ts";
import { LIMITS } from "../policy/index.ts";
import { says } from "../schema-input.ts";
import { VaultName, VaultRoleInput } from "./people-fields.ts";

/** A vault's name where a query names it (`GET /v1/sessions?vault=`). */
export { VaultName };

const MIN_TTL = LIMITS.scopedSessionMinMs / 1000;
const MAX_TTL = LIMITS.scopedSessionMaxMs / 1000;
const TTL = `{field} must be an integer from ${MIN_TTL} (5 minutes) to ${MAX_TTL} (7 days)`;

export const ScopedSessionInput = z.strictObject({
  vault: VaultName.describe("the vault's name"),
  role: VaultRoleInput.nullish().describe("defaults to your own role in the vault; never above it"),
  ttl_seconds: z
    .number(says(TTL))
    .int(says(TTL))
    .min(MIN_TTL, says(TTL))
    .max(MAX_TTL, says(TTL))
    .nullish()
    .describe(`${MIN_TTL} (5 minutes) to ${MAX_TTL} (7 days); default ${LIMITS.scopedSessionDefaultMs / 1000}`),
  contained: z
    .boolean(says("{field} must be true or false"))
    .optional()
    .describe("set by `vault run --contain`: the audit log marks every request made with the session"),
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

export const ScopedSessionList = z.object({
  sessions: z.array(ScopedSessionView),
  next_cursor: NextCursor.describe("`after` for the next page; null on the last"),
});
export type ScopedSessionListBody = z.infer<typeof ScopedSessionList>;

/** GET /v1/sessions/{id}/activity: what the session met at the transparent proxy (host names and counts only). */
export const SessionActivityAnswer = z.object({
  id: z.string(),
  connects: z.number().describe("CONNECTs the session made (on the instance that answers)"),
  unmatched_hosts: z
    .array(
      z.object({
        host: z.string().describe("host, or host:port when not 443"),
        first_at: z.string(),
        proposal_hint: z.record(z.string(), z.unknown()).describe("the proposal skeleton a 403 forbidden would carry"),
      }),
    )
    .describe("hosts reached through a blind tunnel (no service, no credential), each once, oldest first"),
});

// The answers' types, for readers of the API (the CLI reads answers by them).
export type ScopedSessionCreatedBody = z.infer<typeof ScopedSessionCreated>;
export type SessionActivityBody = z.infer<typeof SessionActivityAnswer>;
