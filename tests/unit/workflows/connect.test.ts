// Connecting an account, in the domain (workflows/connect.ts) with a stand-in for the token endpoint: the
// authorization URL (PKCE S256, the template's scopes, the operator's client id, no secret), the completion
// (the sealed refresh token and an oauth2_refresh service from the template, in one go), and every refusal,
// each of which writes nothing: a person without write access or an agent starting, a replayed, expired or
// foreign state, a session that ended, a role lowered meanwhile, a refused code, a decline at the provider.

import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { CredentialNotFound, InvalidRequest, PermissionDenied } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { createAgentInvite, openVault, redeemAgentInvite } from "../../../src/identity/index.ts";
import { decryptCredential } from "../../../src/crypto/index.ts";
import {
  addService,
  beginConnect,
  completeConnect,
  ConnectFailed,
  connectConfigured,
  connectWarnings,
  describeConnect,
  listCredentials,
  listEveryService,
  operatorClient,
  revealCredential,
  setCredential,
  updateService,
  type CodeRedemption,
  type ConnectDeps,
} from "../../../src/workflows/index.ts";
import { createPlanCache } from "../../../src/egress/index.ts";
import { parseWith, ServiceInput, ServiceUpdateInput } from "../../../src/contract/index.ts";
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
    // Only the refresh token: the app's client id and secret are the operator's, read from its settings when minting.
    expect(values).toEqual({ GITHUB_REFRESH_TOKEN: "refresh-token-sentinel" });
    const [service] = await listEveryService(d, await openVault(d, member, "v", "read"));
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
      keys: ["GITHUB_REFRESH_TOKEN"],
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

describe("the operator's app stays the operator's", () => {
  const CONNECTED = {
    type: "oauth2_refresh" as const,
    token_url: "https://github.com/login/oauth/access_token",
    client_id: "GITHUB_CLIENT_ID",
    client_secret: "GITHUB_CLIENT_SECRET",
    refresh_token: "GITHUB_REFRESH_TOKEN",
    client_auth: "basic" as const,
  };

  test("a connected account's service mints with the configured app; the vault holds only the refresh token", async () => {
    const { d, v, member, connect, start, callback } = await world();
    await completeConnect(d, connect, callback((await start()).state), member.userId);
    const plans = createPlanCache(d.store, d.dataKey, () => ({}), { operatorClient: (auth) => operatorClient(connect, auth) });
    const plan = await plans.plan(v, "api.github.com", 443);
    expect(plan.credentialKeys).toEqual(["GITHUB_REFRESH_TOKEN"]);
    const inputs = Object.fromEntries([...plan.minted!.inputs].map(([k, s]) => [k, s.reveal()]));
    expect(inputs).toEqual({ client_id: "Iv1.client", client_secret: "client-secret-sentinel", refresh_token: "refresh-token-sentinel" });
    // No way to read it back: it is no credential of the vault.
    const open = await openVault(d, member, "v", "reveal");
    await expect(revealCredential(d, open, "GITHUB_CLIENT_SECRET")).rejects.toThrow("no credential GITHUB_CLIENT_SECRET");
    expect(JSON.stringify((await listCredentials(d, open, true)).map((c) => ({ ...c, value: c.value?.reveal() })))).not.toContain("client-secret-sentinel");
  });

  test("only at the app's own token endpoint: a service naming the same keys elsewhere gets nothing from the settings", () => {
    expect(operatorClient(undefined, CONNECTED)).toBeUndefined();
    const connect = { apps: [APP] };
    expect(operatorClient(connect, CONNECTED)?.clientSecret.reveal()).toBe("client-secret-sentinel");
    expect(operatorClient(connect, { ...CONNECTED, token_url: "https://evil.example.com/login/oauth/access_token" })).toBeUndefined();
    expect(operatorClient(connect, { ...CONNECTED, client_secret: "MY_SECRET" })).toBeUndefined();
    expect(operatorClient(connect, { ...CONNECTED, type: "oauth2_client_credentials" })).toBeUndefined();
    // An override of the endpoint moves the pin with it.
    const enterprise = { apps: [{ ...APP, tokenUrl: "https://ghe.example.com/login/oauth/access_token" }] };
    expect(operatorClient(enterprise, CONNECTED)).toBeUndefined();
    expect(operatorClient(enterprise, { ...CONNECTED, token_url: "https://ghe.example.com/login/oauth/access_token" })).toBeDefined();
  });

  test("an admin's service pointing those key names at another token endpoint is refused at egress, sending nothing", async () => {
    const { d, v, owner, connect } = await world();
    const open = await openVault(d, owner, "v", "write_secrets");
    await setCredential(d, open, "GITHUB_REFRESH_TOKEN", { value: new Secret("mine") });
    await addService(d, open, {
      host: "evil.example.com",
      description: "",
      enabled: true,
      auth: { ...CONNECTED, token_url: "https://evil.example.com/token" },
    });
    const plans = createPlanCache(d.store, d.dataKey, () => ({}), { operatorClient: (auth) => operatorClient(connect, auth) });
    await expect(plans.plan(v, "evil.example.com", 443)).rejects.toBeInstanceOf(CredentialNotFound);
  });
});

describe("a key the connection overwrites, sent elsewhere today", () => {
  test("the offer names the hosts; starting needs the person's confirmation", async () => {
    const { d, member, connect } = await world();
    const open = await openVault(d, member, "v", "write_secrets");
    await setCredential(d, open, "GITHUB_REFRESH_TOKEN", { value: new Secret("placeholder") });
    await addService(d, open, { host: "evil.example.com", description: "", enabled: true, auth: { type: "bearer", token: "GITHUB_REFRESH_TOKEN" } });
    await addService(d, open, { host: "api.github.com", description: "", enabled: true, auth: { type: "bearer", token: "GITHUB_REFRESH_TOKEN" } });
    const offer = await describeConnect(d, connect, open, "github");
    expect(offer.replacesKeys).toEqual(["GITHUB_REFRESH_TOKEN"]);
    // The service for api.github.com is the one replaced: only the other host is named.
    expect(offer.replacedKeyHosts).toEqual([{ key: "GITHUB_REFRESH_TOKEN", host: "evil.example.com" }]);
    const refused = await beginConnect(d, connect, open, "github", ["read"]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidRequest);
    expect((refused as InvalidRequest).message).toContain("GITHUB_REFRESH_TOKEN to evil.example.com");
    expect(await d.store.db.all("SELECT state_hash FROM connect_states")).toEqual([]);
    const { url } = await beginConnect(d, connect, open, "github", ["read"], true);
    expect(new URL(url).origin).toBe("https://github.com");
  });

  test("nothing to confirm when the key is sent nowhere else", async () => {
    const { d, member, connect } = await world();
    const open = await openVault(d, member, "v", "write_secrets");
    await setCredential(d, open, "GITHUB_REFRESH_TOKEN", { value: new Secret("old") });
    expect((await describeConnect(d, connect, open, "github")).replacedKeyHosts).toEqual([]);
    await beginConnect(d, connect, open, "github", ["read"]);
  });
});

describe("a connected account and its template", () => {
  test("naming its template again (PATCH {template, operations}) changes the rules and operations, never the auth", async () => {
    const { d, member, connect, start, callback } = await world();
    await completeConnect(d, connect, callback((await start(member, ["read"])).state), member.userId);
    const open = await openVault(d, member, "v", "write_secrets");
    const [before] = await listEveryService(d, open);
    const patch = parseWith(ServiceUpdateInput, { template: "github", operations: ["read", "write"] });
    const after = await updateService(d, open, "api.github.com", patch);
    expect(after.auth).toEqual(before!.auth);
    expect(after.template).toMatchObject({ id: "github", operations: ["read", "write"] });
    expect(after.rules).toEqual(patch.rules!);
    // A service made from the template with its own auth still takes the template's again.
    await addService(d, open, parseWith(ServiceInput, { template: "gitlab", operations: ["read"], keys: { token: "OLD_KEY" } }));
    const gitlab = await updateService(
      d,
      open,
      "gitlab.com",
      parseWith(ServiceUpdateInput, { template: "gitlab", operations: ["read"], keys: { token: "NEW_KEY" } }),
    );
    expect(gitlab.auth).toMatchObject({ type: "header", token: "NEW_KEY" });
  });
});
