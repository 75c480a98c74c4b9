// Workload identity (issue 39 points 1–3) over the API: the owner trusts issuers and binds claim conditions to a vault;
// POST /v1/sessions/exchange verifies a platform token against the issuer's JWKS (served over HTTPS on 127.0.0.1 under
// a test CA, fetched through the broker's trusting fetch) and mints a session for the first binding that matches.
// Every refusal answers with the envelope and never echoes the token; no token reaches the log.

import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { createApi } from "../../../src/server/app.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTrustingFetch, createWorkloadKeys } from "../../../src/identity/index.ts";
import { startTestIssuer, type TestIssuer } from "../../helpers/workload-issuer.ts";
import { addUser, createHarness, createVault, register, type Harness } from "../server/fixtures.ts";

const GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";

let gh: TestIssuer;
let k8s: TestIssuer;
let h: Harness;
let owner: string;
const platformTokens: string[] = [];

beforeAll(async () => {
  gh = await startTestIssuer();
  k8s = await startTestIssuer({ alg: "ES256" });
});
afterAll(async () => {
  await gh.close();
  await k8s.close();
});

beforeEach(async () => {
  // Cooldown 0: a rotation is seen at the first unknown kid (production waits 30 s between such refetches).
  const keys = createWorkloadKeys({ fetch: createTrustingFetch([gh.pki.caPem, k8s.pki.caPem]), cooldownMs: 0 });
  h = await createHarness({ workloadKeys: keys });
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "team");
  await createVault(h, owner, "cluster");
  expect(
    (await h.call("POST", "/v1/workload-issuers", { token: owner, body: { name: "github", issuer: gh.url, audiences: ["https://broker.example"] } })).status,
  ).toBe(201);
  const k8sIssuer = { name: "k8s", issuer: k8s.url, jwks_url: k8s.jwksUrl, audiences: ["broker"], clock_skew_seconds: 30 };
  expect((await h.call("POST", "/v1/workload-issuers", { token: owner, body: k8sIssuer })).status).toBe(201);
  const deploy = {
    name: "deploy",
    vault: "team",
    conditions: { sub: "repo:org/repo:*", repository: "org/repo", ref: ["refs/heads/main", "refs/tags/v*"], environment: "production" },
    max_session_seconds: 900,
  };
  expect((await h.call("POST", "/v1/workload-issuers/github/bindings", { token: owner, body: deploy })).status).toBe(201);
  const pods = {
    name: "ci-pods",
    vault: "cluster",
    role: "member",
    conditions: { "kubernetes.io/namespace": "ci", "kubernetes.io/serviceaccount/name": ["deployer", "ops-*"] },
  };
  expect((await h.call("POST", "/v1/workload-issuers/k8s/bindings", { token: owner, body: pods })).status).toBe(201);
});

const now = () => h.clock.now();

function githubClaims(over: Record<string, unknown> = {}) {
  return {
    aud: "https://broker.example",
    sub: "repo:org/repo:ref:refs/heads/main",
    repository: "org/repo",
    repository_owner: "org",
    ref: "refs/heads/main",
    environment: "production",
    job_workflow_ref: "org/repo/.github/workflows/deploy.yml@refs/heads/main",
    jti: crypto.randomUUID(),
    ...over,
  };
}

function kubernetesClaims(over: Record<string, unknown> = {}) {
  return {
    aud: ["broker"],
    sub: "system:serviceaccount:ci:deployer",
    "kubernetes.io": { namespace: "ci", pod: { name: "runner-1", uid: "u1" }, serviceaccount: { name: "deployer", uid: "u2" } },
    ...over,
  };
}

async function exchange(token: string, body: Record<string, unknown> = {}) {
  platformTokens.push(token);
  return h.call("POST", "/v1/sessions/exchange", { body: { grant_type: GRANT, subject_token: token, subject_token_type: JWT_TYPE, ...body } });
}

async function expectRefused(token: string, message: RegExp) {
  const r = await exchange(token);
  expect({ status: r.status, error: r.body?.error }).toEqual({ status: 400, error: "invalid_grant" });
  expect(r.body.message).toMatch(message);
  expect(JSON.stringify(r.body)).not.toContain(token.split(".")[1]!);
}

describe("exchanging a platform token", () => {
  test("a GitHub-Actions-shaped token matches its binding and gets a proxy session for the vault, no longer than its cap", async () => {
    const token = await gh.sign(githubClaims(), { now: now(), ttlSec: 3600 });
    const r = await exchange(token);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
      token_type: "Bearer",
      expires_in: 900,
      vault: "team",
      role: "proxy",
    });
    const session = r.body.access_token as string;
    // The session works, bound to its vault, and lists itself; its row names the workload's subject.
    const own = await h.call("GET", "/v1/sessions?vault=team", { token: session });
    expect(own.status).toBe(200);
    expect(own.body.sessions).toHaveLength(1);
    const row = await h.store.sessions.byPublicId(own.body.sessions[0].id);
    expect(row?.workloadSubject).toBe("repo:org/repo:ref:refs/heads/main");
    // The agent standing for the binding is on the Agents list, with the session counted.
    const agents = await h.call("GET", "/v1/agents", { token: owner });
    expect(agents.body.agents.find((a: { name: string }) => a.name === "wl-github-deploy")).toMatchObject({
      vaults: [{ name: "team", role: "proxy" }],
      sessions: 1,
    });
    expect(h.logs.some((l) => l.includes("workload_exchange") && l.includes("repo:org/repo:ref:refs/heads/main"))).toBe(true);
  });

  test("a session never outlives the platform token", async () => {
    const token = await gh.sign(githubClaims(), { now: now(), ttlSec: 120 });
    const r = await exchange(token);
    expect(r.status).toBe(200);
    expect(r.body.expires_in).toBe(120);
    h.clock.advance(121_000);
    expect((await h.call("GET", "/v1/sessions?vault=team", { token: r.body.access_token })).status).toBe(401);
  });

  test("a Kubernetes-shaped token (nested claims, ES256, JWKS URL given) matches its binding with the binding's role", async () => {
    const r = await exchange(await k8s.sign(kubernetesClaims(), { now: now() }));
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ vault: "cluster", role: "member" });
    const glob = await exchange(await k8s.sign(kubernetesClaims({ "kubernetes.io": { namespace: "ci", serviceaccount: { name: "ops-7" } } }), { now: now() }));
    expect(glob.status).toBe(200);
  });

  test("the id_token token type and a form-encoded body are accepted", async () => {
    const api = createApi({ domain: h.domain, log: createMemoryLogger() });
    const token = await gh.sign(githubClaims(), { now: now() });
    const form = new URLSearchParams({
      grant_type: GRANT,
      subject_token: token,
      subject_token_type: "urn:ietf:params:oauth:token-type:id_token",
      audience: "x",
    });
    const res = await api.request("/v1/sessions/exchange", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { token_type: string }).token_type).toBe("Bearer");
  });

  test("every refusal: audience, claim, expiry, nbf, iat, exp missing, alg none, HS256 with the public key, replayed jti, unknown issuer", async () => {
    await expectRefused(await gh.sign(githubClaims({ aud: "https://other.example" }), { now: now() }), /audience/);
    await expectRefused(await gh.sign(githubClaims({ ref: "refs/heads/dev", sub: "repo:org/repo:ref:refs/heads/dev" }), { now: now() }), /no binding/);
    await expectRefused(await gh.sign(githubClaims({ repository: "org/other" }), { now: now() }), /no binding/);
    await expectRefused(await gh.sign(githubClaims(), { now: now() - 3600_000, ttlSec: 600 }), /expired/);
    await expectRefused(await gh.sign(githubClaims({ nbf: Math.floor(now() / 1000) + 600 }), { now: now() }), /not valid yet/);
    await expectRefused(await gh.sign(githubClaims({ iat: Math.floor(now() / 1000) + 600, exp: Math.floor(now() / 1000) + 1200 }), { now: now() }), /future/);
    await expectRefused(await gh.sign(githubClaims(), { now: now(), noExp: true }), /exp/);
    await expectRefused(gh.unsigned(githubClaims(), now()), /algorithm/);
    await expectRefused(await gh.hmacForgery(githubClaims(), now()), /algorithm/);
    await expectRefused(await k8s.sign(kubernetesClaims({ iss: "https://elsewhere.example" }), { now: now() }), /not trusted/);
    // Signed by one trusted issuer's key but claiming the other's iss: the other's keys do not verify it.
    await expectRefused(await k8s.sign(githubClaims({ iss: gh.url }), { now: now() }), /key|signature/);
    const once = await gh.sign(githubClaims({ jti: "run-1-attempt-1" }), { now: now() });
    expect((await exchange(once)).status).toBe(200);
    await expectRefused(once, /already/);
    const bad = await h.call("POST", "/v1/sessions/exchange", { body: { grant_type: "password", subject_token: "x", subject_token_type: JWT_TYPE } });
    expect({ status: bad.status, error: bad.body.error, field: bad.body.field }).toEqual({ status: 400, error: "invalid_request", field: "grant_type" });
  });

  test("a token without jti may be exchanged again while it is valid; a jti is free again once its token expired", async () => {
    const token = await gh.sign(githubClaims({ jti: undefined }), { now: now() });
    expect((await exchange(token)).status).toBe(200);
    expect((await exchange(token)).status).toBe(200);
    expect((await exchange(await gh.sign(githubClaims({ jti: "j-1" }), { now: now(), ttlSec: 60 }))).status).toBe(200);
    h.clock.advance(121_000); // past its exp and the issuer's 60 s of skew
    expect((await exchange(await gh.sign(githubClaims({ jti: "j-1" }), { now: now(), ttlSec: 60 }))).status).toBe(200);
  });

  test("keys rotated: an unknown kid fetches the JWKS again and the new key is accepted; a kid never published is refused", async () => {
    expect((await exchange(await gh.sign(githubClaims(), { now: now() }))).status).toBe(200);
    const before = gh.jwksFetches();
    await gh.rotate({ publish: false });
    await expectRefused(await gh.sign(githubClaims(), { now: now() }), /kid/);
    gh.publish();
    expect((await exchange(await gh.sign(githubClaims(), { now: now() }))).status).toBe(200);
    expect(gh.jwksFetches()).toBeGreaterThan(before);
  });

  test("a rotated platform token presented with the running session renews it; another workload's session is refused", async () => {
    const first = await exchange(await gh.sign(githubClaims(), { now: now(), ttlSec: 120 }));
    const session = first.body.access_token as string;
    h.clock.advance(100_000);
    const fresh = await gh.sign(githubClaims(), { now: now(), ttlSec: 600 });
    platformTokens.push(fresh);
    const body = { grant_type: GRANT, subject_token: fresh, subject_token_type: JWT_TYPE };
    const renewed = await h.call("POST", "/v1/sessions/exchange", { token: session, body });
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ access_token: session, expires_in: 600 });
    h.clock.advance(300_000); // past the first token's exp: the session lives on
    expect((await h.call("GET", "/v1/sessions?vault=team", { token: session })).status).toBe(200);
    // Another subject (a different branch) cannot stretch this session, nor can a Kubernetes workload.
    await exchange(await gh.sign(githubClaims(), { now: now() })); // (the binding still mints new sessions)
    const other = await gh.sign(githubClaims({ sub: "repo:org/repo:ref:refs/tags/v1", ref: "refs/tags/v1" }), { now: now() });
    const refused = await h.call("POST", "/v1/sessions/exchange", { token: session, body: { ...body, subject_token: other } });
    expect({ status: refused.status, error: refused.body.error }).toEqual({ status: 400, error: "invalid_grant" });
    const pod = await k8s.sign(kubernetesClaims(), { now: now() });
    const cross = await h.call("POST", "/v1/sessions/exchange", { token: session, body: { ...body, subject_token: pod } });
    expect(cross.body.message).toMatch(/not this workload's/);
    const dead = await h.call("POST", "/v1/sessions/exchange", { token: "av_sess_not-a-session", body: { ...body, subject_token: other } });
    expect(dead.status).toBe(401);
  });

  test("removing the binding ends its sessions; revoking its agent stops further exchanges", async () => {
    const r = await exchange(await gh.sign(githubClaims(), { now: now() }));
    expect((await h.call("DELETE", "/v1/workload-issuers/github/bindings/deploy", { token: owner })).status).toBe(204);
    expect((await h.call("GET", "/v1/sessions?vault=team", { token: r.body.access_token })).status).toBe(401);
    await expectRefused(await gh.sign(githubClaims(), { now: now() }), /no binding/);
    expect((await h.call("DELETE", "/v1/agents/wl-k8s-ci-pods", { token: owner })).status).toBe(204);
    await expectRefused(await k8s.sign(kubernetesClaims(), { now: now() }), /revoked/);
  });

  test("no platform token or session token reaches the log", async () => {
    const r = await exchange(await gh.sign(githubClaims(), { now: now() }));
    await exchange(await gh.sign(githubClaims({ aud: "nope" }), { now: now() }));
    const logs = h.logs.join("\n");
    for (const t of platformTokens) expect(logs).not.toContain(t.split(".")[2] || t.split(".")[1]!);
    expect(logs).not.toContain(r.body.access_token);
  });
});

describe("managing issuers and bindings", () => {
  test("lists say what is trusted and bound; only the owner manages them", async () => {
    const list = await h.call("GET", "/v1/workload-issuers", { token: owner });
    expect(list.body.issuers.map((i: { name: string }) => i.name)).toEqual(["github", "k8s"]);
    expect(list.body.issuers[0]).toMatchObject({ issuer: gh.url, jwks_url: null, audiences: ["https://broker.example"], clock_skew_seconds: 60 });
    const bindings = await h.call("GET", "/v1/workload-issuers/github/bindings", { token: owner });
    expect(bindings.body.bindings[0]).toMatchObject({ name: "deploy", vault: "team", role: "proxy", max_session_seconds: 900, agent: "wl-github-deploy" });
    const admin = await addUser(h, owner, "team", "admin@example.com", "admin");
    expect((await h.call("GET", "/v1/workload-issuers", { token: admin })).status).toBe(403);
    const post = await h.call("POST", "/v1/workload-issuers", { token: admin, body: { name: "x", issuer: gh.url, audiences: ["a"] } });
    expect(post.status).toBe(403);
  });

  test("bad bodies are refused naming the field", async () => {
    const http = await h.call("POST", "/v1/workload-issuers", { token: owner, body: { name: "plain", issuer: "http://127.0.0.1:1", audiences: ["a"] } });
    expect({ status: http.status, field: http.body.field }).toEqual({ status: 400, field: "issuer" });
    const noAud = await h.call("POST", "/v1/workload-issuers", { token: owner, body: { name: "noaud", issuer: gh.url, audiences: [] } });
    expect({ status: noAud.status, field: noAud.body.field }).toEqual({ status: 400, field: "audiences" });
    const empty = await h.call("POST", "/v1/workload-issuers/github/bindings", { token: owner, body: { name: "any", vault: "team", conditions: {} } });
    expect({ status: empty.status, field: empty.body.field }).toEqual({ status: 400, field: "conditions" });
    const dup = await h.call("POST", "/v1/workload-issuers", { token: owner, body: { name: "github", issuer: gh.url, audiences: ["a"] } });
    expect(dup.status).toBe(409);
    const noVault = await h.call("POST", "/v1/workload-issuers/github/bindings", {
      token: owner,
      body: { name: "x", vault: "nope", conditions: { sub: "a" } },
    });
    expect(noVault.status).toBe(404);
  });

  test("removing an issuer removes its bindings and their agents", async () => {
    expect((await h.call("DELETE", "/v1/workload-issuers/k8s", { token: owner })).status).toBe(204);
    const agents = await h.call("GET", "/v1/agents", { token: owner });
    expect(agents.body.agents.map((a: { name: string }) => a.name)).toEqual(["wl-github-deploy"]);
    expect((await h.call("GET", "/v1/workload-issuers/k8s/bindings", { token: owner })).status).toBe(404);
  });
});
