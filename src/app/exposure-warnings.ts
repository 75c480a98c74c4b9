// Start-up warnings about how the API is exposed: settings that are each valid but together leave it answering to
// fewer names than meant, or counting every client as the reverse proxy in front of it.

import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";

export function warnAboutExposure(config: Config, anyIpLiteral: boolean, log: Logger): void {
  if (anyIpLiteral && !config.publicUrl && config.allowedHosts.length === 0) {
    // Binding every interface usually means "reachable by name from elsewhere": say what that needs.
    log.warn("api_host_names_unset", {
      detail: `the API listens on every interface (${config.bindHost}) but answers only to localhost and IP addresses; a request naming it by a DNS name gets 421 misdirected_request. Set BROKER_PUBLIC_URL to the address clients use, or list the names in BROKER_ALLOWED_HOSTS`,
    });
  }
  if (config.publicUrl?.startsWith("https://") && config.trustedProxies.length === 0) {
    // An https:// public URL in front of a plain-HTTP listener means a TLS-terminating proxy is the peer of every request.
    log.warn("trusted_proxies_unset", {
      detail:
        "BROKER_PUBLIC_URL is https:// but BROKER_TRUSTED_PROXIES is empty: if a reverse proxy connects to the API, every client shares its address for the sign-in throttle and the AUTH rate-limit tier, so one client's failed sign-ins lock out everyone; set BROKER_TRUSTED_PROXIES to the proxy's address",
    });
  }
}
