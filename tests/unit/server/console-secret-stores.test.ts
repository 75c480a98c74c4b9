// The console's secret store pages through app.request(): the owner's /settings/secret-stores (refused to
// everyone else, agents included), adding a connection of each kind with its secrets in password fields
// never rendered back (not even after a refusal), editing settings and sign-in as PATCH does, sharing,
// removal refused while referenced, Check now; a vault's own connections added by its admin; credentials
// by reference on the Credentials page (no Reveal for them); proposals answered with a reference on the
// console and on /approve. A stand-in for the stores' runtime says how each read went.

import { beforeEach, describe, expect, test } from "bun:test";
import type { ReferenceStatus, SecretStoreRuntime } from "../../../src/identity/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import { formatReference, type SecretReference } from "../../../src/policy/index.ts";
import { createBrowser, createPageBrowser, type PageBrowser, SAME_ORIGIN, setUpOwnerConsole, signIn } from "./console-fixtures.ts";
import { addAgent, addUser, createVault, type Harness, sentinel, setCredential } from "./fixtures.ts";

let h: Harness;
let b: PageBrowser;
let owner: string;
let reads: { vaultId: number; text: string }[];

/** The stores' runtime, played: a path under `missing/` is refused by its store, any other reads as version 7. */
function playStores(harness: Harness) {
  const statuses = new Map<string, ReferenceStatus>();
  const keyOf = (vaultId: number, r: SecretReference) => `${vaultId}|${formatReference(r)}`;
  const runtime: SecretStoreRuntime = {
    status: (vaultId, r) => statuses.get(keyOf(vaultId, r)) ?? {},
    readNow: async (vaultId, r) => {
      reads.push({ vaultId, text: formatReference(r) });
      const now = harness.clock.now();
      statuses.set(
        keyOf(vaultId, r),
        r.path.startsWith("missing/") ? { lastError: `the store has no secret at ${r.path}` } : { lastRefresh: now, version: r.version ?? "7" },
      );
    },
    connectionChanged() {},
  };
  (harness.domain as { secretStores?: SecretStoreRuntime }).secretStores = runtime;
}

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
  reads = [];
  playStores(h);
});

const VAULT_ADDRESS = "https://vault.example.com:8200";

/** An owner's Vault connection made through the API. */
async function apiConnection(name: string, extra: Record<string, unknown> = {}, token = owner) {
  const res = await h.call("POST", "/v1/secret-stores", {
    token,
    body: { name, kind: "vault", address: VAULT_ADDRESS, auth: { method: "token", token: sentinel("vault-token") }, ...extra },
  });
  expect(res.status).toBe(201);
  return res.body;
}
const connection = async (name: string) => (await h.call("GET", `/v1/secret-stores/${name}`, { token: owner })).body;
const credentials = async (vault = "v1") => (await h.call("GET", `/v1/vaults/${vault}/credentials`, { token: owner })).body.credentials;

/** Every page `browser` received and every log line holds none of `needles`. */
function expectNowhere(browsers: PageBrowser[], needles: string[]) {
  for (const br of browsers) {
    for (const p of br.pages)
      for (const n of needles) expect({ page: `${p.method} ${p.path}`, leaked: p.html.includes(n) }).toEqual({ page: `${p.method} ${p.path}`, leaked: false });
    for (const line of br.logs) for (const n of needles) expect(line.includes(n)).toBe(false);
  }
  for (const line of h.logs) for (const n of needles) expect(line.includes(n)).toBe(false);
}

describe("the owner's secret stores page", () => {
  test("only the owner reaches it: a member gets 403 and cannot post, an agent's token signs no browser in, the nav shows it to the owner only", async () => {
    await addUser(h, owner, "v1", "admin@example.com", "admin");
    const admin = await signIn(h, "admin@example.com");
    expect((await admin.get("/settings/secret-stores")).status).toBe(403);
    expect((await admin.get("/")).text).not.toContain('href="/settings/secret-stores"');
    await apiConnection("prod");
    for (const path of ["/settings/secret-stores", "/settings/secret-stores/prod"]) expect((await admin.get(path)).status).toBe(403);
    const token = sentinel("member-token");
    const posted = await admin.post("/settings/secret-stores?kind=vault&method=token", { name: "mine", address: VAULT_ADDRESS, auth_token: token });
    expect(posted.status).toBe(403);
    expect(posted.text).not.toContain(token);
    for (const [path, form] of [
      ["/settings/secret-stores/prod/settings", { address: "https://evil.example.com" }],
      ["/settings/secret-stores/prod/share", { vault: "v1" }],
      ["/settings/secret-stores/prod/delete", { confirm: "prod" }],
    ] as const)
      expect((await admin.post(path, form)).status).toBe(403);
    expect((await connection("prod")).settings.address).toBe(VAULT_ADDRESS);
    expect((await connection("prod")).shared_with).toEqual([]);

    // An agent's token in the session cookie is no signed-in person: the page sends it to sign in, and a post changes nothing.
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const asAgent = createBrowser(createApi({ domain: h.domain, log: createMemoryLogger() }), { session: agent.token });
    const agentPage = await asAgent.get("/settings/secret-stores");
    expect(agentPage.status).toBe(303);
    expect(agentPage.location).toBe("/");
    await asAgent.get("/");
    const agentPost = await asAgent.post("/settings/secret-stores?kind=vault&method=token", { name: "agents", address: VAULT_ADDRESS, auth_token: "t" });
    expect(agentPost.status).toBe(303);
    expect(agentPost.location).toBe("/");
    expect((await h.call("GET", "/v1/secret-stores/agents", { token: owner })).status).toBe(404);
    expect((await h.call("GET", "/v1/secret-stores", { token: agent.token, headers: agent.headers })).status).toBe(403);

    const home = await b.get("/");
    expect(home.text).toContain('href="/settings/secret-stores"');
    expect((await b.get("/settings/secret-stores")).status).toBe(200);
  });

  test("add a Vault connection: the kind, then its fields; the token is a password field and never comes back", async () => {
    const empty = await b.get("/settings/secret-stores");
    expect(empty.text).toContain("No connections yet");
    for (const kind of ["vault", "aws", "google", "azure"]) expect(empty.text).toContain(`id="kind-${kind}"`);

    const form = await b.get("/settings/secret-stores?kind=vault");
    expect(form.text).toContain('id="add-store"');
    expect(form.text).toMatch(/<input[^>]*name="auth_token"[^>]*type="password"|<input[^>]*type="password"[^>]*name="auth_token"/);
    expect(form.text).toContain('name="ca_pem"');
    for (const m of ["token", "approle", "jwt", "kubernetes"]) expect(form.text).toContain(`id="add-method-${m}"`);

    // Refused: the address is not https. The flash names the field by its label; the token field is empty again.
    const token = sentinel("token");
    const refused = await b.post("/settings/secret-stores?kind=vault&method=token", {
      name: "prod",
      address: "http://vault.example.com",
      namespace: "team-a",
      auth_token: token,
    });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain("Address must be an https:// URL");
    expect(refused.text).toContain('value="prod"');
    expect(refused.text).toContain('value="team-a"');
    expect(refused.text).toContain('aria-invalid="true"');
    expect(refused.text).not.toContain(token);
    expect((await h.call("GET", "/v1/secret-stores", { token: owner })).body.connections).toEqual([]);

    // A missing secret is named too.
    const noToken = await b.post("/settings/secret-stores?kind=vault&method=token", { name: "prod", address: VAULT_ADDRESS, auth_token: "" });
    expect(noToken.status).toBe(400);
    expect(noToken.text).toContain("Token must be the Vault token");

    const added = await b.submit("/settings/secret-stores?kind=vault&method=token", {
      name: "prod",
      address: VAULT_ADDRESS,
      namespace: "team-a",
      mount: "",
      auth_token: token,
      refresh_seconds: "60",
      grace_seconds: "0",
    });
    expect(added.location).toBe("/settings/secret-stores/prod");
    expect(added.text).toContain("Connection prod added.");
    expect(added.text).toContain("HashiCorp Vault / OpenBao");
    expect(added.text).toContain(VAULT_ADDRESS);
    expect(added.text).toContain("every 1 minute");
    expect(added.text).toContain("none (fails closed)");
    const view = await connection("prod");
    expect(view).toMatchObject({
      kind: "vault",
      vault: null,
      settings: { address: VAULT_ADDRESS, namespace: "team-a" },
      auth: { method: "token" },
      refresh_seconds: 60,
      grace_seconds: 0,
    });

    // Its name is taken now: 409, shown on the form.
    const again = await b.post("/settings/secret-stores?kind=vault&method=token", { name: "prod", address: VAULT_ADDRESS, auth_token: sentinel("t2") });
    expect(again.status).toBe(409);
    expect(again.text).toContain("already exists");

    const list = await b.get("/settings/secret-stores");
    expect(list.text).toContain('id="store-prod"');
    expect(list.text).toContain("no vault yet");
    expectNowhere([b], [token]);
  });

  test("the other kinds: AWS by keys or the environment, Google by a key file, Azure by client credentials", async () => {
    const secretKey = sentinel("aws-secret");
    const aws = await b.submit("/settings/secret-stores?kind=aws&method=keys", {
      name: "aws-main",
      region: "eu-west-1",
      auth_access_key_id: "AKIAEXAMPLE",
      auth_secret_access_key: secretKey,
    });
    expect(aws.text).toContain("Connection aws-main added.");
    expect((await connection("aws-main")).auth).toEqual({ method: "keys" });
    const env = await b.submit("/settings/secret-stores?kind=aws&method=environment", { name: "aws-env", region: "us-east-1" });
    expect(env.text).toContain("Connection aws-env added.");

    const badKey = sentinel("not-json");
    const google = await b.post("/settings/secret-stores?kind=google&method=service_account_key", { name: "gcp", project: "my-project-123", auth_key: badKey });
    expect(google.status).toBe(400);
    expect(google.text).toContain("Key file (JSON) must be a service-account key file");
    expect(google.text).not.toContain(badKey);

    const clientSecret = sentinel("azure-secret");
    const azure = await b.submit("/settings/secret-stores?kind=azure&method=client_credentials", {
      name: "kv",
      vault_url: "https://my-vault.vault.azure.net",
      auth_tenant: "contoso.onmicrosoft.com",
      auth_client_id: "app-1",
      auth_client_secret: clientSecret,
    });
    expect(azure.text).toContain("Connection kv added.");
    expect(azure.text).toContain("contoso.onmicrosoft.com");
    const list = await b.get("/settings/secret-stores");
    for (const text of ["aws-main", "aws-env", "kv", "eu-west-1", "https://my-vault.vault.azure.net", "AWS Secrets Manager", "Azure Key Vault"])
      expect(list.text).toContain(text);
    expectNowhere([b], [secretKey, badKey, clientSecret]);
  });

  test("one form changes settings and sign-in as PATCH does: secrets left empty are kept, a new place needs them again", async () => {
    await apiConnection("prod", { namespace: "team-a", refresh_seconds: 120 });
    const detail = await b.get("/settings/secret-stores/prod");
    expect(detail.text).toContain('id="store-settings"');
    expect(detail.text).toContain('value="team-a"');
    expect(detail.text).toContain('value="120"');
    expect(detail.text).toContain("Empty keeps the current one.");
    expect(detail.text).not.toMatch(/name="auth_token"[^>]*required/);

    // Where the store is reached stays; the mount and the timing change; the token is kept.
    const settings = { address: VAULT_ADDRESS, namespace: "team-a", mount: "kv", ca_pem: "", auth_token: "" };
    const saved = await b.submit("/settings/secret-stores/prod/settings?method=token", { ...settings, refresh_seconds: "30", grace_seconds: "600" });
    expect(saved.text).toContain("Saved: the changes to prod.");
    let view = await connection("prod");
    expect(view.settings).toEqual({ address: VAULT_ADDRESS, namespace: "team-a", mount: "kv" });
    expect(view.auth).toEqual({ method: "token" });
    expect([view.refresh_seconds, view.grace_seconds]).toEqual([30, 600]);

    const bad = await b.post("/settings/secret-stores/prod/settings?method=token", { ...settings, refresh_seconds: "5" });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Refresh every (seconds) must be 10 to 86400");
    expect(bad.text).toContain('value="5"');
    expect((await connection("prod")).refresh_seconds).toBe(30);

    // A new place (the namespace emptied) without the token again: refused, as PATCH refuses it.
    const moved = await b.post("/settings/secret-stores/prod/settings?method=token", { ...settings, namespace: "" });
    expect(moved.status).toBe(400);
    expect(moved.text).toContain("Sign-in: changing namespace needs the auth again");
    const token = sentinel("new-token");
    const movedWithToken = await b.submit("/settings/secret-stores/prod/settings?method=token", { ...settings, namespace: "", auth_token: token });
    expect(movedWithToken.text).toContain("Saved: the changes to prod.");
    expect((await connection("prod")).settings).toEqual({ address: VAULT_ADDRESS, mount: "kv" });

    // Another method: its secrets are all required, and a refusal keeps only what is not secret.
    const approlePage = await b.get("/settings/secret-stores/prod?method=approle");
    expect(approlePage.text).toContain('name="auth_role_id"');
    expect(approlePage.text).toContain('action="/settings/secret-stores/prod/settings?method=approle"');
    expect(approlePage.text).toMatch(/name="auth_secret_id"[^>]*required/);
    const roleId = sentinel("role-id");
    const approle = { address: VAULT_ADDRESS, mount: "kv", auth_role_id: roleId, auth_mount: "approle-team" };
    const missing = await b.post("/settings/secret-stores/prod/settings?method=approle", { ...approle, auth_secret_id: "" });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain("Secret id must be the AppRole secret id");
    expect(missing.text).toContain('value="approle-team"');
    expect(missing.text).not.toContain(roleId);
    expect((await connection("prod")).auth).toEqual({ method: "token" });

    const secretId = sentinel("secret-id");
    const replaced = await b.submit("/settings/secret-stores/prod/settings?method=approle", { ...approle, auth_secret_id: secretId });
    expect(replaced.text).toContain("Saved: the changes to prod.");
    view = await connection("prod");
    expect(view.auth).toEqual({ method: "approle", mount: "approle-team" });
    expect(view.settings).toEqual({ address: VAULT_ADDRESS, mount: "kv" });

    // JWT reads only a token file the operator listed; the page offers those.
    const unlisted = await b.post("/settings/secret-stores/prod/settings?method=jwt", {
      address: VAULT_ADDRESS,
      mount: "kv",
      auth_role: "broker",
      auth_token_file: "/etc/shadow",
    });
    expect(unlisted.status).toBe(400);
    expect(unlisted.text).toContain("BROKER_SECRET_STORE_TOKEN_FILES");
    (h.domain as { secretStoreTokenFiles?: readonly string[] }).secretStoreTokenFiles = ["/run/token", "/run/other"];
    const jwtPage = await b.get("/settings/secret-stores/prod?method=jwt");
    expect(jwtPage.text).toContain('<option value="/run/token">');
    const jwt = await b.submit("/settings/secret-stores/prod/settings?method=jwt", {
      address: VAULT_ADDRESS,
      mount: "kv",
      auth_role: "broker",
      auth_token_file: "/run/token",
    });
    expect(jwt.text).toContain("Saved: the changes to prod.");
    expect((await connection("prod")).auth).toEqual({ method: "jwt", role: "broker", token_file: "/run/token" });
    // The non-secret fields of the current sign-in are shown for editing.
    const now = await b.get("/settings/secret-stores/prod");
    expect(now.text).toContain('value="broker"');
    expect(now.text).toContain('<option value="/run/token" selected="">');
    expectNowhere([b], [roleId, secretId, token]);
  });

  test("share with a vault, references listed with how they read, Check now, removal refused while referenced", async () => {
    await createVault(h, owner, "v2");
    await apiConnection("prod");
    const shared = await b.submit("/settings/secret-stores/prod/share", { vault: "v1" });
    expect(shared.text).toContain("Shared: credentials of v1 may now read through prod.");
    expect((await connection("prod")).shared_with).toEqual(["v1"]);
    expect(shared.text).toContain('<option value="v2">v2</option>');
    expect(shared.text).toContain('<option value="v1">v1 (shared: replace its paths)</option>');
    expect(shared.text).toContain("every path");

    // Shared with v2 for some paths only: a reference elsewhere is refused, one inside them is taken.
    const some = await b.submit("/settings/secret-stores/prod/share", { vault: "v2", paths: "team-b/\r\n\r\n shared/ " });
    expect(some.text).toContain("Shared: credentials of v2 may now read through prod, at paths starting with team-b/, shared/.");
    expect(some.text).toMatch(/<code class="name">v2<\/code> <span class="small">paths starting with <code>team-b\/<\/code>, <code>shared\/<\/code>/);
    expect((await connection("prod")).share_paths).toEqual({ v1: null, v2: ["team-b/", "shared/"] });
    expect((await b.get("/vaults/v2/credentials")).text).toContain("prod (Vault; paths team-b/, shared/)");
    const outside = await h.call("PUT", "/v1/vaults/v2/credentials/OUT", { token: owner, body: { ref: "prod:app/db#password" } });
    expect(outside.status).toBe(400);
    expect((await h.call("PUT", "/v1/vaults/v2/credentials/IN", { token: owner, body: { ref: "prod:team-b/db" } })).status).toBe(200);
    const badPaths = await b.submit("/settings/secret-stores/prod/share", { vault: "v2", paths: "has space" });
    expect(badPaths.text).toContain("must be a path prefix");
    expect((await h.call("DELETE", "/v1/vaults/v2/credentials/IN", { token: owner })).status).toBe(204);
    expect((await b.submit("/settings/secret-stores/prod/unshare", { vault: "v2" })).text).toContain("Stopped sharing with v2.");

    const set = await h.call("PUT", "/v1/vaults/v1/credentials/DB_PASSWORD", { token: owner, body: { ref: "prod:app/db#password" } });
    expect(set.status).toBe(200);
    await h.call("PUT", "/v1/vaults/v1/credentials/GONE", { token: owner, body: { ref: "prod:missing/thing", version: "2" } });

    const detail = await b.get("/settings/secret-stores/prod");
    expect(detail.text).toContain("DB_PASSWORD");
    expect(detail.text).toContain("prod:app/db#password");
    expect(detail.text).toContain("prod:missing/thing (version 2)");
    expect(detail.text).toContain("the store has no secret at missing/thing");
    expect(detail.text).toMatch(/<time datetime="[^"]+">/);

    reads.length = 0;
    const checked = await b.submit("/settings/secret-stores/prod/check", {});
    expect(reads.map((r) => r.text).sort()).toEqual(["prod:app/db#password", "prod:missing/thing (version 2)"]);
    expect(checked.text).toContain("Checked prod: 1 of 2 failed. v1/GONE: the store has no secret at missing/thing");

    const unshare = await b.submit("/settings/secret-stores/prod/unshare", { vault: "v1" });
    expect(unshare.text).toContain("Credentials of v1 still refer to prod");
    expect((await connection("prod")).shared_with).toEqual(["v1"]);

    const unconfirmed = await b.submit("/settings/secret-stores/prod/delete", { confirm: "nope" });
    expect(unconfirmed.text).toContain("Type prod exactly to confirm");
    const refused = await b.submit("/settings/secret-stores/prod/delete", { confirm: "prod" });
    expect(refused.text).toContain("Credentials still refer to prod: v1/DB_PASSWORD, v1/GONE");
    expect((await connection("prod")).name).toBe("prod");

    for (const key of ["DB_PASSWORD", "GONE"]) expect((await h.call("DELETE", `/v1/vaults/v1/credentials/${key}`, { token: owner })).status).toBe(204);
    expect((await b.submit("/settings/secret-stores/prod/unshare", { vault: "v1" })).text).toContain("Stopped sharing with v1.");
    const removed = await b.submit("/settings/secret-stores/prod/delete", { confirm: "prod" });
    expect(removed.text).toContain("Connection prod removed.");
    expect((await h.call("GET", "/v1/secret-stores/prod", { token: owner })).status).toBe(404);
  });

  test("a cross-site post changes nothing", async () => {
    await apiConnection("prod");
    await b.get("/settings/secret-stores");
    const res = await b.post("/settings/secret-stores/prod/delete", { confirm: "prod" }, { origin: "https://evil.example", "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    expect((await connection("prod")).name).toBe("prod");
  });
});

describe("a vault's secret stores", () => {
  test("its admin sees the connections it may use on Settings and adds its own; a member only looks; nobody else's shows", async () => {
    await createVault(h, owner, "v2");
    await apiConnection("shared");
    await apiConnection("other");
    expect((await h.call("PUT", "/v1/secret-stores/shared/vaults/v1", { token: owner })).status).toBe(200);
    expect((await h.call("PUT", "/v1/secret-stores/other/vaults/v2", { token: owner })).status).toBe(200);
    await addUser(h, owner, "v1", "admin@example.com", "admin");
    const member = await addUser(h, owner, "v1", "member@example.com", "member");
    const admin = await signIn(h, "admin@example.com");

    const settings = await admin.get("/vaults/v1/settings");
    expect(settings.text).toContain('id="secret-stores-section"');
    expect(settings.text).toContain('id="store-shared"');
    expect(settings.text).not.toContain('id="store-other"');
    expect(settings.text).toContain("shared by the owner");
    expect(settings.text).toContain("Add a connection for this vault");

    const token = sentinel("own-token");
    const added = await admin.submit("/vaults/v1/settings/secret-stores?kind=vault&method=token", {
      name: "team-vault",
      address: VAULT_ADDRESS,
      auth_token: token,
    });
    expect(added.location).toBe("/vaults/v1/settings/secret-stores/team-vault");
    expect(added.text).toContain("Connection team-vault added.");
    expect((await connection("team-vault")).vault).toBe("v1");
    expect(added.text).toContain('id="store-settings"');

    // The owner's shared connection: shown, not managed here.
    const sharedPage = await admin.get("/vaults/v1/settings/secret-stores/shared");
    expect(sharedPage.status).toBe(200);
    expect(sharedPage.text).toContain("The instance owner manages this connection");
    expect(sharedPage.text).not.toContain('id="store-settings"');
    expect((await admin.post("/vaults/v1/settings/secret-stores/shared/settings", { address: "https://evil.example.com" })).status).toBe(403);
    expect((await connection("shared")).settings.address).toBe(VAULT_ADDRESS);
    expect((await admin.get("/vaults/v1/settings/secret-stores/other")).status).toBe(404);
    expect((await admin.get("/settings/secret-stores")).status).toBe(403);

    // Check now is for those who manage the connection: the vault's own, not the owner's.
    expect(sharedPage.text).not.toContain('id="check-now"');
    expect((await admin.submit("/vaults/v1/settings/secret-stores/shared/check", {})).text).toContain("Only the instance owner manages");
    expect((await admin.submit("/vaults/v1/settings/secret-stores/team-vault/check", {})).text).toContain("Nothing to check");

    // A vault's own connection never signs in as the broker itself: those methods are not offered, and refused.
    const picker = await admin.get("/vaults/v1/settings/secret-stores");
    expect(picker.text).toContain("Sign in by token, approle</span>");
    expect(picker.text).not.toContain("environment");
    const awsForm = await admin.get("/vaults/v1/settings/secret-stores?kind=aws&method=environment");
    expect(awsForm.text).toContain("Sign-in: Access key");
    const asBroker = await admin.post("/vaults/v1/settings/secret-stores?kind=aws&method=environment", { name: "borrowed", region: "eu-west-1" });
    expect(asBroker.status).toBe(403);
    expect(asBroker.text).toContain("signs in as the broker itself");

    const m = await signIn(h, "member@example.com");
    const mSettings = await m.get("/vaults/v1/settings");
    expect(mSettings.text).toContain('id="store-team-vault"');
    expect(mSettings.text).not.toContain("Add a connection for this vault");
    const mList = await m.get("/vaults/v1/settings/secret-stores");
    expect(mList.text).not.toContain('id="add-store"');
    expect(mList.text).not.toContain('id="kind-picker"');
    const mAdd = await m.post("/vaults/v1/settings/secret-stores?kind=vault&method=token", { name: "sneaky", address: VAULT_ADDRESS, auth_token: "t" });
    expect(mAdd.status).toBe(403);
    expect((await h.call("GET", "/v1/secret-stores/sneaky", { token: owner })).status).toBe(404);
    expect((await m.get("/vaults/v1/settings/secret-stores/team-vault")).text).toContain("An admin of its vault manages this connection.");
    expect(
      (
        await h.call("POST", "/v1/secret-stores", {
          token: member,
          body: { name: "by-api", kind: "vault", vault: "v1", address: VAULT_ADDRESS, auth: { method: "token", token: "t" } },
        })
      ).status,
    ).toBe(403);
    expectNowhere([admin, m], [token]);
  });
});

describe("credentials by reference", () => {
  test("set one by its parts or as one text; the list shows the reference, last refresh, version seen and last error; no Reveal", async () => {
    const none = await b.get("/vaults/v1/credentials");
    expect(none.text).toContain('id="no-connections"');
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    await apiConnection("elsewhere"); // not shared with v1

    const page = await b.get("/vaults/v1/credentials");
    expect(page.text).toContain('id="set-reference"');
    expect(page.text).toContain('<option value="prod">');
    expect(page.text).not.toContain('<option value="elsewhere">');

    const byParts = await b.submit("/vaults/v1/credentials", {
      source: "reference",
      key: "DB_PASSWORD",
      ref_connection: "prod",
      ref_path: "app/db",
      ref_field: "password",
      version: "",
      ref_text: "",
    });
    expect(byParts.text).toContain("Credential DB_PASSWORD saved: it reads prod:app/db#password (version 7).");
    const byText = await b.submit("/vaults/v1/credentials", {
      source: "reference",
      key: "GONE",
      ref_connection: "prod",
      ref_path: "",
      ref_field: "",
      ref_text: "prod:missing/key",
      version: "3",
    });
    expect(byText.text).toContain(
      "Credential GONE saved: it reads prod:missing/key (version 3), but the first read failed: the store has no secret at missing/key",
    );
    expect((await credentials()).map((c: { key: string; reference?: { text: string } }) => [c.key, c.reference?.text])).toEqual([
      ["DB_PASSWORD", "prod:app/db#password"],
      ["GONE", "prod:missing/key (version 3)"],
    ]);

    const list = await b.get("/vaults/v1/credentials");
    expect(list.text).toContain("prod:app/db#password");
    expect(list.text).toContain("last refresh <time");
    expect(list.text).toMatch(/version seen <code class="name">7<\/code>/);
    expect(list.text).toContain("last error: the store has no secret at missing/key");

    const both = await b.submit("/vaults/v1/credentials", { source: "reference", key: "X", ref_connection: "prod", ref_path: "a", ref_text: "prod:b" });
    expect(both.text).toContain("not both");
    const foreign = await b.submit("/vaults/v1/credentials", { source: "reference", key: "X", ref_text: "elsewhere:a#b" });
    expect(foreign.text).toContain("This vault has no secret store connection named elsewhere");
    const garbled = await b.submit("/vaults/v1/credentials", { source: "reference", key: "X", ref_text: "no colon here" });
    expect(garbled.text).toContain("A reference starts with its connection");
    const nothing = await b.submit("/vaults/v1/credentials", { source: "reference", key: "X", ref_connection: "prod" });
    expect(nothing.text).toContain("path in the store, or the whole reference");
    expect((await credentials()).length).toBe(2);

    // The manage page of a reference: where it reads, no Reveal; the reveal page says where the value lives.
    const manage = await b.get("/vaults/v1/credentials/DB_PASSWORD");
    expect(manage.text).toContain('id="reference-facts"');
    expect(manage.text).not.toContain("Reveal DB_PASSWORD");
    expect(manage.text).toContain('value="app/db"');
    const reveal = await b.get("/vaults/v1/credentials/DB_PASSWORD/reveal");
    expect(reveal.text).toContain("reveal it in the store itself");
    expect(reveal.text).not.toContain('name="password"');

    // Point it elsewhere, then store a value instead; a value credential can be pointed at the store.
    const moved = await b.submit("/vaults/v1/credentials/DB_PASSWORD", {
      source: "reference",
      ref_connection: "prod",
      ref_path: "app/db2",
      ref_field: "password",
    });
    expect(moved.text).toContain("DB_PASSWORD now reads prod:app/db2#password (version 7).");
    const value = sentinel("value");
    const stored = await b.submit("/vaults/v1/credentials/DB_PASSWORD", { value });
    expect(stored.text).toContain("The value of DB_PASSWORD was replaced.");
    expect((await credentials()).find((c: { key: string }) => c.key === "DB_PASSWORD").reference).toBeUndefined();
    const valuePage = await b.get("/vaults/v1/credentials/DB_PASSWORD");
    expect(valuePage.text).toContain("Reveal DB_PASSWORD");
    expect(valuePage.text).toContain('id="replace-reference"');
    expectNowhere([b], [value]);
  });

  test("a proxy-role person sees where a reference reads but gets no form", async () => {
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    await h.call("PUT", "/v1/vaults/v1/credentials/DB", { token: owner, body: { ref: "prod:app/db#password" } });
    await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    const p = await signIn(h, "proxy@example.com");
    const list = await p.get("/vaults/v1/credentials");
    expect(list.text).toContain("prod:app/db#password");
    expect(list.text).not.toContain('id="set-reference"');
    expect((await p.get("/vaults/v1/settings")).text).not.toContain('id="secret-stores-section"');
    expect((await p.get("/vaults/v1/settings/secret-stores")).status).toBe(403);
    const posted = await p.submit("/vaults/v1/credentials", { source: "reference", key: "X", ref_text: "prod:a" });
    expect(posted.text).toContain("does not allow this");
  });
});

describe("proposals answered with a reference", () => {
  let agents = 0;
  async function fileProposal(key = "UPSTREAM_TOKEN") {
    const agent = await addAgent(h, owner, "v1", "admin", `bot-${++agents}`);
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.example.com", description: "Example", auth: { type: "bearer", token: key } }],
        credentials: [{ action: "set", key, description: "A token" }],
      },
    });
    expect(res.status).toBe(201);
    const url = new URL(res.body.approval_url);
    return { id: res.body.id as number, path: `${url.pathname}${url.search}`, token: url.searchParams.get("token")!, agent };
  }

  test("the console's proposals page: a value or a reference per slot, never both", async () => {
    const plain = await fileProposal("FIRST");
    const before = await b.get("/vaults/v1/proposals");
    expect(before.text).not.toContain('name="ref_FIRST"'); // no connection yet: values only
    expect(before.text).toMatch(/name="value_FIRST"[^>]*required/);
    expect((await h.call("POST", `/v1/proposals/${plain.id}/reject`, { token: owner })).status).toBe(200);

    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    const { id } = await fileProposal();
    const page = await b.get("/vaults/v1/proposals");
    expect(page.text).toContain('name="ref_UPSTREAM_TOKEN"');
    expect(page.text).toContain('name="version_UPSTREAM_TOKEN"');
    expect(page.text).toContain("this vault may use: <code>prod</code>.");
    expect(page.text).not.toMatch(/name="value_UPSTREAM_TOKEN"[^>]*required/);

    const value = sentinel("both");
    const both = await b.submit(`/vaults/v1/proposals/${id}/approve`, { value_UPSTREAM_TOKEN: value, ref_UPSTREAM_TOKEN: "prod:app/token#value" });
    expect(both.text).toContain("Give UPSTREAM_TOKEN a value or a reference, not both.");
    const garbled = await b.submit(`/vaults/v1/proposals/${id}/approve`, { value_UPSTREAM_TOKEN: "", ref_UPSTREAM_TOKEN: "prod app token" });
    expect(garbled.text).toContain("UPSTREAM_TOKEN: a reference starts with its connection");
    const foreign = await b.submit(`/vaults/v1/proposals/${id}/approve`, { value_UPSTREAM_TOKEN: "", ref_UPSTREAM_TOKEN: "nope:app/token" });
    expect(foreign.text).toContain("this vault has no secret store connection named nope");
    expect((await h.call("GET", `/v1/proposals/${id}`, { token: owner })).body.status).toBe("pending");

    const approved = await b.submit(`/vaults/v1/proposals/${id}/approve`, {
      value_UPSTREAM_TOKEN: "",
      ref_UPSTREAM_TOKEN: "prod:app/token#value",
      version_UPSTREAM_TOKEN: "4",
    });
    expect(approved.text).toContain(`Proposal #${id} approved.`);
    const cred = (await credentials()).find((c: { key: string }) => c.key === "UPSTREAM_TOKEN");
    expect(cred.reference).toMatchObject({ text: "prod:app/token#value (version 4)", connection: "prod", path: "app/token", field: "value", version: "4" });
    expectNowhere([b], [value]);
  });

  test("the /approve page: the reference field for an approver, the same checks, the credential saved as a reference", async () => {
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    const { id, path, token } = await fileProposal();
    const anonymous = createPageBrowser(h.domain);
    const anon = await anonymous.get(path);
    expect(anon.status).toBe(200);
    expect(anon.text).not.toContain('name="ref_UPSTREAM_TOKEN"'); // a reader of the link learns no connection

    const page = await b.get(path);
    expect(page.text).toContain('name="ref_UPSTREAM_TOKEN"');
    expect(page.text).toContain("this vault may use: <code>prod</code>.");
    const value = sentinel("approve-both");
    const both = await b.post(
      `/approve/${id}/decide`,
      { token, decision: "allow", value_UPSTREAM_TOKEN: value, ref_UPSTREAM_TOKEN: "prod:app/token" },
      SAME_ORIGIN,
    );
    expect(both.status).toBe(400);
    expect(both.text).toContain("give UPSTREAM_TOKEN a value or a reference, not both");
    expect(both.text).not.toContain(value);
    const versionAlone = await b.post(
      `/approve/${id}/decide`,
      { token, decision: "allow", value_UPSTREAM_TOKEN: "", version_UPSTREAM_TOKEN: "2" },
      SAME_ORIGIN,
    );
    expect(versionAlone.text).toContain("a version for UPSTREAM_TOKEN goes with a reference only");

    const done = await b.post(
      `/approve/${id}/decide`,
      { token, decision: "allow", value_UPSTREAM_TOKEN: "", ref_UPSTREAM_TOKEN: "prod:app/token" },
      SAME_ORIGIN,
    );
    expect(done.status).toBe(303);
    expect((await h.call("GET", `/v1/proposals/${id}`, { token: owner })).body.status).toBe("applied");
    expect((await credentials()).find((c: { key: string }) => c.key === "UPSTREAM_TOKEN").reference.text).toBe("prod:app/token");
    expectNowhere([b, anonymous], [value]);
  });
});
