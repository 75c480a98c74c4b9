// Hono typing shared by routes and middleware.

import type { Principal } from "../../identity/index.ts";

/** `clientIp` is set only when BROKER_TRUSTED_PROXIES is non-empty (client-address.ts); read it through clientIp() in limits.ts. */
export type ApiEnv = { Variables: { principal: Principal; clientIp?: string } };
