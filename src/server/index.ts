// The API server: Hono routes over Bun.serve. Never imports the tunnel.

export { createApi, type ApiDeps } from "./app.ts";
export { type DatabaseHealth } from "./app.ts";
export { isWildcardBind } from "./host-check.ts";
export { listApiHosts } from "./host-check.ts";
export { countRefusals } from "./metrics.ts";
export { createMetrics } from "./metrics.ts";
export { type Metrics } from "./metrics.ts";
