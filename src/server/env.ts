// Hono typing shared by routes and middleware.

import type { Principal } from "../vault/index.ts";

export type ApiEnv = { Variables: { principal: Principal } };
