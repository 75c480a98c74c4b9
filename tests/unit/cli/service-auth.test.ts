// `--auth` for `broker service add`: each type built from its flags, missing and misplaced flags named
// before any request, auth in words (key names, never values), and the broker's 400 on an auth field
// (its own validator's message) told against the flag, without repeating the value typed.

import { describe, expect, test } from "bun:test";
import { runOffline } from "../../helpers/cli-offline.ts";
import { createClient } from "../../../src/cli/kit/client.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { type AuthFlags, authKeyNames, buildAuth, describeAuth, nameAuthFlag } from "../../../src/cli/kit/service-auth.ts";
import { InvalidRequest } from "../../../src/errors.ts";
import { parseWith, ServiceAuthInput } from "../../../src/contract/index.ts";

/** The contract's service auth schema, read as a body's `auth` field (or `field`) would be. */
const readAuth = (v: unknown, field = "auth") => parseWith(ServiceAuthInput, v, field);

describe("buildAuth", () => {
  test("builds each auth type from its flags", () => {
    expect(buildAuth({ auth: "bearer", token: "K" })).toEqual({ type: "bearer", token: "K" });
    expect(buildAuth({ auth: "basic", token: "K", username: "u" })).toEqual({ type: "basic", token: "K", username: "u" });
    expect(buildAuth({ auth: "header", header: "X-Api-Key", token: "K", prefix: "Token " })).toEqual({
      type: "header",
      header: "X-Api-Key",
      token: "K",
      prefix: "Token ",
    });
    expect(buildAuth({ auth: "query", param: "key", token: "GOOGLE_API_KEY" })).toEqual({ type: "query", param: "key", token: "GOOGLE_API_KEY" });
    expect(buildAuth({ auth: "path", template: "/bot{value}", token: "TELEGRAM_TOKEN" })).toEqual({
      type: "path",
      template: "/bot{value}",
      token: "TELEGRAM_TOKEN",
    });
    expect(buildAuth({ auth: "passthrough" })).toEqual({ type: "passthrough" });
  });

  test("names missing and misplaced flags", () => {
    expect(() => buildAuth({ auth: "bearer" })).toThrow("--auth bearer needs --token");
    expect(() => buildAuth({ auth: "header", token: "K" })).toThrow("needs --header");
    expect(() => buildAuth({ auth: "passthrough", token: "K" })).toThrow("does not take --token");
    expect(() => buildAuth({ auth: "bearer", token: "K", prefix: "x" })).toThrow("does not take --prefix");
    expect(() => buildAuth({ auth: "oauth" })).toThrow(CliFailure);
    expect(() => buildAuth({ auth: "query", token: "K" })).toThrow("--auth query needs --param");
    expect(() => buildAuth({ auth: "query", param: "key" })).toThrow("--auth query needs --token");
    expect(() => buildAuth({ auth: "path", token: "K", template: "" })).toThrow("--auth path needs --template");
    expect(() => buildAuth({ auth: "path" })).toThrow("--auth path needs --template and --token");
    expect(() => buildAuth({ auth: "query", param: "key", token: "K", template: "/b{value}" })).toThrow("--auth query does not take --template");
    expect(() => buildAuth({ auth: "bearer", token: "K", param: "key" })).toThrow("--auth bearer does not take --param");
  });

  test("a missing flag's hint says what it is for", () => {
    const hint = (flags: AuthFlags) => {
      try {
        buildAuth(flags);
      } catch (err) {
        return (err as CliFailure).hint;
      }
    };
    expect(hint({ auth: "query", token: "K" })).toContain("--param key");
    expect(hint({ auth: "path", token: "K" })).toContain('--template "/bot{value}"');
    expect(hint({ auth: "bearer" })).toContain("broker credential list");
  });

  test("describes auth without any value (services hold key names only)", () => {
    expect(describeAuth({ type: "header", header: "X-Api-Key", token: "K", prefix: "Token " })).toBe("header X-Api-Key: Token <K>");
    expect(describeAuth({ type: "basic", token: "K", username: "u" })).toBe("basic u:K");
    expect(describeAuth({ type: "query", param: "key", token: "GOOGLE_API_KEY" })).toBe("query ?key= from GOOGLE_API_KEY");
    expect(describeAuth({ type: "path", template: "/bot{value}", token: "TELEGRAM_TOKEN" })).toBe("path /bot{value} from TELEGRAM_TOKEN");
  });
});

/** A client whose broker answers the way the real one would: readAuth's own 400 for the auth sent. */
function refusingClient() {
  return createClient({
    addr: "http://broker.test",
    fetch: async (req) => {
      try {
        readAuth((await req.json()).auth);
        return Response.json({ ok: true });
      } catch (err) {
        if (!(err instanceof InvalidRequest)) throw err;
        return Response.json({ error: err.code, message: err.message, field: err.field }, { status: 400 });
      }
    },
  });
}

async function refusal(flags: AuthFlags, auth: unknown = buildAuth(flags)): Promise<CliFailure> {
  try {
    await nameAuthFlag(refusingClient().request("POST", "/v1/vaults/v/services", { body: { auth } }), flags);
  } catch (err) {
    if (err instanceof CliFailure) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("nameAuthFlag: the broker's 400 on an auth field, told against the flag", () => {
  test.each([
    [{ auth: "query", param: "?key=", token: "K" }, "--param must be a query parameter name of letters, digits, _ . ~ or - (at most 64)", "--param key"],
    [{ auth: "path", template: "bot{value}", token: "K" }, "--template must start with /", '--template "/bot{value}"'],
    [{ auth: "path", template: "/bot", token: "K" }, "--template must hold {value} exactly once", "holds {value} once"],
    [
      { auth: "path", template: "/bot{value}/", token: "K" },
      "--template must not end with / (the agent's path, which starts with /, follows it)",
      "does not end with /",
    ],
    [{ auth: "path", template: "/a/../bot{value}", token: "K" }, "--template must not hold dot segments (. or ..)", "/bot{value}"],
    [{ auth: "query", param: "key", token: "lower" }, "--token must be a credential key name (A-Z, 0-9, _; starting with a letter)", "broker credential list"],
  ] as [AuthFlags, string, string][])("%j", async (flags, message, hint) => {
    const f = await refusal(flags);
    expect(f.message).toBe(message);
    expect(f.hint).toContain(hint);
    expect(f.exitCode).toBe(2);
  });

  test("a template Git Bash turned into a Windows path gets a hint about it", async () => {
    const f = await refusal({ auth: "path", template: "C:/Program Files/Git/bot{value}", token: "K" });
    expect(f.message).toBe("--template must start with /");
    expect(f.hint).toContain("MSYS_NO_PATHCONV=1");
  });

  test("a broker that does not know the type says so against --auth", async () => {
    const f = await refusal({ auth: "query", param: "key", token: "K" }, { type: "querystring" });
    expect(f.message).toStartWith("--auth must be one of ");
    expect(f.hint).toContain("older than this CLI");
  });

  test("the value typed is never repeated (a pasted credential must not echo)", async () => {
    const pasted = "/bot123456:AAE-pasted-secret";
    const f = await refusal({ auth: "path", template: pasted, token: "K" });
    expect(`${f.message}\n${f.hint}`).not.toContain("pasted-secret");
  });

  test("other failures pass through unchanged", async () => {
    const client = createClient({ addr: "http://broker.test", fetch: () => Response.json({ error: "conflict", message: "exists" }, { status: 409 }) });
    const err = (await nameAuthFlag(client.request("POST", "/x"), { auth: "bearer" }).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe("exists (409 conflict)");
  });
});

describe("broker service add with query and path auth, before any request", () => {
  const run = runOffline;

  test("a missing companion flag is named, with what it is for", async () => {
    const q = await run(["service", "add", "maps.googleapis.com", "--auth", "query", "--token", "GOOGLE_API_KEY"]);
    expect(q).toEqual({
      code: 2,
      out: "",
      err: "error: --auth query needs --param\nhint: --param names the query parameter that carries the credential, e.g. --param key\n",
    });
    const p = await run(["service", "add", "api.telegram.org", "--auth", "path", "--token", "TELEGRAM_TOKEN", "--param", "key"]);
    expect(p.code).toBe(2);
    expect(p.err).toStartWith("error: --auth path needs --template\n");
  });

  test("help lists both types with an example of each", async () => {
    const help = await run(["service", "add", "--help"]);
    expect(help.out).toContain("--auth=<type>");
    expect(help.out).toContain(
      "--auth is one of bearer, basic, header, query, path, passthrough (a stored credential sent as is) or\noauth2_client_credentials, oauth2_refresh, aws_sigv4, github_app (made or signed by the broker).",
    );
    expect(help.out).toContain("--param=<param>");
    expect(help.out).toContain("--template=<template>");
    expect(help.out).toContain("broker service add maps.googleapis.com --auth query --param key --token GOOGLE_API_KEY");
    expect(help.out).toContain('broker service add api.telegram.org --auth path --template "/bot{value}" --token TELEGRAM_TOKEN');
    expect(help.out).toContain("the upstream gets /bot<value>/getMe");
  });
});

describe("the minted types: flags, words, keys", () => {
  const cc: AuthFlags = { auth: "oauth2_client_credentials", "token-url": "https://auth.example.com/token", "client-id": "CID", "client-secret": "CSECRET" };

  test("builds each type from its flags, named as the API names them", () => {
    expect(buildAuth({ ...cc, scopes: "read:a, write:b  c", audience: "https://api", "client-auth": "post" })).toEqual({
      type: "oauth2_client_credentials",
      token_url: "https://auth.example.com/token",
      client_id: "CID",
      client_secret: "CSECRET",
      scopes: ["read:a", "write:b", "c"],
      audience: "https://api",
      client_auth: "post",
    });
    expect(buildAuth({ ...cc, auth: "oauth2_refresh", "refresh-token": "RT" })).toEqual({
      type: "oauth2_refresh",
      token_url: "https://auth.example.com/token",
      client_id: "CID",
      client_secret: "CSECRET",
      refresh_token: "RT",
    });
    expect(
      buildAuth({ auth: "aws_sigv4", "access-key-id": "AK", "secret-access-key": "SK", "session-token": "ST", region: "eu-west-1", service: "s3" }),
    ).toEqual({
      type: "aws_sigv4",
      access_key_id: "AK",
      secret_access_key: "SK",
      session_token: "ST",
      region: "eu-west-1",
      service: "s3",
    });
    expect(
      buildAuth({ auth: "github_app", "app-id": "123", "installation-id": "456", "private-key": "PK", "api-url": "https://ghe.example.com/api/v3" }),
    ).toEqual({
      type: "github_app",
      app_id: "123",
      installation_id: "456",
      private_key: "PK",
      api_url: "https://ghe.example.com/api/v3",
    });
  });

  test("what it builds is what the broker accepts", () => {
    for (const flags of [
      cc,
      { ...cc, auth: "oauth2_refresh", "refresh-token": "RT" },
      { auth: "aws_sigv4", "access-key-id": "AK", "secret-access-key": "SK" },
      { auth: "github_app", "app-id": "1", "installation-id": "2", "private-key": "PK" },
    ]) {
      const auth = buildAuth(flags);
      expect(readAuth(auth)).toEqual(auth as never);
    }
  });

  test("names missing and misplaced flags, with what a missing one is for", () => {
    expect(() => buildAuth({ auth: "oauth2_refresh", "token-url": "https://a/t", "client-id": "C", "client-secret": "S" })).toThrow(
      "--auth oauth2_refresh needs --refresh-token",
    );
    expect(() => buildAuth({ auth: "aws_sigv4" })).toThrow("--auth aws_sigv4 needs --access-key-id and --secret-access-key");
    expect(() => buildAuth({ auth: "github_app", "app-id": "1" })).toThrow("--auth github_app needs --installation-id and --private-key");
    expect(() => buildAuth({ ...cc, "refresh-token": "RT" })).toThrow("--auth oauth2_client_credentials does not take --refresh-token");
    expect(() => buildAuth({ ...cc, auth: "oauth2_refresh", "refresh-token": "RT", scopes: "a" })).toThrow("--auth oauth2_refresh does not take --scopes");
    expect(() => buildAuth({ ...cc, token: "K" })).toThrow("does not take --token");
    expect(() => buildAuth({ auth: "bearer", token: "K", region: "us-east-1" })).toThrow("--auth bearer does not take --region");
    expect(() => buildAuth({ auth: "oauth2" })).toThrow(
      "--auth must be one of bearer, basic, header, query, path, passthrough, oauth2_client_credentials, oauth2_refresh, aws_sigv4, github_app",
    );
    const hint = (flags: AuthFlags) => {
      try {
        buildAuth(flags);
      } catch (err) {
        return (err as CliFailure).hint;
      }
    };
    expect(hint({ auth: "github_app", "app-id": "1", "installation-id": "2" })).toContain("broker credential set KEY < app.pem");
    expect(hint({ auth: "oauth2_client_credentials" })).toContain("--token-url https://");
  });

  test("describes each type with key names and settings only", () => {
    expect(describeAuth(buildAuth({ ...cc, scopes: "a b" }))).toBe("oauth2_client_credentials CID/CSECRET at auth.example.com/token scopes a b");
    expect(describeAuth(buildAuth({ ...cc, auth: "oauth2_refresh", "refresh-token": "RT" }))).toBe(
      "oauth2_refresh RT (client CID/CSECRET) at auth.example.com/token",
    );
    expect(describeAuth(buildAuth({ auth: "aws_sigv4", "access-key-id": "AK", "secret-access-key": "SK" }))).toBe(
      "aws_sigv4 AK/SK <service from host> <region from host>",
    );
    expect(describeAuth(buildAuth({ auth: "github_app", "app-id": "1", "installation-id": "2", "private-key": "PK" }))).toBe(
      "github_app 1 installation 2 key PK",
    );
  });

  test("authKeyNames lists every key a service names, none for passthrough", () => {
    expect(authKeyNames(buildAuth({ ...cc, auth: "oauth2_refresh", "refresh-token": "RT" }))).toEqual(["CID", "CSECRET", "RT"]);
    expect(authKeyNames(buildAuth({ auth: "aws_sigv4", "access-key-id": "AK", "secret-access-key": "SK", "session-token": "ST", region: "x" }))).toEqual([
      "AK",
      "SK",
      "ST",
    ]);
    expect(authKeyNames({ type: "bearer", token: "K" })).toEqual(["K"]);
    expect(authKeyNames({ type: "passthrough" })).toEqual([]);
  });

  test("the broker's refusal of a snake_case field is told against its kebab-case flag", async () => {
    const url = await refusal({ ...cc, "token-url": "http://auth.example.com/token" });
    expect(url.message).toStartWith("--token-url must be an https:// URL");
    expect(url.hint).toContain("full https:// URL");
    const region = await refusal({ auth: "aws_sigv4", "access-key-id": "AK", "secret-access-key": "SK", region: "EU_WEST" });
    expect(region.message).toStartWith("--region must be lower-case letters");
    expect(region.hint).toContain("--region us-east-1");
    const key = await refusal({ auth: "github_app", "app-id": "1", "installation-id": "2", "private-key": "pk" });
    expect(key.message).toStartWith("--private-key must be a credential key name");
    expect(key.hint).toContain("broker credential list");
  });
});
