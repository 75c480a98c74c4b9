// The agent guide covers the auth types the broker mints or signs: each shape, no Authorization header
// for minted tokens, placeholder keys for SigV4, slots for every key, and the 502 an agent may meet.

import { expect, test } from "bun:test";
import { AGENT_GUIDE } from "../../../src/server/routes/agent-guide.ts";

test("the agent guide documents the minted auth types", () => {
  for (const shape of [
    '"type": "oauth2_client_credentials"',
    '"type": "oauth2_refresh"',
    '"type": "aws_sigv4"',
    '"type": "github_app"',
    '"refresh_token": "KEY"',
    '"private_key": "KEY"',
  ]) {
    expect(AGENT_GUIDE).toContain(shape);
  }
  expect(AGENT_GUIDE).toContain("send no Authorization header");
  expect(AGENT_GUIDE).toContain("AWS_ACCESS_KEY_ID=placeholder");
  expect(AGENT_GUIDE).toContain("Every KEY needs a credential slot");
  expect(AGENT_GUIDE).toContain("credential_refresh_failed");
});
