// The rate-limit module's own error: a run-time settings write while BROKER_RATELIMIT_LOCK pins them.

import { BrokerError } from "../errors.ts";

export class RateLimitsLocked extends BrokerError {
  readonly status = 403;
  readonly code = "forbidden";
  constructor() {
    super("rate limits are pinned by BROKER_RATELIMIT_LOCK");
  }
}
