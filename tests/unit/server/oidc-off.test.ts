// With BROKER_OIDC_ISSUER unset the feature is off: the status route says so, everything else is 404 not_found.

import { expect, test } from "bun:test";
import { createTestApi } from "../../helpers/api.ts";

test("GET /v1/auth/oidc answers enabled false", async () => {
  const api = await createTestApi();
  expect(await api.call("GET", "/v1/auth/oidc")).toMatchObject({ status: 200, body: { enabled: false } });
});

test.each([
  ["GET", "/v1/auth/oidc/login"],
  ["GET", "/v1/auth/oidc/login?cli_port=5000&cli_nonce=x"],
  ["POST", "/v1/auth/oidc/link"],
  ["GET", "/v1/auth/oidc/callback?code=a&state=b"],
  ["POST", "/v1/auth/oidc/cli-exchange"],
  ["GET", "/v1/account/identities"],
  ["DELETE", "/v1/account/identities/1"],
])("%s %s is 404 not_found while off", async (method, path) => {
  const api = await createTestApi();
  const res = await api.call(method, path, { body: method === "POST" ? {} : undefined });
  expect(res).toMatchObject({ status: 404, body: { error: "not_found", message: "identity-provider sign-in is not configured" } });
});
