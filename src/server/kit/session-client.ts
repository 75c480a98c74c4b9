// Who is creating a session, as this request shows it: the channel the route names, the User-Agent
// header and the client's address (clientIp: the peer, or X-Forwarded-For from a trusted proxy).
// Reads nothing else from the request: never a token, cookie or other header.

import type { Context } from "hono";
import type { SessionClient } from "../../identity/index.ts";
import type { SessionChannel } from "../../store/index.ts";
import { clientIp } from "./limits.ts";

export function sessionClientOf(c: Context, channel: SessionChannel): SessionClient {
  const address = clientIp(c);
  return { channel, userAgent: c.req.header("user-agent") || undefined, address: address === "unknown" ? undefined : address };
}
