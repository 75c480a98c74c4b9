// `broker service add` for the auth types the broker mints or signs itself, the CLI run from source
// against an in-process broker: the flags make the API's auth object (--token-url sets token_url,
// --scopes split), every key the service names that the vault lacks gets its own warning, `list` says
// each type in words, the broker's refusal of a field is told against its flag, and `proposal approve`
// refuses a GitHub App key cut off at its first line. No output holds a credential value.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { sourceCli } from "./cli-from-source.ts";

const SECRETS = {
  AWS_ACCESS_KEY_ID: `AKIA${crypto.randomUUID().slice(0, 12).toUpperCase()}`,
  AWS_SECRET_ACCESS_KEY: `aws-secret-${crypto.randomUUID()}`,
  APP_CLIENT_ID: `client-${crypto.randomUUID()}`,
};
const PEM_START = `-----BEGIN RSA PRIVATE KEY-----`;
const PEM_BODY = `MIIEpA${crypto.randomUUID().replaceAll("-", "")}`;
let broker: Broker;
let home: string;
const outputs: string[] = [];
const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  broker = await startBroker({ caPem: (await createTestPki()).caPem }); // no upstream is reached
  home = mkdtempSync(join(tmpdir(), "broker-cli-minted-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  for (const [key, value] of Object.entries(SECRETS)) await ok(["credential", "set", key], `${value}\n`);
});
afterAll(async () => {
  await broker?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("broker service add with minted auth types", () => {
  test("aws_sigv4: the service is added; the session token the vault lacks is warned about, the stored keys are not", async () => {
    const r = await cli([
      "service",
      "add",
      "s3.eu-west-1.amazonaws.com",
      "--auth",
      "aws_sigv4",
      "--access-key-id",
      "AWS_ACCESS_KEY_ID",
      "--secret-access-key",
      "AWS_SECRET_ACCESS_KEY",
      "--session-token",
      "AWS_SESSION_TOKEN",
      "--region",
      "eu-west-1",
      "--service",
      "s3",
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      `Added s3.eu-west-1.amazonaws.com to vault ${broker.vault} (aws_sigv4 AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY+AWS_SESSION_TOKEN s3 eu-west-1).\nAgents may use every method and path.\n`,
    );
    expect(r.stderr).toBe(
      `warning: vault ${broker.vault} has no credential AWS_SESSION_TOKEN yet; set it with \`broker credential set AWS_SESSION_TOKEN\` before agents use this service\n`,
    );
  });

  test("oauth2_client_credentials: --scopes split on spaces and commas, --client-auth post; one warning per missing key", async () => {
    const r = await cli([
      "service",
      "add",
      "api.example.com",
      "--auth",
      "oauth2_client_credentials",
      "--token-url",
      "https://auth.example.com/oauth/token",
      "--client-id",
      "APP_CLIENT_ID",
      "--client-secret",
      "APP_CLIENT_SECRET",
      "--scopes",
      "read:orders, write:orders  admin",
      "--audience",
      "https://api.example.com",
      "--client-auth",
      "post",
    ]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(
      `warning: vault ${broker.vault} has no credential APP_CLIENT_SECRET yet; set it with \`broker credential set APP_CLIENT_SECRET\` before agents use this service\n`,
    );
    const services: { host: string; auth: unknown }[] = JSON.parse(await ok(["service", "list", "--json"]));
    expect(services.find((s) => s.host === "api.example.com")!.auth).toEqual({
      type: "oauth2_client_credentials",
      token_url: "https://auth.example.com/oauth/token",
      client_id: "APP_CLIENT_ID",
      client_secret: "APP_CLIENT_SECRET",
      client_auth: "post",
      scopes: ["read:orders", "write:orders", "admin"],
      audience: "https://api.example.com",
    });
  });

  test("oauth2_refresh and github_app; list says every type in words", async () => {
    await ok([
      "service",
      "add",
      "api.crm.example",
      "--auth",
      "oauth2_refresh",
      "--token-url",
      "https://auth.crm.example/oauth/token",
      "--client-id",
      "APP_CLIENT_ID",
      "--client-secret",
      "APP_CLIENT_SECRET",
      "--refresh-token",
      "CRM_REFRESH_TOKEN",
    ]);
    const gh = await cli([
      "service",
      "add",
      "api.github.com",
      "--auth",
      "github_app",
      "--app-id",
      "123456",
      "--installation-id",
      "45678901",
      "--private-key",
      "GITHUB_APP_KEY",
    ]);
    expect(gh.stdout).toContain("(github_app 123456 installation 45678901 key GITHUB_APP_KEY)");
    expect(gh.stderr).toContain("no credential GITHUB_APP_KEY yet");
    const table = await ok(["service", "list"]);
    expect(table).toMatch(
      /api\.crm\.example\s+oauth2_refresh CRM_REFRESH_TOKEN \(client APP_CLIENT_ID\/APP_CLIENT_SECRET\) at auth\.crm\.example\/oauth\/token\s+yes/,
    );
    expect(table).toMatch(
      /api\.example\.com\s+oauth2_client_credentials APP_CLIENT_ID\/APP_CLIENT_SECRET at auth\.example\.com\/oauth\/token scopes read:orders write:orders admin\s+yes/,
    );
    expect(table).toMatch(/api\.github\.com\s+github_app 123456 installation 45678901 key GITHUB_APP_KEY\s+yes/);
    expect(table).toMatch(/s3\.eu-west-1\.amazonaws\.com\s+aws_sigv4 AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY\+AWS_SESSION_TOKEN s3 eu-west-1\s+yes/);
  });

  test("the broker's refusal of a field is told against its flag, with a next step", async () => {
    const url = await cli([
      "service",
      "add",
      "a.example.com",
      "--auth",
      "oauth2_refresh",
      "--token-url",
      "http://auth.example.com/token",
      "--client-id",
      "A",
      "--client-secret",
      "B",
      "--refresh-token",
      "C",
    ]);
    expect(url.code).toBe(2);
    expect(url.stderr).toStartWith("error: --token-url must be an https:// URL");
    expect(url.stderr).toContain("hint: give the token endpoint's full https:// URL");
    const how = await cli([
      "service",
      "add",
      "a.example.com",
      "--auth",
      "oauth2_client_credentials",
      "--token-url",
      "https://auth.example.com/token",
      "--client-id",
      "A",
      "--client-secret",
      "B",
      "--client-auth",
      "jwt",
    ]);
    expect(how.stderr).toBe(
      'error: --client-auth must be "basic" or "post"\nhint: --client-auth basic (the default: HTTP Basic) or --client-auth post (in the request body)\n',
    );
    const key = await cli(["service", "add", "a.example.com", "--auth", "aws_sigv4", "--access-key-id", "lower", "--secret-access-key", "B"]);
    expect(key.stderr).toStartWith("error: --access-key-id must be a credential key name");
    expect(key.stderr).toContain("hint: `broker credential list` shows the vault's keys");
  });

  test("proposal approve refuses a GitHub App key cut off at its first line, and approves the whole key once stored", async () => {
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      {
        services: [
          {
            host: "ghe.example.com",
            auth: { type: "github_app", app_id: "7", installation_id: "8", private_key: "GHE_APP_KEY", api_url: "https://ghe.example.com/api/v3" },
          },
        ],
        credentials: [{ key: "GHE_APP_KEY", description: "The app's private key" }],
      },
      broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    const id = String(filed.body.id);
    const show = await ok(["proposal", "show", id]);
    expect(show).toContain("ghe.example.com  github_app 7 installation 8 key GHE_APP_KEY at ghe.example.com/api/v3");
    const cut = await cli(["proposal", "approve", id], `${PEM_START}\n${PEM_BODY}\n-----END RSA PRIVATE KEY-----\n`);
    expect(cut.code).toBe(1);
    expect(cut.stderr).toContain("GHE_APP_KEY got only the first line of a PEM key: nothing was approved");
    expect(cut.stderr).toContain(`broker credential set GHE_APP_KEY < app.pem`);
    expect((await broker.api("GET", `/v1/proposals/${id}`, undefined, broker.sessionToken)).body.status).toBe("pending");
    await ok(["credential", "set", "GHE_APP_KEY"], `${PEM_START}\n${PEM_BODY}\n-----END RSA PRIVATE KEY-----\n`);
    expect(await ok(["proposal", "approve", id], "\n")).toBe(`Approved proposal ${id}\n`);
    for (const secret of [...Object.values(SECRETS), PEM_BODY]) await expectNoLeak(broker, secret, outputs);
  });

  test("service update --auth replaces a service's auth (bearer → oauth2_refresh); a lone auth flag asks for --auth", async () => {
    await ok(["service", "add", "crm.example.com", "--auth", "bearer", "--token", "APP_CLIENT_ID"]);
    const lone = await cli(["service", "update", "crm.example.com", "--token", "OTHER"]);
    expect(lone.code).toBe(2);
    expect(lone.stderr).toContain("--token changes the auth, which needs --auth");
    const r = await cli([
      "service",
      "update",
      "crm.example.com",
      "--auth",
      "oauth2_refresh",
      "--token-url",
      "https://auth.crm.example/token",
      "--client-id",
      "APP_CLIENT_ID",
      "--client-secret",
      "CRM_SECRET",
      "--refresh-token",
      "CRM_REFRESH",
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toStartWith("Updated crm.example.com in vault");
    expect(r.stderr).toContain("has no credential CRM_SECRET yet");
    const stored = (await broker.api("GET", `/v1/vaults/${broker.vault}/services`, undefined, broker.userToken)).body.services.find(
      (x: { host: string }) => x.host === "crm.example.com",
    );
    expect(stored.auth).toEqual({
      type: "oauth2_refresh",
      token_url: "https://auth.crm.example/token",
      client_id: "APP_CLIENT_ID",
      client_secret: "CRM_SECRET",
      refresh_token: "CRM_REFRESH",
    });
    for (const secret of Object.values(SECRETS)) await expectNoLeak(broker, secret, outputs);
  });
});
