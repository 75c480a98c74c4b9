// The sign-in throttle as the broker runs it: its lock events logged, and with `--workers N` each worker's share of the
// failures before a lock (ratelimit/share.ts), so together the workers lock when one process would. Not part of the
// rate-limit profile: password guessing is throttled even with BROKER_RATELIMIT_PROFILE=off.

import type { WorkerRole } from "../config.ts";
import type { Logger } from "../log.ts";
import { createLoginThrottle, LOGIN_THROTTLE_DEFAULTS, shareOf, type LoginThrottle } from "../ratelimit/index.ts";

export function brokerLoginThrottle(now: () => number, share: WorkerRole | undefined, log: Logger): LoginThrottle {
  return createLoginThrottle({
    now,
    ...(share && {
      accountFailures: shareOf(LOGIN_THROTTLE_DEFAULTS.accountFailures, share),
      addressFailures: shareOf(LOGIN_THROTTLE_DEFAULTS.addressFailures, share),
    }),
    onLock: (e) =>
      log.warn("login_throttled", { scope: e.scope, [e.scope === "account" ? "email" : "address"]: e.key, failures: e.failures, lock_s: e.lockSec }),
  });
}
