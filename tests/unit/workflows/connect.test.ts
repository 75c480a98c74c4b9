// Connecting an account, in the domain (workflows/connect.ts) with a stand-in for the token endpoint: the
// authorization URL (PKCE S256, the template's scopes, the operator's client id, no secret), the completion
// (three sealed credentials and an oauth2_refresh service from the template, in one go), and every refusal,
// each of which writes nothing: a person without write access or an agent starting, a replayed, expired or
// foreign state, a session that ended, a role lowered meanwhile, a refused code, a decline at the provider.

import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { PermissionDenied } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { createAgentInvite, openVault, redeemAgentInvite } from "../../../src/identity/index.ts";
import { decryptCredential } from "../../../src/crypto/index.ts";
import {
  beginConnect,
  completeConnect,
  ConnectFailed,
  connectConfigured,
  connectWarnings,
  describeConnect,
  listServices,
  type CodeRedemption,
  type ConnectDeps,
} from "../../../src/workflows/index.ts";
import type { ConnectApp } from "../../../src/config.ts";
import { createTestApi } from "../../helpers/api.ts";
import { registerAs } from "../../helpers/principals.ts";

const APP: ConnectApp = {
  envId: "GITHUB",
  clientId: "Iv1.client",
  clientSecret: new Secret("client-secret-sentinel"),
  authorizeUrl: undefined,
  tokenUrl: undefined,
  clientAuthMethod: "client_secret_basic",
};

async function world(answer: () => { refreshToken: Secret } | { failure: string } = () => ({ refreshToken: new Secret("refresh-token-sentinel") })) {
  const api = await createTestApi();
  const d = api.domain;
  const owner = await registerAs(d, "owner@example.com");
  const member = await registerAs(d, "member@example.com");
  const proxy = await registerAs(d, "proxy@example.com");
  const v = await d.store.vaults.create("v", d.now());
  await d.store.access.setMember(v.id, member.userId, "member", d.now());
  await d.store.access.setMember(v.id, proxy.userId, "proxy", d.now());
  const redeemed: CodeRedemption[] = [];
  const connect: ConnectDeps = {
    apps: [APP],
    redirectUri: "http://broker.test/connect/callback",
    redeem: async (r) => {
      redeemed.push(r);
      return answer();
    },
  };
  const start = async (who = member, operations: string[] = ["read", "write"]) => {
    const { url, state } = await beginConnect(d, connect, await openVault(d, who, "v", "write_secrets"), "github", operations);
    return { url: new URL(url), state };
  };
  const callback = (state: string, extra: Record<string, string> = { code: "the-code" }) => new URLSearchParams({ state, ...extra });
  const nothingWritten = async () => {
    expect(await d.store.credentials.keys(v.id)).toEqual([]);
    expect(await d.store.services.list(v.id)).toEqual([]);
  };
  return { d, clock: api.clock, owner, member, proxy, v, connect, redeemed, start, callback, nothingWritten };
}

async function failure(p: Promise<unknown>): Promise<string> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectFailed);
  return (err as ConnectFailed).reason;
}

describe("what is offered", () => {
  test("only templates with a connect flow whose provider the operator set up", async () => {
    const { connect } = await world();
    expect(connectConfigured(connect, "github")).toBe(true);
    expect(connectConfigured(connect, "gitlab")).toBe(false); // no app registered for it
    expect(connectConfigured(connect, "no-such-template")).toBe(false);
    expect(connectConfigured(undefined, "github")).toBe(false);
  });

  test("settings naming no template, or one without a connect flow, are start-up warnings", () => {
    expect(connectWarnings([APP])).toEqual([]);
    expect(connectWarnings([{ ...APP, envId: "NO_SUCH_THING" }])).toEqual([
      "BROKER_CONNECT_NO_SUCH_THING_*: no template no-such-thing in this release's catalogue; the settings are unused",
    ]);
  });

  test("the page's offer: operations, host, keys, provider; a person who may not write secrets is refused", async () => {
    const { d, member, proxy, connect } = await world();
    const offer = await describeConnect(d, connect, await openVault(d, member, "v", "write_secrets"), "github");
    expect({ ops: offer.operations, host: offer.host, keys: offer.keys, origin: offer.providerOrigin, replaces: offer.replacesService }).toEqual({
      ops: ["read", "write", "destructive"],
      host: "api.github.com",
      keys: { clientId: "GITHUB_CLIENT_ID", clientSecret: "GITHUB_CLIENT_SECRET", refreshToken: "GITHUB_REFRESH_TOKEN" },
      origin: "https://github.com",
      replaces: false,
    });
    await expect(openVault(d, proxy, "v", "write_secrets")).rejects.toBeInstanceOf(PermissionDenied);
    await expect(describeConnect(d, connect, await openVault(d, proxy, "v", "read"), "github")).rejects.toBeInstanceOf(PermissionDenied);
  });
});

describe("starting", () => {
  test("the authorization URL: code flow, PKCE S256, the chosen operations' scopes, the operator's client id, no secret", async () => {
    const { d, start } = await world();
    const { url, state } = await start();
    expect(url.origin + url.pathname).toBe("https://github.com/login/oauth/authorize");
    const p = Object.fromEntries(url.searchParams);
    expect(p).toEqual({
      response_type: "code",
      client_id: "Iv1.client",
      redirect_uri: "http://broker.test/connect/callback",
      scope: "repo read:user workflow",
      state,
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge_method: "S256",
    });
    expect(url.href).not.toContain("client-secret-sentinel");
    const row = (await d.store.db.get<{ code_verifier: string; operations: string }>("SELECT code_verifier, operations FROM connect_states"))!;
    expect(createHash("sha256").update(row.code_verifier).digest("base64url")).toBe(p.code_challenge!);
    expect(row.operations).toBe("read write");
  });

  test("no operation chosen means read; one the template lacks is refused; an agent or a proxy-role person starts nothing", async () => {
    const { d, owner, proxy, connect, start } = await world();
    expect((await start(undefined, [])).url.searchParams.get("scope")).toBe("repo read:user");
    await expect(start(undefined, ["admin"])).rejects.toThrow("GitHub offers no operation admin");
    const invite = await createAgentInvite(d, owner, await openVault(d, owner, "v", "manage"), { name: "bot", role: "admin" });
    const agent = await d.auth.authenticate((await redeemAgentInvite(d, invite.token)).token);
    await expect(beginConnect(d, connect, await openVault(d, agent, "v", "read", "v"), "github", ["read"])).rejects.toBeInstanceOf(PermissionDenied);
    await expect(beginConnect(d, connect, await openVault(d, proxy, "v", "read"), "github", ["read"])).rejects.toBeInstanceOf(PermissionDenied);
  });
});

describe("completing", () => {
  test("the code is redeemed once; the credentials are sealed and the service made from the template", async () => {
    const { d, v, member, connect, redeemed, start, callback } = await world();
    const { url, state } = await start();
    const done = await completeConnect(d, connect, callback(state), member.userId);
    expect({ vault: done.vault, host: done.host, template: done.template.id, ops: done.operations }).toEqual({
      vault: "v",
      host: "api.github.com",
      template: "github",
      ops: ["read", "write"],
    });
    expect(redeemed.length).toBe(1);
    const r = redeemed[0]!;
    expect({ ...r, clientSecret: r.clientSecret.reveal(), code: r.code.reveal(), codeVerifier: undefined }).toEqual({
      tokenUrl: "https://github.com/login/oauth/access_token",
      clientId: "Iv1.client",
      clientSecret: "client-secret-sentinel",
      clientAuth: "basic",
      code: "the-code",
      codeVerifier: undefined,
      redirectUri: "http://broker.test/connect/callback",
    });
    expect(createHash("sha256").update(r.codeVerifier.reveal()).digest("base64url")).toBe(url.searchParams.get("code_challenge")!);
    const values: Record<string, string> = {};
    for (const key of await d.store.credentials.keys(v.id))
      values[key] = (await decryptCredential(d.dataKey, (await d.store.credentials.get(v.id, key))!)).reveal();
    expect(values).toEqual({ GITHUB_CLIENT_ID: "Iv1.client", GITHUB_CLIENT_SECRET: "client-secret-sentinel", GITHUB_REFRESH_TOKEN: "refresh-token-sentinel" });
    const [service] = await listServices(d, await openVault(d, member, "v", "read"));
    expect(service).toMatchObject({
      host: "api.github.com",
      description: "GitHub, connected account",
      enabled: true,
      auth: {
        type: "oauth2_refresh",
        token_url: "https://github.com/login/oauth/access_token",
        client_id: "GITHUB_CLIENT_ID",
        client_secret: "GITHUB_CLIENT_SECRET",
        refresh_token: "GITHUB_REFRESH_TOKEN",
        client_auth: "basic",
      },
      template: { id: "github", operations: ["read", "write"] },
    });
    expect(service!.template!.catalogue_rules).toBeUndefined();
    // Single use: the same callback again finds nothing to complete.
    expect(await failure(completeConnect(d, connect, callback(state), member.userId))).toBe("bad_state");
    expect(redeemed.length).toBe(1);
  });

  test("connecting again replaces the service and the values, and the page says it will", async () => {
    const { d, v, member, connect, start, callback } = await world();
    await completeConnect(d, connect, callback((await start()).state), undefined);
    const offer = await describeConnect(d, connect, await openVault(d, member, "v", "write_secrets"), "github");
    expect({ service: offer.replacesService, keys: offer.replacesKeys }).toEqual({
      service: true,
      keys: ["GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "GITHUB_REFRESH_TOKEN"],
    });
    await completeConnect(d, connect, callback((await start(member, ["read"])).state), undefined);
    expect((await d.store.services.list(v.id)).map((s) => s.operations)).toEqual([["read"]]);
  });

  test("every refusal writes nothing and redeems no code", async () => {
    const w = await world();
    const { d, connect, start, callback, member, owner } = w;
    // Declined at the provider; another error code; no code at all.
    expect(await failure(completeConnect(d, connect, callback((await start()).state, { error: "access_denied" }), undefined))).toBe("denied");
    expect(await failure(completeConnect(d, connect, callback((await start()).state, { error: "made_up" }), undefined))).toBe("provider_error");
    expect(await failure(completeConnect(d, connect, callback((await start()).state, {}), undefined))).toBe("bad_state");
    // Unknown or missing state.
    expect(await failure(completeConnect(d, connect, callback("never-issued"), undefined))).toBe("bad_state");
    expect(await failure(completeConnect(d, connect, new URLSearchParams({ code: "c" }), undefined))).toBe("bad_state");
    // Older than 10 minutes.
    const old = await start();
    w.clock.advance(10 * 60_000);
    expect(await failure(completeConnect(d, connect, callback(old.state), undefined))).toBe("expired");
    // This browser is signed in as someone else.
    expect(await failure(completeConnect(d, connect, callback((await start()).state), owner.userId))).toBe("other_person");
    // The member's role was lowered to proxy meanwhile.
    const lowered = await start();
    await d.store.access.setMember(w.v.id, member.userId, "proxy", d.now());
    expect(await failure(completeConnect(d, connect, callback(lowered.state), undefined))).toBe("not_allowed");
    await d.store.access.setMember(w.v.id, member.userId, "member", d.now());
    // The session that started it was signed out.
    const signedOut = await start();
    await d.store.sessions.revoke(member.sessionId, d.now());
    expect(await failure(completeConnect(d, connect, callback(signedOut.state), undefined))).toBe("session_ended");
    expect(w.redeemed.length).toBe(0);
    await w.nothingWritten();
  });

  test("a code the token endpoint refuses writes nothing; the reason names no value", async () => {
    const w = await world(() => ({ failure: "the token endpoint github.com refused the authorization code (HTTP 400, invalid_grant)" }));
    const err = (await completeConnect(w.d, w.connect, w.callback((await w.start()).state), undefined).catch((e: unknown) => e)) as ConnectFailed;
    expect(err).toBeInstanceOf(ConnectFailed);
    expect(err.reason).toBe("exchange_failed");
    expect(err.message).toBe("GitHub did not complete the connection: the token endpoint github.com refused the authorization code (HTTP 400, invalid_grant)");
    await w.nothingWritten();
  });
});
