// The settings a running broker reports to its owner (GET /v1/owner/effective-settings, which `broker
// doctor` checks): what it was started with and bound to, none of it secret (no password, token, secret
// or database URL).

import type { Config } from "../config.ts";
import type { ApiDeps } from "../server/index.ts";

type EffectiveSettingsBody = NonNullable<ApiDeps["effectiveSettings"]>;

export function effectiveSettings(config: Config, apiPort: number, proxyPort: number | null, database: "sqlite" | "postgres"): EffectiveSettingsBody {
  return {
    bind_host: config.bindHost,
    api_port: apiPort,
    proxy_port: proxyPort,
    public_url: config.publicUrl ?? null,
    allow_private_ranges: config.allowPrivateRanges,
    network_allowlist: [...config.networkAllowlist],
    host_mappings: (config.hostMappings ?? []).map((m) => `${m.host}:${m.port}:${m.address}`),
    database,
    oidc_issuer: config.oidc?.issuer ?? null,
    rate_limit_profile: config.rateLimit.profile,
  };
}
