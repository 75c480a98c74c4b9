// The minted auth types as the API reads them: each shape accepted, every required field asked for
// by name, unknown fields refused (a dropped security setting is the worst answer), plain settings
// checked (https token endpoints only, scope tokens, AWS names), and the keys each type names.

import { describe, expect, test } from "bun:test";
import { authKeys, viewService, toRow } from "../../../src/workflows/index.ts";
import { parseWith, ServiceAuthInput } from "../../../src/contract/index.ts";
import { parseMintedAuthConfig } from "../../../src/policy/index.ts";

/** The contract's service auth schema, read as a body's `auth` field (or `field`) would be. */
const readAuth = (v: unknown, field = "auth") => parseWith(ServiceAuthInput, v, field);

const ok = {
  oauth2_client_credentials: {
    type: "oauth2_client_credentials",
    token_url: "https://idp.example.com/oauth/token",
    client_id: "CID",
    client_secret: "CSECRET",
    scopes: ["read:all", "write"],
    audience: "https://api.example.com",
  },
  oauth2_refresh: {
    type: "oauth2_refresh",
    token_url: "https://oauth2.googleapis.com/token",
    client_id: "GID",
    client_secret: "GSECRET",
    refresh_token: "GREFRESH",
    client_auth: "post",
  },
  aws_sigv4: { type: "aws_sigv4", access_key_id: "AWS_ID", secret_access_key: "AWS_SECRET", session_token: "AWS_SESSION", region: "eu-west-1", service: "s3" },
  github_app: { type: "github_app", app_id: "123456", installation_id: "7890", private_key: "GH_PEM", api_url: "https://ghe.example.com/api/v3/" },
} as const;

describe("accepted shapes", () => {
  test.each(Object.entries(ok))("%s round-trips through the store row", (_type, body) => {
    const auth = readAuth(body);
    const view = viewService({ ...toRow(1, "api.example.com", "", auth, true), updatedAt: 0 }).auth;
    expect(view).toEqual(auth);
  });
  test("keys each type names, in order", () => {
    expect(authKeys(readAuth(ok.oauth2_client_credentials))).toEqual(["CID", "CSECRET"]);
    expect(authKeys(readAuth(ok.oauth2_refresh))).toEqual(["GID", "GSECRET", "GREFRESH"]);
    expect(authKeys(readAuth(ok.aws_sigv4))).toEqual(["AWS_ID", "AWS_SECRET", "AWS_SESSION"]);
    expect(authKeys(readAuth({ ...ok.aws_sigv4, session_token: undefined }))).toEqual(["AWS_ID", "AWS_SECRET"]);
    expect(authKeys(readAuth(ok.github_app))).toEqual(["GH_PEM"]);
  });
  test("a trailing slash of api_url is dropped; region and service may be left to the host", () => {
    expect(readAuth(ok.github_app).api_url).toBe("https://ghe.example.com/api/v3");
    expect(readAuth({ type: "aws_sigv4", access_key_id: "A", secret_access_key: "B" })).toEqual({
      type: "aws_sigv4",
      access_key_id: "A",
      secret_access_key: "B",
    });
  });
});

describe("refused, with the field named", () => {
  test.each([
    ["an unknown field", { ...ok.oauth2_refresh, scope: "x" }, "auth.scope"],
    ["a static field on a minted type", { ...ok.aws_sigv4, token: "K" }, "auth.token"],
    ["a missing key", { ...ok.oauth2_refresh, refresh_token: undefined }, "auth.refresh_token"],
    ["a value where a key name belongs", { ...ok.oauth2_client_credentials, client_secret: "sk-live-123" }, "auth.client_secret"],
    ["a plain-HTTP token endpoint", { ...ok.oauth2_client_credentials, token_url: "http://idp.example.com/token" }, "auth.token_url"],
    ["credentials in the token URL", { ...ok.oauth2_client_credentials, token_url: "https://u:p@idp.example.com/token" }, "auth.token_url"],
    ["a scope with a space", { ...ok.oauth2_client_credentials, scopes: ["a b"] }, "auth.scopes"],
    ["client_auth other than basic or post", { ...ok.oauth2_refresh, client_auth: "jwt" }, "auth.client_auth"],
    ["an upper-case region", { ...ok.aws_sigv4, region: "EU-WEST-1" }, "auth.region"],
    ["a non-numeric installation", { ...ok.github_app, installation_id: "abc" }, "auth.installation_id"],
    ["a missing app id", { ...ok.github_app, app_id: undefined }, "auth.app_id"],
  ])("%s", (_what, body, field) => {
    expect(() => readAuth(body)).toThrow(expect.objectContaining({ field }));
  });
});

describe("stored settings read back", () => {
  test("a stored config is read back as written", () => {
    const fields = { token_url: "https://idp.example/token", client_id: "CID", client_secret: "CS", scopes: ["a", "b"], client_auth: "post" };
    expect(parseMintedAuthConfig(JSON.stringify(fields))).toEqual(fields as never);
  });

  test("a config changed outside the broker yields no fields, so the service fails closed", () => {
    for (const text of [
      "not json",
      "[]",
      '"text"',
      JSON.stringify({ client_id: 5 }),
      JSON.stringify({ scopes: "a b" }),
      JSON.stringify({ client_auth: "none" }),
      JSON.stringify({ token_url: "https://idp.example/token", header: "x-injected" }),
    ]) {
      expect(parseMintedAuthConfig(text)).toEqual({});
    }
    expect(parseMintedAuthConfig(null)).toEqual({});
  });
});
