// The API server: Hono routes over Bun.serve. Never imports the tunnel.

export { createApi, type ApiDeps } from "./app.ts";
export { type DatabaseHealth } from "./app.ts";
export { isWildcardBind } from "./kit/index.ts";
export { listApiHosts } from "./kit/index.ts";
export { countRefusals } from "./kit/index.ts";
export { createMetrics, type MetricSources } from "./kit/index.ts";
export { type Metrics } from "./kit/index.ts";
