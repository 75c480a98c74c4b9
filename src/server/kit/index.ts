// Request plumbing shared by the routes, the console and the pages: the app's context type, bearer and
// cookie authentication, JSON bodies, the client's address, rate-limit tiers, the Host check, metrics.

export { isWildcardBind } from "./host-check.ts";
export { listApiHosts } from "./host-check.ts";
export { countRefusals } from "./metrics.ts";
export { createMetrics, type MetricSources } from "./metrics.ts";
export { type Metrics } from "./metrics.ts";
export { type ApiEnv } from "./env.ts";
export { hostCheck } from "./host-check.ts";
export { type HostCheckOptions } from "./host-check.ts";
export { authTier } from "./limits.ts";
export { globalGate } from "./limits.ts";
export { resolveClientAddress } from "./client-address.ts";
export { clientIp } from "./limits.ts";
export { sessionClientOf } from "./session-client.ts";
export { readCappedText } from "./request.ts";
export { requirePrincipal } from "./auth.ts";
export { jsonBody } from "./body.ts";
export { openVaultFor } from "./request.ts";
export { bearerToken } from "./request.ts";
export { headerVaultName, openHeaderVault } from "./request.ts";
export { enforce } from "./limits.ts";
export { pageQueryDoc, readPageQuery } from "./page-query.ts";
