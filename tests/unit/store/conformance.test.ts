// Every repository in src/store, on every backend: the same calls give the same rows, with the same
// types (ids and times as numbers, bytes as Uint8Array), orderings, filters and upsert semantics.
// Cascades and transactions: conformance-integrity.test.ts; races: conformance-races.test.ts.

import { expect, test } from "bun:test";
import type { AuditRow, Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser, auditRow, bytes, newSession } from "./conformance-fixtures.ts";

/** Asserts a plain Uint8Array (not a Buffer or a string) holding exactly `want`. */
function expectBytes(got: Uint8Array, want: Uint8Array) {
  expect(got.constructor).toBe(Uint8Array);
  expect([...got]).toEqual([...want]);
}

const SLOT = { action: "set", key: "K", description: "", obtain: "", obtain_instructions: "" } as const;

forEachBackend((backend) => {
  let store: Store;
  const open = async () => (store = await backend.open());

  test("vaults: create, look up, list by name, unique names, unmatched-hosts mode, remove", async () => {
    await open();
    const b = await store.vaults.create("bravo", 10);
    const a = await store.vaults.create("alpha", 11);
    expect(b).toEqual({ id: expect.any(Number), name: "bravo", unmatchedHosts: "tunnel", policyMode: "enforce", createdAt: 10 });
    expect(a.id).not.toBe(b.id);
    expect(await store.vaults.byName("bravo")).toEqual(b);
    expect(await store.vaults.byId(a.id)).toEqual(a);
    expect(await store.vaults.byName("charlie")).toBeUndefined();
    expect(await store.vaults.list()).toEqual([a, b]);
    await expect(store.vaults.create("alpha", 12)).rejects.toThrow();
    await store.vaults.setUnmatchedHosts(a.id, "deny");
    expect((await store.vaults.byId(a.id))?.unmatchedHosts).toBe("deny");
    expect(await store.vaults.remove(a.id)).toBe(true);
    expect(await store.vaults.remove(a.id)).toBe(false);
    expect(await store.vaults.list()).toEqual([b]);
  });

  test("credentials: nonce and ciphertext round-trip byte for byte; put replaces; keys sorted; remove", async () => {
    await open();
    const v = await store.vaults.create("v", 1);
    const other = await store.vaults.create("other", 1);
    const nonce = bytes(12, 0);
    const ciphertext = bytes(4099, 7); // every byte value, NULs and 0xff included
    await store.credentials.put({ vaultId: v.id, key: "B", nonce, ciphertext }, 100);
    await store.credentials.put({ vaultId: v.id, key: "A", nonce: new Uint8Array(12), ciphertext: new Uint8Array([0]) }, 101);
    const b = (await store.credentials.get(v.id, "B"))!;
    expect({ ...b, nonce: [], ciphertext: [] }).toEqual({ vaultId: v.id, key: "B", nonce: [], ciphertext: [], reference: null, updatedAt: 100 });
    expectBytes(b.nonce, nonce);
    expectBytes(b.ciphertext, ciphertext);
    expectBytes((await store.credentials.get(v.id, "A"))!.ciphertext, new Uint8Array([0]));
    // A reference replaces the sealed value: names only, empty ciphertext (opening it as a value fails closed).
    const reference = { connection: "prod-kv", path: "arn:aws:secretsmanager:eu-west-1:1:secret:x", field: "key", version: "3" };
    await store.credentials.put({ vaultId: v.id, key: "A", reference }, 102);
    const a = (await store.credentials.get(v.id, "A"))!;
    expect(a.reference).toEqual(reference);
    expect(a.ciphertext.length).toBe(0);
    expect((await store.credentials.references(v.id)).map((r) => r.key)).toEqual(["A"]);
    await store.credentials.put({ vaultId: v.id, key: "A", nonce: new Uint8Array(12), ciphertext: new Uint8Array([0]) }, 103);
    expect((await store.credentials.get(v.id, "A"))!.reference).toBeNull();
    expect(await store.credentials.keys(v.id)).toEqual(["A", "B"]);
    expect((await store.credentials.list(v.id)).map((c) => c.key)).toEqual(["A", "B"]);
    expect(await store.credentials.get(other.id, "B")).toBeUndefined();
    expect(await store.credentials.keys(other.id)).toEqual([]);

    const replaced = bytes(33, 200);
    await store.credentials.put({ vaultId: v.id, key: "B", nonce: bytes(12, 50), ciphertext: replaced }, 200);
    const again = (await store.credentials.get(v.id, "B"))!;
    expect(again.updatedAt).toBe(200);
    expectBytes(again.nonce, bytes(12, 50));
    expectBytes(again.ciphertext, replaced);
    expect(await store.credentials.keys(v.id)).toEqual(["A", "B"]);

    expect(await store.credentials.remove(v.id, "A")).toBe(true);
    expect(await store.credentials.remove(v.id, "A")).toBe(false);
    expect(await store.credentials.keys(v.id)).toEqual(["B"]);
    await expect(store.credentials.put({ vaultId: 999_999, key: "K", nonce, ciphertext }, 1)).rejects.toThrow(); // foreign key
  });

  test("users: create with hash bytes, look up, count, unique email, change password", async () => {
    await open();
    expect(await store.users.count()).toBe(0);
    const u = await store.users.create({
      email: "a@example.com",
      passwordHash: bytes(32, 1),
      passwordSalt: bytes(16, 9),
      passwordParams: '{"t":1}',
      role: "owner",
      createdAt: 5,
    });
    expect({ ...u, passwordHash: [], passwordSalt: [] }).toEqual({
      id: expect.any(Number),
      email: "a@example.com",
      passwordHash: [],
      passwordSalt: [],
      passwordParams: '{"t":1}',
      role: "owner",
      createdAt: 5,
    });
    expectBytes(u.passwordHash, bytes(32, 1));
    expectBytes(u.passwordSalt, bytes(16, 9));
    expect(await store.users.byEmail("a@example.com")).toEqual(u);
    expect(await store.users.byId(u.id)).toEqual(u);
    expect(await store.users.byEmail("b@example.com")).toBeUndefined();
    await expect(addUser(store, "a@example.com")).rejects.toThrow();
    await addUser(store, "b@example.com");
    expect(await store.users.count()).toBe(2);
    await store.users.setPassword(u.id, bytes(32, 100), bytes(16, 100), '{"t":2}');
    const changed = (await store.users.byId(u.id))!;
    expectBytes(changed.passwordHash, bytes(32, 100));
    expectBytes(changed.passwordSalt, bytes(16, 100));
    expect(changed.passwordParams).toBe('{"t":2}');
  });

  test("sessions: create and look up by token hash and public id; active listings honour revocation and expiry", async () => {
    await open();
    const u = await addUser(store, "a@example.com");
    const v = await store.vaults.create("v", 1);
    const live = await store.sessions.create(newSession("live", { userId: u.id, expiresAt: 1000 }));
    expect(live).toEqual({
      id: expect.any(Number),
      publicId: "ses_live",
      tokenHash: "hash-live",
      kind: "user",
      userId: u.id,
      agentId: null,
      vaultId: null,
      role: null,
      createdAt: 10,
      expiresAt: 1000,
      lastSeenAt: 10,
      revokedAt: null,
      contained: false,
      channel: null,
      clientAgent: null,
      clientAddress: null,
      workloadSubject: null,
      workloadIssuer: null,
    });
    expect(await store.sessions.byTokenHash("hash-live")).toEqual(live);
    expect(await store.sessions.byPublicId("ses_live")).toEqual(live);
    expect(await store.sessions.byTokenHash("nope")).toBeUndefined();
    const forever = await store.sessions.create(newSession("forever", { userId: u.id, expiresAt: null, createdAt: 11 }));
    const expiring = await store.sessions.create(newSession("expiring", { userId: u.id, expiresAt: 500, createdAt: 12 }));
    const revoked = await store.sessions.create(newSession("revoked", { userId: u.id, createdAt: 13 }));
    expect(await store.sessions.revoke(revoked.id, 20)).toBe(true);
    expect(await store.sessions.revoke(revoked.id, 21)).toBe(false);
    expect(await store.sessions.byPublicId("ses_revoked")).toEqual({ ...revoked, revokedAt: 20 });
    // expires_at is exclusive: a session expiring at `now` is no longer active.
    expect((await store.sessions.activeForUser(u.id, 499, 0, 100)).map((s) => s.publicId)).toEqual(["ses_live", "ses_forever", "ses_expiring"]);
    expect((await store.sessions.activeForUser(u.id, 500, 0, 100)).map((s) => s.publicId)).toEqual(["ses_live", "ses_forever"]);
    expect((await store.sessions.activeForUser(u.id, 1000, 0, 100)).map((s) => s.publicId)).toEqual(["ses_forever"]);

    await store.sessions.create(newSession("scoped1", { kind: "scoped", userId: u.id, vaultId: v.id, role: "proxy", createdAt: 14, expiresAt: 300 }));
    await store.sessions.create(newSession("scoped2", { kind: "scoped", userId: u.id, vaultId: v.id, role: "member", createdAt: 15, expiresAt: 900 }));
    expect((await store.sessions.activeScopedForVault(v.id, 299, 0, 100)).map((s) => [s.publicId, s.role])).toEqual([
      ["ses_scoped1", "proxy"],
      ["ses_scoped2", "member"],
    ]);
    expect((await store.sessions.activeScopedForVault(v.id, 300, 0, 100)).map((s) => s.publicId)).toEqual(["ses_scoped2"]);
    expect(forever.expiresAt).toBeNull();
    expect(expiring.expiresAt).toBe(500);
  });

  test("sessions: touch only moves last-seen forward; agent counts; revoke-all returns the hashes it revoked; prune", async () => {
    await open();
    const u = await addUser(store, "a@example.com");
    const s = await store.sessions.create(newSession("s", { userId: u.id, createdAt: 10 }));
    await store.sessions.touch(s.id, 50);
    await store.sessions.touch(s.id, 40); // late, out-of-order write: ignored
    expect((await store.sessions.byTokenHash("hash-s"))?.lastSeenAt).toBe(50);

    const agent = await store.agents.create({ name: "bot", role: "member", createdBy: u.id, createdAt: 1 });
    for (const tag of ["a1", "a2", "a3"])
      await store.sessions.create(newSession(tag, { kind: "agent", agentId: agent.id, expiresAt: tag === "a3" ? 100 : null }));
    expect(await store.sessions.countActiveForAgent(agent.id, 99)).toBe(3);
    expect(await store.sessions.countActiveForAgent(agent.id, 100)).toBe(2);
    await store.sessions.revoke((await store.sessions.byPublicId("ses_a1"))!.id, 60);
    expect(await store.sessions.countActiveForAgent(agent.id, 99)).toBe(2);

    await store.sessions.create(newSession("minted", { kind: "scoped", userId: u.id, vaultId: (await store.vaults.create("v", 1)).id, role: "proxy" }));
    const already = await store.sessions.create(newSession("already", { userId: u.id }));
    await store.sessions.revoke(already.id, 70);
    expect((await store.sessions.revokeAllForUser(u.id, 80)).sort()).toEqual(["hash-minted", "hash-s"]);
    expect(await store.sessions.activeForUser(u.id, 0, 0, 100)).toEqual([]);
    expect((await store.sessions.byPublicId("ses_already"))?.revokedAt).toBe(70); // not overwritten
    expect(await store.sessions.revokeAllForUser(u.id, 81)).toEqual([]);

    // prune: revoked before 75 (a1 at 60, already at 70) and expired before 75 (none: a3 expires at 100).
    expect(await store.sessions.prune(75)).toBe(2);
    expect(await store.sessions.byPublicId("ses_a1")).toBeUndefined();
    expect(await store.sessions.byPublicId("ses_s")).toBeDefined();
    expect(await store.sessions.prune(101)).toBe(3); // s, minted (revoked at 80) and a3 (expired at 100)
    expect((await store.db.all<{ publicId: string }>(`SELECT public_id AS "publicId" FROM sessions ORDER BY public_id`)).map((r) => r.publicId)).toEqual([
      "ses_a2",
    ]);
  });

  test("agents: create, look up, list by name, unique names, creator may be null, remove", async () => {
    await open();
    const u = await addUser(store, "a@example.com");
    const z = await store.agents.create({ name: "zeta", role: "member", createdBy: u.id, createdAt: 3 });
    const a = await store.agents.create({ name: "alpha", role: "owner", createdBy: null, createdAt: 4 });
    expect(z).toEqual({ id: expect.any(Number), name: "zeta", role: "member", createdBy: u.id, createdAt: 3 });
    expect(a.createdBy).toBeNull();
    expect(await store.agents.byId(z.id)).toEqual(z);
    expect(await store.agents.byName("alpha")).toEqual(a);
    expect(await store.agents.byName("nobody")).toBeUndefined();
    expect(await store.agents.page({ kind: "all" }, "", 100)).toEqual([a, z]);
    await expect(store.agents.create({ name: "zeta", role: "member", createdBy: null, createdAt: 5 })).rejects.toThrow();
    expect(await store.agents.remove(z.id)).toBe(true);
    expect(await store.agents.remove(z.id)).toBe(false);
    expect(await store.agents.page({ kind: "all" }, "", 100)).toEqual([a]);
  });

  test("access: members and grants are upserts, listed with names in order", async () => {
    await open();
    const [zed, amy] = [await addUser(store, "zed@example.com"), await addUser(store, "amy@example.com")];
    const [vb, va] = [await store.vaults.create("vb", 1), await store.vaults.create("va", 1)];
    expect(await store.access.memberRole(va.id, amy.id)).toBeUndefined();
    await store.access.setMember(va.id, zed.id, "proxy", 1);
    await store.access.setMember(va.id, amy.id, "member", 1);
    await store.access.setMember(vb.id, amy.id, "admin", 1);
    await store.access.setMember(va.id, zed.id, "admin", 2); // upsert: role changes, no second row
    expect(await store.access.memberRole(va.id, zed.id)).toBe("admin");
    expect(await store.access.members(va.id)).toEqual([
      { userId: amy.id, email: "amy@example.com", role: "member" },
      { userId: zed.id, email: "zed@example.com", role: "admin" },
    ]);
    expect(await store.access.vaultsOfUser(amy.id)).toEqual([
      { vaultId: va.id, vaultName: "va", role: "member" },
      { vaultId: vb.id, vaultName: "vb", role: "admin" },
    ]);
    expect(await store.access.vaultsOfUser(zed.id)).toEqual([{ vaultId: va.id, vaultName: "va", role: "admin" }]);

    const [bot, ant] = [
      await store.agents.create({ name: "bot", role: "member", createdBy: null, createdAt: 1 }),
      await store.agents.create({ name: "ant", role: "member", createdBy: null, createdAt: 1 }),
    ];
    expect(await store.access.grantRole(va.id, bot.id)).toBeUndefined();
    await store.access.setGrant(vb.id, bot.id, "proxy", 1);
    await store.access.setGrant(va.id, bot.id, "member", 1);
    await store.access.setGrant(vb.id, ant.id, "admin", 1);
    await store.access.setGrant(vb.id, bot.id, "admin", 2); // upsert
    expect(await store.access.grantRole(vb.id, bot.id)).toBe("admin");
    expect(await store.access.grantsOfAgent(bot.id)).toEqual([
      { vaultId: va.id, vaultName: "va", role: "member" },
      { vaultId: vb.id, vaultName: "vb", role: "admin" },
    ]);
    expect(await store.access.allGrants()).toEqual([
      { agentId: ant.id, agentName: "ant", vaultId: vb.id, vaultName: "vb", role: "admin" },
      { agentId: bot.id, agentName: "bot", vaultId: va.id, vaultName: "va", role: "member" },
      { agentId: bot.id, agentName: "bot", vaultId: vb.id, vaultName: "vb", role: "admin" },
    ]);
    await expect(store.access.setMember(va.id, amy.id, "root" as never, 3)).rejects.toThrow(); // CHECK constraint
  });

  test("invites: pending listings and counts, single burn, expiry, prune, remove only unused", async () => {
    await open();
    const u = await addUser(store, "a@example.com");
    const v = await store.vaults.create("v", 1);
    const invite = (tag: string, kind: "agent" | "vault", createdAt: number, expiresAt: number) =>
      store.invites.create({
        publicId: `inv_${tag}`,
        tokenHash: `hash-${tag}`,
        kind,
        vaultId: v.id,
        role: "proxy",
        email: kind === "vault" ? `${tag}@example.com` : null,
        agentName: kind === "agent" ? `agent-${tag}` : null,
        agentTokenTtlMs: kind === "agent" ? 3_600_000 : null,
        createdBy: kind === "agent" ? null : u.id,
        createdAt,
        expiresAt,
      });
    const a1 = await invite("a1", "agent", 10, 100);
    const a2 = await invite("a2", "agent", 11, 200);
    const h1 = await invite("h1", "vault", 12, 300);
    expect(a1).toEqual({
      id: expect.any(Number),
      publicId: "inv_a1",
      tokenHash: "hash-a1",
      kind: "agent",
      vaultId: v.id,
      role: "proxy",
      email: null,
      agentName: "agent-a1",
      agentTokenTtlMs: 3_600_000,
      createdBy: null,
      createdAt: 10,
      expiresAt: 100,
      usedAt: null,
    });
    expect(await store.invites.byTokenHash("hash-h1")).toEqual(h1);
    expect(await store.invites.byTokenHash("nope")).toBeUndefined();
    expect((await store.invites.pending(v.id, "agent", 50)).map((i) => i.publicId)).toEqual(["inv_a1", "inv_a2"]);
    expect((await store.invites.pending(v.id, "agent", 100)).map((i) => i.publicId)).toEqual(["inv_a2"]); // expiry exclusive
    expect(await store.invites.countPending(v.id, "agent", 50)).toBe(2);
    expect(await store.invites.countPending(v.id, "vault", 50)).toBe(1);
    expect(await store.invites.pendingAgentName("agent-a2", 50)).toBe(true);
    expect(await store.invites.pendingAgentName("agent-h1", 50)).toBe(false);

    expect(await store.invites.burn(a2.id, 60)).toBe(true);
    expect(await store.invites.burn(a2.id, 61)).toBe(false);
    expect(await store.invites.burn(a1.id, 100)).toBe(false); // expired
    expect((await store.invites.byTokenHash("hash-a2"))?.usedAt).toBe(60);
    expect(await store.invites.countPending(v.id, "agent", 50)).toBe(1);
    expect(await store.invites.pendingAgentName("agent-a2", 50)).toBe(false);

    expect(await store.invites.remove(v.id, "agent", "inv_a2")).toBe(false); // used: kept as a record
    expect(await store.invites.remove(v.id, "agent", "inv_h1")).toBe(false); // wrong kind
    expect(await store.invites.remove(v.id, "vault", "inv_h1")).toBe(true);
    // prune(150): a2 used at 60 and a1 expired at 100 both ended before 150.
    expect(await store.invites.prune(150)).toBe(2);
    expect(await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM invites").then((r) => Number(r!.n))).toBe(0);
  });

  test("services: put is an upsert per (vault, host); nullable auth fields and enabled round-trip", async () => {
    await open();
    const v = await store.vaults.create("v", 1);
    const base = {
      vaultId: v.id,
      description: "",
      authKey: null,
      authHeader: null,
      authPrefix: null,
      authUsername: null,
      authParam: null,
      authTemplate: null,
      authConfig: null,
      enabled: true,
      rules: null,
      template: null,
      operations: null,
      rulesMode: null,
    } as const;
    await store.services.put({ ...base, host: "b.example.com", authType: "bearer", authKey: "K" }, 10);
    await store.services.put(
      { ...base, host: "a.example.com", authType: "header", authKey: "H", authHeader: "x-api-key", authPrefix: "Key ", enabled: false },
      11,
    );
    expect(await store.services.list(v.id)).toEqual([
      { ...base, host: "a.example.com", authType: "header", authKey: "H", authHeader: "x-api-key", authPrefix: "Key ", enabled: false, updatedAt: 11 },
      { ...base, host: "b.example.com", authType: "bearer", authKey: "K", updatedAt: 10 },
    ]);
    await store.services.put({ ...base, host: "b.example.com", description: "now basic", authType: "basic", authKey: "P", authUsername: "me" }, 20);
    expect(await store.services.get(v.id, "b.example.com")).toEqual({
      ...base,
      host: "b.example.com",
      description: "now basic",
      authType: "basic",
      authKey: "P",
      authUsername: "me",
      updatedAt: 20,
    });
    expect((await store.services.list(v.id)).length).toBe(2);
    const rules = '[{"methods":["GET"],"paths":["/x/**"]}]';
    await store.services.put({ ...base, host: "b.example.com", authType: "bearer", authKey: "K", rules }, 21);
    expect((await store.services.get(v.id, "b.example.com"))?.rules).toBe(rules);
    expect(await store.services.get(v.id, "c.example.com")).toBeUndefined();
    expect(await store.services.remove(v.id, "a.example.com")).toBe(true);
    expect(await store.services.remove(v.id, "a.example.com")).toBe(false);
    expect((await store.services.list(v.id)).map((s) => s.host)).toEqual(["b.example.com"]);
    // URL credentials (migration 9): the query parameter and path template round-trip and are cleared by a put without them.
    await store.services.put({ ...base, host: "q.example.com", authType: "query", authKey: "G", authParam: "key" }, 30);
    await store.services.put({ ...base, host: "p.example.com", authType: "path", authKey: "T", authTemplate: "/bot{value}" }, 31);
    expect(await store.services.get(v.id, "q.example.com")).toEqual({
      ...base,
      host: "q.example.com",
      authType: "query",
      authKey: "G",
      authParam: "key",
      updatedAt: 30,
    });
    expect(await store.services.get(v.id, "p.example.com")).toEqual({
      ...base,
      host: "p.example.com",
      authType: "path",
      authKey: "T",
      authTemplate: "/bot{value}",
      updatedAt: 31,
    });
    await store.services.put({ ...base, host: "q.example.com", authType: "bearer", authKey: "G" }, 32);
    expect(await store.services.get(v.id, "q.example.com")).toEqual({ ...base, host: "q.example.com", authType: "bearer", authKey: "G", updatedAt: 32 });
    // Minted types (migration 11): their fields as JSON in auth_config, cleared by a put without them.
    const config = '{"token_url":"https://idp.example.com/token","client_id":"CID","client_secret":"CSECRET"}';
    await store.services.put({ ...base, host: "m.example.com", authType: "oauth2_client_credentials", authConfig: config }, 34);
    expect(await store.services.get(v.id, "m.example.com")).toEqual({
      ...base,
      host: "m.example.com",
      authType: "oauth2_client_credentials",
      authConfig: config,
      updatedAt: 34,
    });
    // Made from a template (migration 16): its id and the operations chosen round-trip, and are cleared by a put without them.
    await store.services.put({ ...base, host: "t.example.com", authType: "bearer", authKey: "T", template: "github", operations: ["read", "write"] }, 35);
    expect(await store.services.get(v.id, "t.example.com")).toMatchObject({ template: "github", operations: ["read", "write"] });
    await store.services.put({ ...base, host: "t.example.com", authType: "bearer", authKey: "T" }, 36);
    expect(await store.services.get(v.id, "t.example.com")).toMatchObject({ template: null, operations: null });
    // Operations changed outside the broker into something that is not a list of names are refused, naming the column.
    await store.services.put({ ...base, host: "t.example.com", authType: "bearer", authKey: "T", template: "github", operations: ["read"] }, 37);
    await store.db.run("UPDATE services SET operations = ? WHERE host = ?", ['{"read":true}', "t.example.com"]);
    await expect(store.services.get(v.id, "t.example.com")).rejects.toThrow("services row");
    for (const authType of ["oauth2_refresh", "aws_sigv4", "github_app"] as const)
      await store.services.put({ ...base, host: "m.example.com", authType, authConfig: "{}" }, 35);
    await store.services.put({ ...base, host: "m.example.com", authType: "bearer", authKey: "K" }, 36);
    expect((await store.services.get(v.id, "m.example.com"))?.authConfig).toBeNull();
    // The widened CHECK still refuses anything else.
    await expect(store.services.put({ ...base, host: "x.example.com", authType: "cookie" as never, authKey: "K" }, 33)).rejects.toThrow();
  });

  test("services: all lists every vault's rows, enabled or not, by vault then host", async () => {
    await open();
    const [a, b] = [await store.vaults.create("a", 1), await store.vaults.create("b", 1)];
    const row = (vaultId: number, host: string) => ({
      vaultId,
      host,
      description: "",
      authType: "bearer" as const,
      authKey: "K",
      authHeader: null,
      authPrefix: null,
      authUsername: null,
      enabled: vaultId !== b.id,
    });
    for (const [v, h] of [
      [b, "api.example.com"],
      [a, "api.example.com"],
      [a, "*.example.com"],
      [b, "other.example.com:8443"],
    ] as const)
      await store.services.put(row(v.id, h), 1);
    expect((await store.services.all()).map((r) => [r.vaultId, r.host, r.enabled])).toEqual([
      [a.id, "*.example.com", true],
      [a.id, "api.example.com", true],
      [b.id, "api.example.com", false],
      [b.id, "other.example.com:8443", false],
    ]);
  });

  test("settings: JSON values, put is an upsert", async () => {
    await open();
    expect(await store.settings.get("signup")).toBeUndefined();
    await store.settings.put("signup", { domains: ["example.com"], open: false }, 1);
    expect(await store.settings.get("signup")).toEqual({ domains: ["example.com"], open: false });
    await store.settings.put("signup", { domains: [], open: true }, 2);
    expect(await store.settings.get("signup")).toEqual({ domains: [], open: true });
    await store.settings.put("n", 42, 3);
    expect(await store.settings.get("n")).toBe(42);
    expect(Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM settings"))!.n)).toBe(2);
  });

  test("audit: every filter, newest first below `before`, oldest first above `after`, limits", async () => {
    await open();
    const rows = [
      auditRow({ at: 1, vaultId: 1, host: "a.com", status: 200, principal: "user:1" }),
      auditRow({ at: 2, vaultId: 1, host: "b.com", status: 403, principal: "agent:7", service: null, error: "host_not_allowed" }),
      auditRow({ at: 3, vaultId: 2, host: "a.com", status: 200, principal: "user:1" }),
      auditRow({ at: 4, vaultId: 1, host: "a.com", status: 502, principal: "agent:7", bytesIn: 5_000_000_000, bytesOut: 2 ** 40 }),
      auditRow({ at: 5, vaultId: 1, host: "a.com", status: 200, principal: "user:1" }),
    ];
    await store.audit.insert(rows);
    const all = await store.audit.list({ vaultId: 1, limit: 100 });
    expect(all.map((r) => r.at)).toEqual([5, 4, 2, 1]);
    const ids = Object.fromEntries(all.map((r) => [r.at, r.id])) as Record<number, number>;
    expect(all[1]).toEqual({ id: ids[4], ...rows[3] } as AuditRow); // int8 beyond 2^32 come back as exact numbers
    expect(all[2]).toEqual({ id: ids[2], ...rows[1] } as AuditRow); // NULL service, error text
    expect((await store.audit.list({ vaultId: 2, limit: 100 })).map((r) => r.at)).toEqual([3]);
    expect((await store.audit.list({ vaultId: 1, limit: 2 })).map((r) => r.at)).toEqual([5, 4]);
    expect((await store.audit.list({ vaultId: 1, before: ids[4], limit: 100 })).map((r) => r.at)).toEqual([2, 1]);
    expect((await store.audit.list({ vaultId: 1, after: ids[1], limit: 100 })).map((r) => r.at)).toEqual([2, 4, 5]);
    expect((await store.audit.list({ vaultId: 1, after: ids[1], limit: 2 })).map((r) => r.at)).toEqual([2, 4]);
    expect((await store.audit.list({ vaultId: 1, after: ids[1], before: ids[5], limit: 100 })).map((r) => r.at)).toEqual([2, 4]);
    expect((await store.audit.list({ vaultId: 1, host: "a.com", limit: 100 })).map((r) => r.at)).toEqual([5, 4, 1]);
    expect((await store.audit.list({ vaultId: 1, status: 200, limit: 100 })).map((r) => r.at)).toEqual([5, 1]);
    expect((await store.audit.list({ vaultId: 1, principal: "agent:7", limit: 100 })).map((r) => r.at)).toEqual([4, 2]);
    expect((await store.audit.list({ vaultId: 1, host: "a.com", status: 502, principal: "agent:7", limit: 100 })).map((r) => r.at)).toEqual([4]);
    expect(await store.audit.list({ vaultId: 1, host: "c.com", limit: 100 })).toEqual([]);
  });

  test("audit: a batch larger than one INSERT group keeps every row, in order, ids rising", async () => {
    await open();
    const rows = Array.from({ length: 150 }, (_, i) => auditRow({ at: 1000 + i, vaultId: 3, host: `h${i}.com`, status: 200 + (i % 3), principal: "agent:1" }));
    await store.audit.insert(rows);
    const back = await store.audit.list({ vaultId: 3, after: 0, limit: 1000 });
    expect(back.map((r) => r.at)).toEqual(rows.map((r) => r.at));
    expect(back.map((r) => r.host)).toEqual(rows.map((r) => r.host));
    expect(back.every((r, i) => i === 0 || r.id > back[i - 1]!.id)).toBe(true);
    expect(back[149]).toEqual({ id: back[149]!.id, ...rows[149] } as AuditRow);
  });

  test("audit: prune by age, then by row count (the newest rows are kept)", async () => {
    await open();
    await store.audit.insert([1, 2, 3, 4, 5, 6].map((at) => auditRow({ at, vaultId: 1 })));
    const ats = async () => (await store.audit.list({ vaultId: 1, limit: 100 })).map((r) => r.at);
    expect(await store.audit.prune(3, 100)).toBe(2); // at 1 and 2
    expect(await ats()).toEqual([6, 5, 4, 3]);
    expect(await store.audit.prune(0, 3)).toBe(1); // keep the newest 3
    expect(await ats()).toEqual([6, 5, 4]);
    expect(await store.audit.prune(0, 3)).toBe(0);
    expect(await store.audit.prune(100, 3)).toBe(3);
    expect(await store.audit.prune(100, 3)).toBe(0); // empty table
  });

  test("proposals: created pending, listed newest first with and without status, decided once, renewed and expired only while pending", async () => {
    await open();
    const u = await addUser(store, "a@example.com");
    const v = await store.vaults.create("v", 1);
    const other = await store.vaults.create("other", 1);
    const propose = (vaultId: number, tag: string, expiresAt = 1000) =>
      store.proposals.create({
        vaultId,
        message: `m-${tag}`,
        userMessage: `u-${tag}`,
        services: [],
        credentials: [SLOT],
        createdBy: "agent:bot",
        createdAt: 10,
        expiresAt,
        approvalTokenHash: `appr-${tag}`,
        approvalExpiresAt: 500,
      });
    const p1 = await propose(v.id, "1");
    const p2 = await propose(v.id, "2", 50);
    const p3 = await propose(v.id, "3");
    await propose(other.id, "4");
    expect(p1).toEqual({
      id: expect.any(Number),
      vaultId: v.id,
      status: "pending",
      message: "m-1",
      userMessage: "u-1",
      services: [],
      credentials: [SLOT],
      createdBy: "agent:bot",
      viaSession: false,
      createdAt: 10,
      expiresAt: 1000,
      approvalTokenHash: "appr-1",
      approvalExpiresAt: 500,
      decidedAt: null,
      decidedBy: null,
    });
    expect(await store.proposals.byId(p1.id)).toEqual(p1);
    const bySession = await store.proposals.create({
      vaultId: other.id,
      message: "s",
      userMessage: "",
      services: [],
      credentials: [],
      createdBy: "user:1",
      viaSession: true,
      createdAt: 10,
      expiresAt: 1000,
      approvalTokenHash: "appr-s",
      approvalExpiresAt: 500,
    });
    expect((await store.proposals.byId(bySession.id))!.viaSession).toBe(true);
    expect(await store.proposals.byId(p1.id + 1000)).toBeUndefined();
    expect(await store.proposals.countPending(v.id)).toBe(3);

    expect(await store.proposals.decide(p1.id, "applied", u.id, 20)).toBe(true);
    expect(await store.proposals.decide(p1.id, "rejected", u.id, 21)).toBe(false);
    expect(await store.proposals.byId(p1.id)).toEqual({ ...p1, status: "applied", decidedAt: 20, decidedBy: u.id });
    expect(await store.proposals.renewApprovalToken(p1.id, "appr-new", 900)).toBe(false);
    expect(await store.proposals.renewApprovalToken(p3.id, "appr-new", 900)).toBe(true);
    expect(await store.proposals.byId(p3.id)).toMatchObject({ approvalTokenHash: "appr-new", approvalExpiresAt: 900 });

    expect(await store.proposals.expire(50)).toBe(1); // p2 (expires_at 50 <= now)
    expect(await store.proposals.byId(p2.id)).toMatchObject({ status: "expired", decidedAt: 50, decidedBy: null });
    expect(await store.proposals.decide(p2.id, "applied", u.id, 60)).toBe(false);
    expect(await store.proposals.countPending(v.id)).toBe(1);

    expect((await store.proposals.list(v.id, null, 10)).map((p) => [p.id, p.status])).toEqual([
      [p3.id, "pending"],
      [p2.id, "expired"],
      [p1.id, "applied"],
    ]);
    expect((await store.proposals.list(v.id, null, 2)).map((p) => p.id)).toEqual([p3.id, p2.id]);
    expect((await store.proposals.list(v.id, "pending", 10)).map((p) => p.id)).toEqual([p3.id]);
    expect((await store.proposals.list(v.id, "applied", 10)).map((p) => p.id)).toEqual([p1.id]);
    expect(await store.proposals.list(v.id, "rejected", 10)).toEqual([]);
  });

  test("ca: none at first; the newest row is the active one, key bytes exact", async () => {
    await open();
    expect(await store.ca.active()).toBeUndefined();
    await store.ca.insert({ certPem: "PEM-1", keyNonce: bytes(12, 1), keyCiphertext: bytes(80, 2), createdAt: 10, notAfter: 1_900_000_000_000 });
    await store.ca.insert({ certPem: "PEM-2", keyNonce: bytes(12, 3), keyCiphertext: bytes(81, 4), createdAt: 5, notAfter: 2_000_000_000_000 });
    const active = (await store.ca.active())!;
    expect({ ...active, keyNonce: [], keyCiphertext: [] }).toEqual({
      id: expect.any(Number),
      certPem: "PEM-2",
      keyNonce: [],
      keyCiphertext: [],
      createdAt: 5,
      notAfter: 2_000_000_000_000,
    });
    expectBytes(active.keyNonce, bytes(12, 3));
    expectBytes(active.keyCiphertext, bytes(81, 4));
  });

  test("keyring: inserted once (a second create loses and changes nothing), replaced explicitly", async () => {
    await open();
    expect(await store.keyring.get()).toBeUndefined();
    expect(await store.keyring.create({ mode: "plain", dataKey: bytes(32, 11) }, 1)).toBe(true);
    expect(await store.keyring.create({ mode: "plain", dataKey: bytes(32, 99) }, 2)).toBe(false);
    const plain = (await store.keyring.get())!;
    expect(plain.mode).toBe("plain");
    if (plain.mode === "plain") expectBytes(plain.dataKey, bytes(32, 11));
    const wrapped = { mode: "password", wrappedKey: bytes(48, 1), wrapNonce: bytes(12, 2), kdfSalt: bytes(16, 3), kdfParams: '{"m":65536}' } as const;
    await store.keyring.replace(wrapped, 3);
    const got = (await store.keyring.get())!;
    expect(got.mode).toBe("password");
    if (got.mode !== "password") return;
    expectBytes(got.wrappedKey, wrapped.wrappedKey);
    expectBytes(got.wrapNonce, wrapped.wrapNonce);
    expectBytes(got.kdfSalt, wrapped.kdfSalt);
    expect(got.kdfParams).toBe('{"m":65536}');
    // The CHECK constraint refuses a half-written password row.
    await expect(store.db.run("UPDATE keyring SET wrap_nonce = NULL WHERE id = 1")).rejects.toThrow();
    expect(Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM keyring"))!.n)).toBe(1);
  });
});
