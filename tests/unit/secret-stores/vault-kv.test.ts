// The Vault / OpenBao KV v2 client against a local HTTPS stand-in written from Vault's API reference. The
// stand-in is first shown to speak the protocol to an independent client (curl, with the requests of Vault's
// own API docs), then the client is run through the broker's upstream TLS client and network guard.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compileNetPolicy, createUpstream, type Upstream } from "../../../src/egress/index.ts";
import { Secret } from "../../../src/secret.ts";
import type { StoreHttpDeps } from "../../../src/secret-stores/store-http.ts";
import { SecretStoreError } from "../../../src/secret-stores/types.ts";
import { createVaultKvClient, VAULT_TOKEN_MARGIN_MS, type VaultKvConnection } from "../../../src/secret-stores/vault-kv.ts";
import { startVaultServer, type TestVaultServer } from "../../helpers/secret-stores/vault-server.ts";

const clock = { t: Date.now() };
const now = () => clock.t;
let vault: TestVaultServer;
let upstream: Upstream;
let deps: StoreHttpDeps;

const ROOT_TOKEN = "hvs.ROOTtoken0123456789abcdef";
const LIMITED_TOKEN = "hvs.LIMITEDtoken0123456789abcd";
const NS_TOKEN = "hvs.NAMESPACEtoken0123456789ab";
const ROLE_ID = "role-id-1f2e3d4c";
const SECRET_ID = "secret-id-9a8b7c6d5e4f3a2b1c0d";
const V1 = "value-one-Zq8xPw3k";
const V2 = "value-two-Mn4vBt7y";
const MULTI_A = "multi-a-Hy6uJi9o";
const MULTI_B = "multi-b-Kl2mNb5v";
const NS_VALUE = "namespaced-Rt5yUi8o";
/** Every value, token and id a message or a printout must never contain (JWTs and issued tokens are added as made). */
const needles = [ROOT_TOKEN, LIMITED_TOKEN, NS_TOKEN, SECRET_ID, V1, V2, MULTI_A, MULTI_B, NS_VALUE];

beforeAll(async () => {
  vault = await startVaultServer({ now });
  upstream = createUpstream({ ca: [vault.pki.caPem] });
  deps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] }),
    resolver: async () => ["127.0.0.1"],
  };
  vault.put("app/db", { password: V1 });
  vault.put("app/db", { password: V2 });
  vault.put("app/multi", { a: MULTI_A, b: MULTI_B, port: 5432 });
  vault.put("app/db", { password: NS_VALUE }, { namespace: "team-a" });
  vault.put("other/thing", { v: V1 });
  vault.addToken(ROOT_TOKEN);
  vault.addToken(LIMITED_TOKEN, { allow: ["secret/data/app/"] });
  vault.addToken(NS_TOKEN, { namespace: "team-a" });
  vault.addAppRole(ROLE_ID, SECRET_ID, { ttlSeconds: 600, allow: ["secret/data/app/"] });
});

afterAll(async () => {
  upstream.close();
  await vault.close();
});

const tokenConn = (token = ROOT_TOKEN, extra: Partial<VaultKvConnection> = {}): VaultKvConnection => ({
  address: vault.address,
  auth: { kind: "token", token: new Secret(token) },
  ...extra,
});

/** The store error `p` fails with, checked to hold none of the needles. */
async function failure(p: Promise<unknown>): Promise<SecretStoreError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SecretStoreError);
  const text = `${(err as Error).message} ${Bun.inspect(err)}`;
  for (const n of [...needles, ...vault.issued]) expect(text).not.toContain(n);
  return err as SecretStoreError;
}

/** Real curl (spawned asynchronously: the stand-in answers from this same process). */
async function curl(args: string[]): Promise<{ status: number; body: Record<string, unknown> }> {
  const proc = Bun.spawn(["curl", "--silent", "--show-error", "--max-time", "20", "--cacert", vault.caFile, "--write-out", "\n%{http_code}", ...args], {
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const cut = out.lastIndexOf("\n");
  return { status: Number(out.slice(cut + 1)), body: JSON.parse(out.slice(0, cut) || "{}") as Record<string, unknown> };
}

test("the stand-in answers the API docs' curl requests (AppRole login, KV v2 read of a version) as Vault does", async () => {
  const dir = mkdtempSync(join(tmpdir(), "vault-curl-"));
  writeFileSync(join(dir, "payload.json"), JSON.stringify({ role_id: ROLE_ID, secret_id: SECRET_ID }));
  // AppRole login, as in the AppRole API docs.
  const login = await curl(["--request", "POST", "--data", `@${join(dir, "payload.json")}`, `${vault.address}/v1/auth/approle/login`]);
  expect(login.status).toBe(200);
  const auth = login.body.auth as { client_token: string; lease_duration: number; policies: string[] };
  expect(auth.client_token).toMatch(/^hvs\./);
  expect(auth.lease_duration).toBe(600);
  // Read secret version, as in the KV v2 API docs.
  const read = await curl(["--header", `X-Vault-Token: ${auth.client_token}`, `${vault.address}/v1/secret/data/app/db?version=1`]);
  expect(read.status).toBe(200);
  const data = read.body.data as { data: Record<string, string>; metadata: { version: number; destroyed: boolean; deletion_time: string } };
  expect(data.data).toEqual({ password: V1 });
  expect(data.metadata).toMatchObject({ version: 1, destroyed: false, deletion_time: "" });
  const latest = await curl(["--header", `X-Vault-Token: ${auth.client_token}`, `${vault.address}/v1/secret/data/app/db`]);
  expect((latest.body.data as { metadata: { version: number } }).metadata.version).toBe(2);
  // A namespace, by header; an unknown path; a bad token.
  const ns = await curl(["--header", `X-Vault-Token: ${NS_TOKEN}`, "--header", "X-Vault-Namespace: team-a/", `${vault.address}/v1/secret/data/app/db`]);
  expect((ns.body.data as { data: unknown }).data).toEqual({ password: NS_VALUE });
  expect(await curl(["--header", `X-Vault-Token: ${ROOT_TOKEN}`, `${vault.address}/v1/secret/data/nope`])).toEqual({ status: 404, body: { errors: [] } });
  expect((await curl(["--header", "X-Vault-Token: hvs.bogus", `${vault.address}/v1/secret/data/app/db`])).status).toBe(403);
  const refused = await curl([
    "--request",
    "POST",
    "--data",
    JSON.stringify({ role_id: ROLE_ID, secret_id: "wrong" }),
    `${vault.address}/v1/auth/approle/login`,
  ]);
  expect(refused.status).toBe(400);
});

test("token auth reads the latest version, a given version and a field, and says which version it read", async () => {
  const client = createVaultKvClient(deps, tokenConn(), { now });
  const latest = await client.read({ path: "app/db" });
  expect(latest.value.reveal()).toBe(V2);
  expect(latest.version).toBe("2");
  const first = await client.read({ path: "app/db", version: "1" });
  expect(first.value.reveal()).toBe(V1);
  expect(first.version).toBe("1");
  const field = await client.read({ path: "app/multi", field: "b" });
  expect(field.value.reveal()).toBe(MULTI_B);
  expect((await client.read({ path: "app/multi", field: "port" })).value.reveal()).toBe("5432");
  const seen = vault.requests.at(-3)!;
  expect(seen.url).toBe("/v1/secret/data/app/db?version=1");
  expect(seen.headers["x-vault-token"]).toBe(ROOT_TOKEN);
  expect(seen.headers["x-vault-namespace"]).toBeUndefined();
  // Printing a result never shows the value.
  for (const r of [latest, first, field]) {
    const printed = `${Bun.inspect(r)} ${JSON.stringify(r)} ${String(r.value)}`;
    expect(printed).toContain("[redacted]");
    for (const n of needles) expect(printed).not.toContain(n);
  }
  expect(client.sentValues().map((s) => s.reveal())).toEqual([ROOT_TOKEN]);
});

test("without a field a secret must hold exactly one key; the error counts the keys and names no value", async () => {
  const client = createVaultKvClient(deps, tokenConn(), { now });
  const err = await failure(client.read({ path: "app/multi" }));
  expect(err.kind).toBe("invalid");
  expect(err.message).toContain("3 keys");
  expect(err.message).toContain("app/multi");
  const missing = await failure(client.read({ path: "app/multi", field: "nope" }));
  expect(missing.kind).toBe("not_found");
  const badVersion = await failure(client.read({ path: "app/db", version: "latest" }));
  expect(badVersion.kind).toBe("invalid");
  const badPath = await failure(client.read({ path: "../sys/seal" }));
  expect(badPath.kind).toBe("invalid");
});

test("a namespace is sent as X-Vault-Namespace on reads and logins", async () => {
  const client = createVaultKvClient(deps, tokenConn(NS_TOKEN, { namespace: "team-a" }), { now });
  expect((await client.read({ path: "app/db" })).value.reveal()).toBe(NS_VALUE);
  expect(vault.requests.at(-1)!.headers["x-vault-namespace"]).toBe("team-a");
  // The same token without its namespace is refused.
  expect((await failure(createVaultKvClient(deps, tokenConn(NS_TOKEN), { now }).read({ path: "app/db" }))).kind).toBe("denied");

  vault.addAppRole("ns-role", "ns-secret-id-77aa88bb", { namespace: "team-a" });
  needles.push("ns-secret-id-77aa88bb");
  const approle = createVaultKvClient(
    deps,
    { address: vault.address, namespace: "team-a", auth: { kind: "approle", roleId: new Secret("ns-role"), secretId: new Secret("ns-secret-id-77aa88bb") } },
    { now },
  );
  expect((await approle.read({ path: "app/db" })).value.reveal()).toBe(NS_VALUE);
  const login = vault.requests.at(-2)!;
  expect(login.url).toBe("/v1/auth/approle/login");
  expect(login.headers["x-vault-namespace"]).toBe("team-a");
});

test("AppRole: one login serves reads until shortly before the lease ends, then it logs in again", async () => {
  const client = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret(SECRET_ID) } },
    { now },
  );
  const logins = vault.counts.logins;
  await Promise.all([client.read({ path: "app/db" }), client.read({ path: "app/db", version: "1" })]);
  await client.read({ path: "app/multi", field: "a" });
  expect(vault.counts.logins - logins).toBe(1);
  const login = vault.requests.find((r) => r.url === "/v1/auth/approle/login" && r.body.includes(ROLE_ID))!;
  expect(login.method).toBe("POST");
  expect(JSON.parse(login.body)).toEqual({ role_id: ROLE_ID, secret_id: SECRET_ID });
  const first = vault.issued.at(-1)!;
  expect(vault.requests.at(-1)!.headers["x-vault-token"]).toBe(first);
  expect(client.sentValues().map((s) => s.reveal())).toEqual([first, SECRET_ID]);

  clock.t += 600_000 - VAULT_TOKEN_MARGIN_MS - 1_000; // still inside the lease, before the margin
  await client.read({ path: "app/db" });
  expect(vault.counts.logins - logins).toBe(1);
  clock.t += 2_000; // inside the margin: replaced before the server would refuse it
  await client.read({ path: "app/db" });
  expect(vault.counts.logins - logins).toBe(2);
  const second = vault.issued.at(-1)!;
  expect(second).not.toBe(first);
  expect(vault.requests.at(-1)!.headers["x-vault-token"]).toBe(second);
  expect(client.sentValues().map((s) => s.reveal())).toEqual([second, SECRET_ID]);
});

test("AppRole: a 403 on a read logs in again once and retries; a second 403 is denied", async () => {
  const client = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret(SECRET_ID) } },
    { now },
  );
  await client.read({ path: "app/db" });
  const logins = vault.counts.logins;
  vault.revoke(vault.issued.at(-1)!);
  expect((await client.read({ path: "app/db" })).value.reveal()).toBe(V2);
  expect(vault.counts.logins - logins).toBe(1);
  // A path outside the login token's policy: one re-login, one retry, then denied (no loop).
  const reads = vault.counts.reads;
  const err = await failure(client.read({ path: "other/thing" }));
  expect(err.kind).toBe("denied");
  expect(err.status).toBe(403);
  expect(vault.counts.logins - logins).toBe(2);
  expect(vault.counts.reads - reads).toBe(2);
  // A client whose first read logs in and is refused does not log in again for it.
  const fresh = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret(SECRET_ID) } },
    { now },
  );
  const [loginsNow, readsNow] = [vault.counts.logins, vault.counts.reads];
  expect((await failure(fresh.read({ path: "other/thing" }))).kind).toBe("denied");
  expect([vault.counts.logins - loginsNow, vault.counts.reads - readsNow]).toEqual([1, 1]);
  // A refused login (wrong secret id) is denied, and its error holds neither id.
  const wrong = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret("wrong-secret-id-55cc66dd") } },
    { now },
  );
  needles.push("wrong-secret-id-55cc66dd");
  const refused = await failure(wrong.read({ path: "app/db" }));
  expect(refused.kind).toBe("denied");
  expect(refused.message).not.toContain(ROLE_ID);
  expect(wrong.sentValues().map((s) => s.reveal())).toEqual(["wrong-secret-id-55cc66dd"]);
});

test("JWT and Kubernetes logins send role and JWT, re-reading the token file on each login", async () => {
  vault.addJwtRole("jwt", "ci", { audience: "vault", subject: "ci-runner", ttlSeconds: 120 });
  vault.addJwtRole("kubernetes", "app", { audience: "vault", subject: "system:serviceaccount:default:app", ttlSeconds: 120 });
  const jwt1 = await vault.signJwt({ sub: "ci-runner", aud: "vault" });
  clock.t += 1_000;
  const jwt2 = await vault.signJwt({ sub: "ci-runner", aud: "vault" });
  expect(jwt2).not.toBe(jwt1);
  needles.push(jwt1, jwt2);
  const files: Record<string, string> = { "/var/run/token": `${jwt1}\n` };
  const readFile = (p: string) => {
    const v = files[p];
    if (v === undefined) throw new Error(`ENOENT ${p}`);
    return v;
  };
  const client = createVaultKvClient(deps, { address: vault.address, auth: { kind: "jwt", role: "ci", tokenFile: "/var/run/token" } }, { now, readFile });
  expect((await client.read({ path: "app/db" })).value.reveal()).toBe(V2);
  const login1 = vault.requests.findLast((r) => r.url === "/v1/auth/jwt/login")!;
  expect(JSON.parse(login1.body)).toEqual({ role: "ci", jwt: jwt1 });
  expect(client.sentValues().map((s) => s.reveal())).toEqual([vault.issued.at(-1)!, jwt1]);

  files["/var/run/token"] = jwt2; // the platform rotated the file
  clock.t += 120_000; // the 2-minute token has expired
  expect((await client.read({ path: "app/db", version: "1" })).value.reveal()).toBe(V1);
  const login2 = vault.requests.findLast((r) => r.url === "/v1/auth/jwt/login")!;
  expect(JSON.parse(login2.body)).toEqual({ role: "ci", jwt: jwt2 });
  expect(client.sentValues().map((s) => s.reveal())).toEqual([vault.issued.at(-1)!, jwt2]);

  // Kubernetes: the same body at /v1/auth/kubernetes/login.
  const sa = await vault.signJwt({ sub: "system:serviceaccount:default:app", aud: "vault" });
  needles.push(sa);
  files["/sa/token"] = sa;
  const k8s = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "jwt", role: "app", tokenFile: "/sa/token", mount: "kubernetes" } },
    { now, readFile },
  );
  expect((await k8s.read({ path: "app/multi", field: "a" })).value.reveal()).toBe(MULTI_A);
  expect(JSON.parse(vault.requests.findLast((r) => r.url === "/v1/auth/kubernetes/login")!.body)).toEqual({ role: "app", jwt: sa });

  // A JWT signed by another key is refused (the stand-in checks signatures), and the error holds no JWT.
  const forged = `${sa.split(".").slice(0, 2).join(".")}.${Buffer.from("x".repeat(64)).toString("base64url")}`;
  needles.push(forged);
  files["/sa/forged"] = forged;
  const bad = createVaultKvClient(
    deps,
    { address: vault.address, auth: { kind: "jwt", role: "app", tokenFile: "/sa/forged", mount: "kubernetes" } },
    { now, readFile },
  );
  expect((await failure(bad.read({ path: "app/db" }))).kind).toBe("denied");
  expect(bad.sentValues().map((s) => s.reveal())).toEqual([forged]);
  // An unreadable token file is named by path only.
  const none = createVaultKvClient(deps, { address: vault.address, auth: { kind: "jwt", role: "ci", tokenFile: "/missing" } }, { now, readFile });
  const noFile = await failure(none.read({ path: "app/db" }));
  expect(noFile.kind).toBe("invalid");
  expect(noFile.message).toContain("/missing");
});

test("statuses map to kinds: 404 not_found, 403 denied, 5xx and unreachable, malformed invalid", async () => {
  const client = createVaultKvClient(deps, tokenConn(), { now });
  const notFound = await failure(client.read({ path: "app/none" }));
  expect([notFound.kind, notFound.status]).toEqual(["not_found", 404]);
  expect((await failure(client.read({ path: "app/db", version: "9" }))).kind).toBe("not_found");
  vault.put("app/gone", { v: "gone-value-Qa1Ws2Ed" });
  needles.push("gone-value-Qa1Ws2Ed");
  vault.deleteVersion("app/gone", 1);
  expect((await failure(client.read({ path: "app/gone" }))).kind).toBe("not_found");

  const limited = createVaultKvClient(deps, tokenConn(LIMITED_TOKEN), { now });
  expect((await limited.read({ path: "app/db" })).value.reveal()).toBe(V2);
  const denied = await failure(limited.read({ path: "other/thing" }));
  expect([denied.kind, denied.status]).toEqual(["denied", 403]);
  const badToken = await failure(createVaultKvClient(deps, tokenConn("hvs.not-a-token-4455"), { now }).read({ path: "app/db" }));
  expect(badToken.kind).toBe("denied");

  vault.answerNext({ status: 503, body: JSON.stringify({ errors: ["Vault is sealed"] }) });
  const sealed = await failure(client.read({ path: "app/db" }));
  expect([sealed.kind, sealed.status]).toEqual(["unreachable", 503]);
  vault.answerNext({ status: 200, body: "<html>not json</html>" });
  expect((await failure(client.read({ path: "app/db" }))).kind).toBe("invalid");
  vault.answerNext({ status: 200, body: JSON.stringify({ data: { data: { password: V1 } } }) }); // no metadata.version
  expect((await failure(client.read({ path: "app/db" }))).kind).toBe("invalid");
  vault.answerNext({ status: 400, body: JSON.stringify({ errors: [`bad request echoing ${ROOT_TOKEN}`] }) });
  expect((await failure(client.read({ path: "app/db" }))).kind).toBe("invalid");

  await vault.stop();
  try {
    const down = await failure(client.read({ path: "app/db" }));
    expect(down.kind).toBe("unreachable");
    expect(down.message).toContain(`127.0.0.1:${vault.port}`);
    const approle = createVaultKvClient(
      deps,
      { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret(SECRET_ID) } },
      { now },
    );
    expect((await failure(approle.read({ path: "app/db" }))).kind).toBe("unreachable");
  } finally {
    await vault.start();
  }
  expect((await client.read({ path: "app/db" })).value.reveal()).toBe(V2);
});

test("the network guard refuses a store address it does not allow, before anything is sent", async () => {
  // A broker of its own: the guard judges addresses when a connection is made, and the shared upstream's pool
  // already holds checked keep-alive connections to the stand-in.
  const fresh = createUpstream({ ca: [vault.pki.caPem] });
  const blocked: StoreHttpDeps = { ...deps, upstream: fresh, policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [] }) };
  const requests = vault.requests.length;
  const err = await failure(createVaultKvClient(blocked, tokenConn(), { now }).read({ path: "app/db" }));
  expect(err.kind).toBe("invalid");
  expect(err.message).toContain("network guard");
  const login = await failure(
    createVaultKvClient(
      blocked,
      { address: vault.address, auth: { kind: "approle", roleId: new Secret(ROLE_ID), secretId: new Secret(SECRET_ID) } },
      { now },
    ).read({
      path: "app/db",
    }),
  );
  expect(login.message).toContain("network guard");
  expect(vault.requests.length).toBe(requests);
  fresh.close();
  expect(() => createVaultKvClient(deps, tokenConn(ROOT_TOKEN, { namespace: "a\r\nX-Evil: 1" }))).toThrow(SecretStoreError);
  // And a plain-http address is not used at all.
  expect(() => createVaultKvClient(deps, { address: `http://127.0.0.1:${vault.port}`, auth: { kind: "token", token: new Secret(ROOT_TOKEN) } })).toThrow(
    SecretStoreError,
  );
});
