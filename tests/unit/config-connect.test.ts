// BROKER_CONNECT_<ID>_* as loadConfig reads it: one OAuth app per template id (client id, a secret inline or
// from a file, optional endpoint overrides and client authentication), every problem named and reported at
// once, secrets only inside Secret, and the names neither warned about as unknown nor listed wrongly in --help.

import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectEnvId, ConfigError, loadConfig, SETTINGS, type Env } from "../../src/config.ts";

const HOME = { HOME: "/home/alice" };
const GITHUB = { BROKER_CONNECT_GITHUB_CLIENT_ID: "Iv1.abc", BROKER_CONNECT_GITHUB_CLIENT_SECRET: "gh-secret-sentinel" };

function problemsOf(env: Env): readonly string[] {
  try {
    loadConfig({ ...HOME, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected loadConfig to throw ConfigError");
}

describe("BROKER_CONNECT_<ID>_*: good settings", () => {
  test("none set: no apps, and no warning for the names", () => {
    const c = loadConfig(HOME);
    expect(c.connect).toEqual([]);
  });

  test("an app with defaults: the template's endpoints, client_secret_basic, the secret wrapped", () => {
    const c = loadConfig({ ...HOME, ...GITHUB });
    expect(c.connect.length).toBe(1);
    const app = c.connect[0]!;
    expect({ ...app, clientSecret: String(app.clientSecret) }).toEqual({
      envId: "GITHUB",
      clientId: "Iv1.abc",
      clientSecret: "[redacted]",
      authorizeUrl: undefined,
      tokenUrl: undefined,
      clientAuthMethod: "client_secret_basic",
    });
    expect(app.clientSecret.reveal()).toBe("gh-secret-sentinel");
    expect(JSON.stringify(c)).not.toContain("gh-secret-sentinel");
    expect(c.warnings).toEqual([]);
  });

  test("overrides, a secret from a file, several ids with '-' spelled '_', http only for a loopback authorize URL", () => {
    const dir = mkdtempSync(join(tmpdir(), "connect-config-"));
    const file = join(dir, "secret");
    writeFileSync(file, "  from-file-secret\n");
    try {
      const c = loadConfig({
        ...HOME,
        ...GITHUB,
        BROKER_CONNECT_GITHUB_AUTHORIZE_URL: "https://github.example.com/login/oauth/authorize",
        BROKER_CONNECT_GITHUB_TOKEN_URL: "https://github.example.com/login/oauth/access_token",
        BROKER_CONNECT_GITHUB_CLIENT_AUTH_METHOD: "client_secret_post",
        BROKER_CONNECT_GOOGLE_DRIVE_CLIENT_ID: "drive-client",
        BROKER_CONNECT_GOOGLE_DRIVE_CLIENT_SECRET_FILE: file,
        BROKER_CONNECT_GOOGLE_DRIVE_AUTHORIZE_URL: "http://127.0.0.1:9000/auth",
      });
      expect(c.connect.map((a) => [a.envId, a.authorizeUrl, a.tokenUrl, a.clientAuthMethod])).toEqual([
        ["GITHUB", "https://github.example.com/login/oauth/authorize", "https://github.example.com/login/oauth/access_token", "client_secret_post"],
        ["GOOGLE_DRIVE", "http://127.0.0.1:9000/auth", undefined, "client_secret_basic"],
      ]);
      expect(c.connect[1]!.clientSecret.reveal()).toBe("from-file-secret");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the <ID> of a template id", () => {
    expect(connectEnvId("github")).toBe("GITHUB");
    expect(connectEnvId("google-drive")).toBe("GOOGLE_DRIVE");
  });

  test("listed in `broker server --help` with the redirect URI to register", () => {
    const names = SETTINGS.map((s) => s.name);
    for (const suffix of ["CLIENT_ID", "CLIENT_SECRET", "CLIENT_SECRET_FILE", "AUTHORIZE_URL", "TOKEN_URL", "CLIENT_AUTH_METHOD"])
      expect(names).toContain(`BROKER_CONNECT_<ID>_${suffix}`);
    expect(SETTINGS.find((s) => s.name === "BROKER_CONNECT_<ID>_CLIENT_ID")!.description).toContain("<BROKER_PUBLIC_URL>/connect/callback");
  });
});

describe("BROKER_CONNECT_<ID>_*: every problem, each naming its variable, never a secret", () => {
  test("a missing client id or secret, both secrets, a bad method", () => {
    const problems = problemsOf({
      BROKER_CONNECT_GITHUB_CLIENT_SECRET: "gh-secret-sentinel",
      BROKER_CONNECT_GITLAB_CLIENT_ID: "gl",
      BROKER_CONNECT_SLACK_CLIENT_ID: "sl",
      BROKER_CONNECT_SLACK_CLIENT_SECRET: "slack-secret-sentinel",
      BROKER_CONNECT_SLACK_CLIENT_SECRET_FILE: "/nowhere",
      BROKER_CONNECT_NOTION_CLIENT_ID: "no",
      BROKER_CONNECT_NOTION_CLIENT_SECRET: "x",
      BROKER_CONNECT_NOTION_CLIENT_AUTH_METHOD: "private_key_jwt",
    });
    expect(problems).toEqual([
      "BROKER_CONNECT_GITHUB_CLIENT_ID: required with the other BROKER_CONNECT_GITHUB_* settings",
      "BROKER_CONNECT_GITLAB_CLIENT_SECRET: required (or BROKER_CONNECT_GITLAB_CLIENT_SECRET_FILE)",
      "BROKER_CONNECT_NOTION_CLIENT_AUTH_METHOD: must be client_secret_basic or client_secret_post",
      "BROKER_CONNECT_SLACK_CLIENT_SECRET and BROKER_CONNECT_SLACK_CLIENT_SECRET_FILE: set exactly one, not both",
    ]);
    expect(problems.join("\n")).not.toContain("sentinel");
  });

  test("endpoints: https only (http for a loopback authorize URL only, never for the token URL), no credentials or fragment", () => {
    const problems = problemsOf({
      ...GITHUB,
      BROKER_CONNECT_GITHUB_AUTHORIZE_URL: "http://github.example.com/login/oauth/authorize",
      BROKER_CONNECT_GITHUB_TOKEN_URL: "http://127.0.0.1:9000/token",
      BROKER_CONNECT_GITLAB_CLIENT_ID: "gl",
      BROKER_CONNECT_GITLAB_CLIENT_SECRET: "x",
      BROKER_CONNECT_GITLAB_AUTHORIZE_URL: "https://user:pw@gitlab.example.com/oauth/authorize",
      BROKER_CONNECT_GITLAB_TOKEN_URL: "https://gitlab.example.com/oauth/token#frag",
    });
    expect(problems).toEqual([
      "BROKER_CONNECT_GITHUB_AUTHORIZE_URL: must be an https URL without credentials or fragment (http only for 127.0.0.1 or localhost)",
      "BROKER_CONNECT_GITHUB_TOKEN_URL: must be an https URL without credentials or fragment (a token endpoint is never reached over plain HTTP)",
      "BROKER_CONNECT_GITLAB_AUTHORIZE_URL: must be an https URL without credentials or fragment (http only for 127.0.0.1 or localhost)",
      "BROKER_CONNECT_GITLAB_TOKEN_URL: must be an https URL without credentials or fragment (a token endpoint is never reached over plain HTTP)",
    ]);
  });

  test("a name that is no setting is refused (not merely warned about), a file secret must be absolute and readable", () => {
    const problems = problemsOf({
      ...GITHUB,
      BROKER_CONNECT_GITHUB_SCOPES: "repo",
      BROKER_CONNECT_CLIENT_ID: "no id",
      BROKER_CONNECT_GITLAB_CLIENT_ID: "gl",
      BROKER_CONNECT_GITLAB_CLIENT_SECRET_FILE: "relative/secret",
    });
    expect(problems.length).toBe(3);
    expect(problems[0]).toStartWith("BROKER_CONNECT_GITHUB_SCOPES: not a setting; expected BROKER_CONNECT_<ID>_CLIENT_ID");
    expect(problems[1]).toStartWith("BROKER_CONNECT_CLIENT_ID: not a setting");
    expect(problems[2]).toBe("BROKER_CONNECT_GITLAB_CLIENT_SECRET_FILE: must be an absolute path");
  });

  test("blank values count as unset", () => {
    expect(loadConfig({ ...HOME, BROKER_CONNECT_GITHUB_TOKEN_URL: " " }).connect).toEqual([]);
  });
});
