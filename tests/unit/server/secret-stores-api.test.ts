// /v1/secret-stores and credentials by reference through the API (issue 36): who may create, see, change,
// share and remove a connection; what a view shows (never a secret field); how bad input is refused (the
// field named, the value never repeated); references only to connections the vault may use; and the
// 409s that keep a reference from pointing at nothing. No store is read here (the harness has no runtime).

import { beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { addAgent, addUser, createHarness, createVault, expectNoLeak, mintScoped, register, sentinel, type Harness } from "./fixtures.ts";

let h: Harness;
let owner: string;
let admin: string; // admin of v1
let member: string; // member of v1
let otherAdmin: string; // admin of v2 only
let agent: { token: string; headers: Record<string, string> };
let scoped: string;
const vaultToken = sentinel("vault-token");
const secretId = sentinel("secret-id");
const awsSecret = sentinel("aws-secret");
const azureSecret = sentinel("azure-secret");
const googleKey = JSON.stringify({
  type: "service_account",
  client_email: "broker@proj-123456.iam.gserviceaccount.com",
  private_key_id: "k1",
  private_key: generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
});

beforeAll(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  await createVault(h, owner, "v2");
  admin = await addUser(h, owner, "v1", "admin@example.com", "admin");
  member = await addUser(h, owner, "v1", "member@example.com", "member");
  otherAdmin = await addUser(h, owner, "v2", "other@example.com", "admin");
  agent = await addAgent(h, owner, "v1", "admin", "bot");
  scoped = (await mintScoped(h, { token: admin }, "v1", { role: "admin" })).body.token;
});

const call = (token: string, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  h.call(method, path, { token, ...(body !== undefined && { body }), ...(headers && { headers }) });

describe("connections", () => {
  test("the owner adds one of each kind; the views show settings and the auth's method, never a secret field", async () => {
    const bodies = [
      {
        name: "kv",
        kind: "vault",
        address: "https://vault.example.com:8200/",
        namespace: "team",
        auth: { method: "approle", role_id: vaultToken, secret_id: secretId },
      },
      { name: "aws", kind: "aws", region: "eu-west-1", auth: { method: "keys", access_key_id: "AKIAEXAMPLE", secret_access_key: awsSecret } },
      { name: "gcp", kind: "google", project: "proj-123456", auth: { method: "service_account_key", key: googleKey } },
      {
        name: "az",
        kind: "azure",
        vault_url: "https://team.vault.azure.net",
        auth: { method: "client_credentials", tenant: "contoso.onmicrosoft.com", client_id: "app-1", client_secret: azureSecret },
      },
    ];
    for (const b of bodies) expect((await call(owner, "POST", "/v1/secret-stores", b)).status).toBe(201);
    const list = await call(owner, "GET", "/v1/secret-stores");
    expect(list.body.connections.map((c: { name: string; kind: string }) => [c.name, c.kind])).toEqual([
      ["aws", "aws"],
      ["az", "azure"],
      ["gcp", "google"],
      ["kv", "vault"],
    ]);
    const kv = list.body.connections.find((c: { name: string }) => c.name === "kv");
    expect(kv).toMatchObject({
      vault: null,
      shared_with: [],
      settings: { address: "https://vault.example.com:8200", namespace: "team" },
      auth: { method: "approle" },
    });
    expect(list.body.connections.find((c: { name: string }) => c.name === "gcp").auth).toEqual({
      method: "service_account_key",
      client_email: "broker@proj-123456.iam.gserviceaccount.com",
    });
    expect([kv.refresh_seconds, kv.grace_seconds, kv.status]).toEqual([300, 300, { references: 0, last_refresh: null, last_error: null }]);
    for (const s of [vaultToken, secretId, awsSecret, azureSecret, "PRIVATE KEY", "AKIAEXAMPLE"]) expectNoLeak(h, s);
  });

  test("bad input names the field and never repeats a secret", async () => {
    const cases: [unknown, string][] = [
      [{ name: "x1", kind: "vault", address: "http://vault.example.com", auth: { method: "token", token: vaultToken } }, "address"],
      [{ name: "x2", kind: "vault", address: "https://vault.example.com" }, "auth"],
      [{ name: "x3", kind: "vault", address: "https://vault.example.com", auth: { method: "password", password: vaultToken } }, "auth.method"],
      [{ name: "x4", kind: "aws", region: "europe", auth: { method: "environment" } }, "region"],
      [{ name: "x5", kind: "vault", region: "eu-west-1", address: "https://v.example.com", auth: { method: "token", token: vaultToken } }, "region"],
      [{ name: "x6", kind: "google", project: "proj-123456", auth: { method: "service_account_key", key: `{"private_key": "${vaultToken}"}` } }, "auth.key"],
      [{ name: "x7", kind: "nope" }, "kind"],
      [{ name: "x8", kind: "aws", region: "eu-west-1", auth: { method: "environment" }, zz: 1 }, "zz"],
      [{ name: "Bad Name", kind: "aws", region: "eu-west-1", auth: { method: "environment" } }, "name"],
    ];
    for (const [body, field] of cases) {
      const r = await call(owner, "POST", "/v1/secret-stores", body);
      expect({ status: r.status, error: r.body.error, field: r.body.field }).toEqual({ status: 400, error: "invalid_request", field });
    }
    expect((await call(owner, "POST", "/v1/secret-stores", { name: "kv", kind: "aws", region: "eu-west-1", auth: { method: "environment" } })).status).toBe(
      409,
    );
    expectNoLeak(h, vaultToken);
  });

  test("people who are not the owner, agents and scoped sessions cannot add an owner's connection; a vault admin adds their vault's own", async () => {
    const body = { name: "mine", kind: "aws", region: "eu-west-1", auth: { method: "keys", access_key_id: "AKIAMINE", secret_access_key: awsSecret } };
    expect((await call(admin, "POST", "/v1/secret-stores", body)).status).toBe(403);
    expect((await call(agent.token, "POST", "/v1/secret-stores", { ...body, vault: "v1" }, agent.headers)).status).toBe(403);
    expect((await call(scoped, "POST", "/v1/secret-stores", { ...body, vault: "v1" })).status).toBe(403);
    expect((await call(member, "POST", "/v1/secret-stores", { ...body, vault: "v1" })).status).toBe(403);
    const made = await call(admin, "POST", "/v1/secret-stores", { ...body, vault: "v1" });
    expect([made.status, made.body.vault]).toEqual([201, "v1"]);
    // Signing in as the broker itself (its AWS identity, a platform token file) is for the owner's connections only.
    const env = await call(admin, "POST", "/v1/secret-stores", { ...body, name: "mine-env", vault: "v1", auth: { method: "environment" } });
    expect([env.status, env.body.message]).toEqual([403, expect.stringContaining("signs in as the broker itself")]);
    const jwt = { name: "mine-jwt", kind: "vault", address: "https://vault.example.com", auth: { method: "kubernetes", role: "r", token_file: "/etc/passwd" } };
    expect((await call(admin, "POST", "/v1/secret-stores", { ...jwt, vault: "v1" })).status).toBe(403);
    const unlisted = await call(owner, "POST", "/v1/secret-stores", jwt);
    expect([unlisted.status, unlisted.body.field]).toEqual([400, "auth.token_file"]);
    // Seen by v1's people, not by v2's admin; agents and scoped sessions see none.
    expect((await call(member, "GET", "/v1/secret-stores")).body.connections.map((c: { name: string }) => c.name)).toEqual(["mine"]);
    expect((await call(otherAdmin, "GET", "/v1/secret-stores")).body.connections).toEqual([]);
    expect((await call(otherAdmin, "GET", "/v1/secret-stores/mine")).status).toBe(404);
    expect((await call(agent.token, "GET", "/v1/secret-stores", undefined, agent.headers)).status).toBe(403);
    expect((await call(scoped, "GET", "/v1/secret-stores")).status).toBe(403);
    // Its admin changes it; v2's admin cannot; nobody shares a vault's own connection.
    expect((await call(admin, "PATCH", "/v1/secret-stores/mine", { refresh_seconds: 60 })).body.refresh_seconds).toBe(60);
    expect((await call(otherAdmin, "PATCH", "/v1/secret-stores/mine", { refresh_seconds: 61 })).status).toBe(404); // its vault is not theirs to know
    expect((await call(owner, "PUT", "/v1/secret-stores/mine/vaults/v2")).status).toBe(400);
    expect((await call(admin, "DELETE", "/v1/secret-stores/mine")).status).toBe(204);
  });

  test("references only to connections the vault may use; sharing, 409s while referenced, unsharing", async () => {
    const ref = { ref: "kv:apps/stripe#api_key" };
    const refused = await call(admin, "PUT", "/v1/vaults/v1/credentials/STRIPE", ref);
    expect([refused.status, refused.body.field]).toEqual([400, "ref"]);
    expect(refused.body.message).toContain("no secret store connection named kv");
    expect((await call(admin, "PUT", "/v1/secret-stores/kv/vaults/v1")).status).toBe(403); // the owner shares
    const shared = await call(owner, "PUT", "/v1/secret-stores/kv/vaults/v1");
    expect([shared.status, shared.body.shared_with]).toEqual([200, ["v1"]]);
    const set = await call(member, "PUT", "/v1/vaults/v1/credentials/STRIPE", { ...ref, version: "3" });
    expect(set.status).toBe(200);
    expect(set.body.reference).toMatchObject({
      text: "kv:apps/stripe#api_key (version 3)",
      connection: "kv",
      path: "apps/stripe",
      field: "api_key",
      version: "3",
    });
    // Agents and scoped sessions never set one, whatever their role.
    expect((await call(agent.token, "PUT", "/v1/vaults/v1/credentials/X", ref, agent.headers)).status).toBe(403);
    expect((await call(scoped, "PUT", "/v1/vaults/v1/credentials/X", ref)).status).toBe(403);
    // v2 may not use it.
    expect((await call(otherAdmin, "PUT", "/v1/vaults/v2/credentials/STRIPE", ref)).status).toBe(400);
    // Lists and reveal show the reference, never a value.
    const list = await call(member, "GET", "/v1/vaults/v1/credentials?reveal=true");
    expect(list.body.credentials.find((c: { key: string }) => c.key === "STRIPE")).toMatchObject({
      key: "STRIPE",
      reference: { text: "kv:apps/stripe#api_key (version 3)" },
    });
    expect(list.body.credentials.find((c: { key: string }) => c.key === "STRIPE").value).toBeUndefined();
    const one = await call(member, "GET", "/v1/vaults/v1/credentials/STRIPE");
    expect([one.status, one.body.value, one.body.reference.connection]).toEqual([200, undefined, "kv"]);
    // Not both, not neither; a reference that does not parse names `ref`.
    expect((await call(member, "PUT", "/v1/vaults/v1/credentials/X", { value: "v", ref: "kv:a" })).status).toBe(400);
    expect((await call(member, "PUT", "/v1/vaults/v1/credentials/X", {})).status).toBe(400);
    const bad = await call(member, "PUT", "/v1/vaults/v1/credentials/X", { ref: "no colon here" });
    expect([bad.status, bad.body.field]).toEqual([400, "ref"]);
    // The connection's page lists it; removing or unsharing it is refused while it is referenced.
    const shown = await call(owner, "GET", "/v1/secret-stores/kv");
    expect(shown.body.references).toEqual([{ vault: "v1", key: "STRIPE", reference: expect.objectContaining({ path: "apps/stripe" }) }]);
    expect(shown.body.status.references).toBe(1);
    const del = await call(owner, "DELETE", "/v1/secret-stores/kv");
    expect([del.status, del.body.message]).toEqual([409, expect.stringContaining("v1/STRIPE")]);
    expect((await call(owner, "DELETE", "/v1/secret-stores/kv/vaults/v1")).status).toBe(409);
    expect((await call(member, "DELETE", "/v1/vaults/v1/credentials/STRIPE")).status).toBe(204);
    expect((await call(owner, "DELETE", "/v1/secret-stores/kv/vaults/v1")).status).toBe(204);
    expect((await call(owner, "DELETE", "/v1/secret-stores/kv/vaults/v1")).status).toBe(404);
  });

  test("a share narrowed to path prefixes: references only under them, never through a . or .. segment; sharing again replaces them", async () => {
    const narrowed = await call(owner, "PUT", "/v1/secret-stores/gcp/vaults/v2", { paths: ["team-b/", "shared-"] });
    expect([narrowed.status, narrowed.body.share_paths]).toEqual([200, { v2: ["team-b/", "shared-"] }]);
    const set = (path: string) => call(otherAdmin, "PUT", "/v1/vaults/v2/credentials/K", { ref: `gcp:${path}` });
    expect((await set("team-b/api")).status).toBe(200);
    expect((await set("shared-key")).status).toBe(200);
    for (const outside of ["prod/payments", "team-b/../prod/payments", "team-b/./x", "team-a/api"]) {
      const r = await set(outside);
      expect([outside, r.status, r.body.field]).toEqual([outside, 400, "ref"]);
    }
    expect((await call(owner, "PUT", "/v1/secret-stores/gcp/vaults/v2", { paths: [] })).status).toBe(400);
    expect((await call(owner, "PUT", "/v1/secret-stores/gcp/vaults/v2", { paths: ["has space"] })).status).toBe(400);
    expect((await call(owner, "PUT", "/v1/secret-stores/gcp/vaults/v2", {})).body.share_paths).toEqual({ v2: null });
    expect((await set("prod/payments")).status).toBe(200);
    expect((await call(otherAdmin, "DELETE", "/v1/vaults/v2/credentials/K")).status).toBe(204);
  });

  test("PATCH merges over the stored settings, keeps the sealed auth unless a new one is given, and refuses name, kind and vault", async () => {
    const before = (await h.store.secretStores.byName("aws"))!;
    const r = await call(owner, "PATCH", "/v1/secret-stores/aws", { region: "us-east-1", grace_seconds: 0 });
    expect(r.status).toBe(200);
    expect([r.body.settings.region, r.body.grace_seconds, r.body.auth.method]).toEqual(["us-east-1", 0, "keys"]);
    const after = (await h.store.secretStores.byName("aws"))!;
    expect(Buffer.from(after.secretsCiphertext).equals(Buffer.from(before.secretsCiphertext))).toBe(true);
    const replaced = await call(owner, "PATCH", "/v1/secret-stores/aws", { auth: { method: "environment" } });
    expect(replaced.body.auth).toEqual({ method: "environment" });
    expect(Buffer.from((await h.store.secretStores.byName("aws"))!.secretsCiphertext).equals(Buffer.from(before.secretsCiphertext))).toBe(false);
    // Moving the connection needs the auth again: the stored one was given for the old place.
    const moved = await call(owner, "PATCH", "/v1/secret-stores/kv", { address: "https://elsewhere.example.com" });
    expect([moved.status, moved.body.field]).toEqual([400, "auth"]);
    const movedWithAuth = await call(owner, "PATCH", "/v1/secret-stores/kv", {
      address: "https://elsewhere.example.com",
      auth: { method: "token", token: vaultToken },
    });
    expect([movedWithAuth.status, movedWithAuth.body.settings.address]).toEqual([200, "https://elsewhere.example.com"]);
    for (const field of ["name", "kind", "vault"]) {
      const no = await call(owner, "PATCH", "/v1/secret-stores/aws", { [field]: "x" });
      expect([no.status, no.body.field]).toEqual([400, field]);
    }
    expect((await call(owner, "PATCH", "/v1/secret-stores/aws", { address: "https://x.example.com" })).body.field).toBe("address");
    expect((await call(owner, "PATCH", "/v1/secret-stores/nothing", { region: "us-east-1" })).status).toBe(404);
    expectNoLeak(h, awsSecret);
  });
});
