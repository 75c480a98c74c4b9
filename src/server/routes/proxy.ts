// The explicit proxy: {base_url}/proxy/<target_host>/<path>[?query], every method but TRACE.
// A thin adapter: authenticate, find the vault, rebuild the target as the URL carries it, hand off
// to the egress core, return its answer as a Response. Bun's server has already resolved dot segments (also
// %2e-encoded) and turned backslashes into slashes; the broker adds no normalisation of its own, and
// a service's rules check that resolved path, which is also the one sent.

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import { egress, toWebResponse, type EgressDeps } from "../../egress/index.ts";
import type { Domain } from "../../identity/index.ts";
import { admitToVault, isContained, principalName, withWorkload } from "../../identity/index.ts";
import { parseHostPattern, type HostPattern } from "../../policy/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { headerVaultName } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

export function proxyRoutes(d: Domain, deps: EgressDeps) {
  const r = new Hono<ApiEnv>();
  const parsedTargets = new Map<string, HostPattern>();
  r.use("*", requirePrincipal(d, "none")); // charged to PROXY below, shared with the tunnel
  r.all(
    "/*",
    describe({
      summary: "The explicit proxy: /proxy/<host>[:port]/<path>?<query>, forwarded with the vault's credential added",
      description:
        "Any method but TRACE and CONNECT. The target's host must be one of the vault's services (else 403 forbidden with a proposal_hint); its rules decide the method and path (403 request_not_allowed); a rule with approve: each holds the request for a human (428 approval_required). The upstream's answer comes back with echoes of the credential redacted.",
      tags: ["proxy"],
      auth: "bearer",
      who: "any role, agents included (agent tokens and user sessions send X-Vault)",
      success: { status: 200, contentType: "*/*", description: "The upstream's answer" },
      errors: [403, 413, 428, 502, 503],
    }),
    async (c) => {
      const p = c.get("principal");
      const { authority, target } = splitProxyUrl(c.req.raw.url);
      const pattern = targetHost(authority, parsedTargets);
      const open = await admitToVault(d, p, await headerVaultName(d, c), c.req.header("x-vault"));
      const length = c.req.header("content-length");
      const req = c.req.raw;
      const answer = await egress(
        {
          principal: p.id,
          principalName: principalName(p),
          contained: isContained(p),
          ...withWorkload(p),
          scoped: p.kind === "scoped",
          vault: { id: open.vault.id, name: open.vault.name, policyMode: open.vault.policyMode },
          host: pattern.name,
          port: pattern.port,
          method: req.method,
          target,
          headers: headerPairs(req.headers),
          body: req.body,
          bodyLength: length !== undefined && /^\d+$/.test(length) ? Number(length) : req.body ? null : null,
          ingress: "explicit",
          // The agent went away: stop waiting (a held request's Prefer: wait, the upstream's answer).
          signal: req.signal,
        },
        deps,
      );
      const res = toWebResponse(answer);
      // An upstream page shown at /proxy would run on the console's origin: a browser gets it sandboxed
      // (no scripts, an opaque origin), whatever the upstream sent. Agents' HTTP clients ignore this.
      res.headers.append("content-security-policy", "sandbox");
      return res;
    },
  );
  return r;
}

const TARGETS_KEPT = 256;

/**
 * The concrete host and port a /proxy URL names. Agents call the same few hosts over and over, so
 * accepted authorities are remembered verbatim (bounded; refusals are never kept).
 */
function targetHost(authority: string, parsedTargets: Map<string, HostPattern>): HostPattern {
  const known = parsedTargets.get(authority);
  if (known) return known;
  const pattern = parseHostPattern(decodeURIComponent(authority), { allowIp: true }, "target_host");
  if (pattern.wildcard) throw new InvalidRequest("target_host must be a concrete host", "target_host");
  if (parsedTargets.size >= TARGETS_KEPT) parsedTargets.clear();
  parsedTargets.set(authority, pattern);
  return pattern;
}

/** Splits ".../proxy/<authority>/<rest>?q" from the raw URL, keeping <rest>?q byte for byte. */
export function splitProxyUrl(url: string): { authority: string; target: string } {
  const pathStart = url.indexOf("/", url.indexOf("://") + 3);
  const path = url.slice(pathStart);
  const m = /^\/proxy\/([^/?#]+)(.*)$/.exec(path);
  if (!m) throw new InvalidRequest("use /proxy/<target_host>/<path>", "target_host");
  let target = m[2] ?? "";
  if (target === "" || target.startsWith("?")) target = `/${target}`;
  return { authority: m[1]!, target };
}

function headerPairs(h: Headers): [string, string][] {
  const out: [string, string][] = [];
  h.forEach((v, k) => out.push([k, v]));
  return out;
}
