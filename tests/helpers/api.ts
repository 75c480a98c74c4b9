// An in-process API over an in-memory store with a movable clock, for fast unit tests.
// Argon2id runs with cheap parameters here only through the KDF override below.

import { createApi } from "../../src/server/app.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { openMemoryStore, type Store } from "../../src/store/index.ts";
import { createLoginThrottle, type LoginThrottle, type RateLimiter } from "../../src/ratelimit/index.ts";
import type { KdfParams } from "../../src/crypto/kdf.ts";
import { createAuthenticator, type Domain, type OidcClient, type WorkloadKeys } from "../../src/identity/index.ts";
import { createHashGate, unlockKeyring } from "../../src/crypto/index.ts";

/** Cheap Argon2id for tests that are not about hashing; tests of the real parameters live in tests/unit/vault. */
export const CHEAP_KDF = { alg: "argon2id", iterations: 1, memoryKiB: 64, parallelism: 1, hashLength: 32 } as const;

export interface Clock {
  now(): number;
  advance(ms: number): void;
}

export function createClock(start = Date.UTC(2026, 0, 1)): Clock {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

export interface TestApi {
  readonly store: Store;
  readonly domain: Domain;
  readonly clock: Clock;
  readonly logs: string[];
  /** Sends a JSON request; `token` becomes the bearer; `ip` is the client address the server sees (default: none). */
  call(
    method: string,
    path: string,
    opts?: { token?: string; body?: unknown; headers?: Record<string, string>; ip?: string },
  ): Promise<{ status: number; body: any; headers: Headers }>;
}

export interface TestApiOptions {
  /** Builds the rate limiter on the harness clock (absent: no rate limiting, as before). */
  readonly rateLimiter?: (now: () => number) => RateLimiter;
  /** Builds the login throttle on the harness clock (default: the production one, with its defaults). */
  readonly loginThrottle?: (now: () => number) => LoginThrottle;
  /** Password KDF parameters; `null` means the real (production) Argon2id parameters. Default CHEAP_KDF. */
  readonly passwordKdf?: KdfParams | null;
  /** BROKER_TRUSTED_PROXIES as config.ts normalises it (CIDRs); absent: the peer (`ip`) is the client. */
  readonly trustedProxies?: readonly string[];
  /** Identity-provider sign-in (absent: off, as without BROKER_OIDC_ISSUER). */
  readonly oidc?: OidcClient;
  /** Trusted workload issuers' key sets (absent: the token exchange refuses every token). */
  readonly workloadKeys?: WorkloadKeys;
}

export async function createTestApi(opts: TestApiOptions = {}): Promise<TestApi> {
  const store = await openMemoryStore();
  const clock = createClock();
  const keyring = await unlockKeyring(store, undefined, { now: clock.now });
  const log = createMemoryLogger();
  const domain: Domain = {
    store,
    dataKey: keyring.dataKey,
    auth: createAuthenticator(store, { now: clock.now, cacheTtlMs: 0 }),
    hashing: createHashGate({ concurrency: 2, queue: 64 }),
    now: clock.now,
    publicUrl: "http://broker.test",
    proxyUrl: "http://broker.test:14322",
    passwordKdf: opts.passwordKdf === null ? undefined : (opts.passwordKdf ?? CHEAP_KDF),
    rateLimiter: opts.rateLimiter?.(clock.now),
    loginThrottle: opts.loginThrottle?.(clock.now) ?? createLoginThrottle({ now: clock.now }),
    oidc: opts.oidc,
    workloadKeys: opts.workloadKeys,
  };
  const api = createApi({ domain, log, trustedProxies: opts.trustedProxies });
  return {
    store,
    domain,
    clock,
    logs: log.lines,
    async call(method, path, opts = {}) {
      const headers: Record<string, string> = { ...opts.headers };
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      if (opts.body !== undefined) headers["content-type"] = "application/json";
      // Hono's getConnInfo asks the Bun server for the peer address: stand one in when an ip is given.
      const env = opts.ip ? { requestIP: () => ({ address: opts.ip, family: opts.ip!.includes(":") ? "IPv6" : "IPv4", port: 40000 }) } : undefined;
      const res = await api.request(path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) }, env);
      const text = await res.text();
      let body: any = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {}
      return { status: res.status, body, headers: res.headers };
    },
  };
}
