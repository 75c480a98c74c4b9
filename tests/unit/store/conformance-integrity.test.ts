// Referential integrity and transactions, on every backend: what deleting a vault, a user or an agent
// takes with it (ON DELETE CASCADE) or leaves behind unowned (ON DELETE SET NULL), as
// src/store/schema.ts declares; and that a transaction commits whole or not at all.

import { expect, test } from "bun:test";
import { Conflict } from "../../../src/errors.ts";
import type { Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser, auditRow, bytes, newSession } from "./conformance-fixtures.ts";

/** Tables holding rows that belong to a vault (column vault_id). */
const VAULT_TABLES = ["credentials", "services", "vault_members", "agent_grants", "invites", "sessions", "proposals"] as const;

async function countWhere(store: Store, table: string, column: string, id: number): Promise<number> {
  return Number((await store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table} WHERE ${column} = ?`, [id]))!.n);
}

async function vaultCounts(store: Store, vaultId: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const t of VAULT_TABLES) out[t] = await countWhere(store, t, "vault_id", vaultId);
  return out;
}

/** A vault with one row in every table that belongs to a vault, and one audit row. */
async function fillVault(store: Store, name: string, who: { userId: number; agentId: number; creatorId: number }) {
  const v = await store.vaults.create(name, 1);
  await store.credentials.put({ vaultId: v.id, key: "K", nonce: bytes(12, 1), ciphertext: bytes(20, 2) }, 1);
  await store.services.put(
    {
      vaultId: v.id,
      host: "api.example.com",
      description: "",
      authType: "bearer",
      authKey: "K",
      authHeader: null,
      authPrefix: null,
      authUsername: null,
      enabled: true,
    },
    1,
  );
  await store.access.setMember(v.id, who.userId, "member", 1);
  await store.access.setGrant(v.id, who.agentId, "proxy", 1);
  await store.invites.create({
    publicId: `inv_${name}`,
    tokenHash: `inv-hash-${name}`,
    kind: "vault",
    vaultId: v.id,
    role: "member",
    email: null,
    agentName: null,
    agentTokenTtlMs: null,
    createdBy: who.creatorId,
    createdAt: 1,
    expiresAt: 1000,
  });
  await store.sessions.create(newSession(`scoped-${name}`, { kind: "scoped", userId: who.userId, vaultId: v.id, role: "proxy" }));
  await store.proposals.create({
    vaultId: v.id,
    message: "m",
    userMessage: "u",
    services: [],
    credentials: [],
    createdBy: "agent:bot",
    createdAt: 1,
    expiresAt: 1000,
    approvalTokenHash: `appr-${name}`,
    approvalExpiresAt: 1000,
  });
  await store.audit.insert([auditRow({ vaultId: v.id, vault: name })]);
  return v;
}

const ONE_EACH = Object.fromEntries(VAULT_TABLES.map((t) => [t, 1]));
const NONE = Object.fromEntries(VAULT_TABLES.map((t) => [t, 0]));

forEachBackend((backend) => {
  test("deleting a vault removes everything that belongs to it, and only that; its audit rows outlive it", async () => {
    const store = await backend.open();
    const user = await addUser(store, "m@example.com");
    const creator = await addUser(store, "c@example.com");
    const agent = await store.agents.create({ name: "bot", role: "member", createdBy: null, createdAt: 1 });
    const who = { userId: user.id, agentId: agent.id, creatorId: creator.id };
    const doomed = await fillVault(store, "doomed", who);
    const kept = await fillVault(store, "kept", who);
    expect(await vaultCounts(store, doomed.id)).toEqual(ONE_EACH);

    expect(await store.vaults.remove(doomed.id)).toBe(true);
    expect(await vaultCounts(store, doomed.id)).toEqual(NONE);
    expect(await vaultCounts(store, kept.id)).toEqual(ONE_EACH);
    expect(await countWhere(store, "audit_logs", "vault_id", doomed.id)).toBe(1); // no foreign key: the record outlives the vault
    // The people and agents themselves stay.
    expect(await store.users.count()).toBe(2);
    expect((await store.agents.page({ kind: "all" }, "", 100)).map((a) => a.name)).toEqual(["bot"]);
  });

  test("deleting a user removes their sessions, memberships, identities, sign-in states and invites; agents and decisions they made lose the link", async () => {
    const store = await backend.open();
    const [gone, stays] = [await addUser(store, "gone@example.com"), await addUser(store, "stays@example.com")];
    const agent = await store.agents.create({ name: "made-by-gone", role: "member", createdBy: gone.id, createdAt: 1 });
    const v = await fillVault(store, "v", { userId: gone.id, agentId: agent.id, creatorId: gone.id });
    await store.sessions.create(newSession("gone-user", { userId: gone.id }));
    await store.sessions.create(newSession("stays-user", { userId: stays.id }));
    await store.access.setMember(v.id, stays.id, "admin", 1);
    await store.identities.create({ userId: gone.id, issuer: "https://idp", subject: "s", email: gone.email, createdAt: 1 });
    await store.identities.putState({
      stateHash: "st",
      nonce: "n",
      codeVerifier: "cv",
      purpose: "link",
      userId: gone.id,
      returnTo: null,
      cliPort: null,
      cliNonce: null,
      expiresAt: 9,
    });
    await store.identities.putCliCode({ codeHash: "cc", userId: gone.id, cliNonce: "n", expiresAt: 9 });
    const [proposal] = await store.proposals.list(v.id, "pending", 1);
    expect(await store.proposals.decide(proposal!.id, "rejected", gone.id, 5)).toBe(true);

    expect(await store.db.run("DELETE FROM users WHERE id = ?", [gone.id])).toBe(1);
    const owned = [
      ["sessions", "user_id"],
      ["vault_members", "user_id"],
      ["user_identities", "user_id"],
      ["oidc_states", "user_id"],
      ["oidc_cli_codes", "user_id"],
      ["invites", "created_by"],
    ] as const;
    for (const [table, column] of owned) {
      expect({ table, n: await countWhere(store, table, column, gone.id) }).toEqual({ table, n: 0 });
    }
    // ON DELETE SET NULL: the agent and the decision stay, without their author.
    expect(await store.agents.byId(agent.id)).toEqual({ ...agent, createdBy: null });
    expect(await store.proposals.byId(proposal!.id)).toMatchObject({ status: "rejected", decidedAt: 5, decidedBy: null });
    // Everything else is untouched.
    expect((await store.sessions.activeForUser(stays.id, 0, 0, 100)).map((s) => s.publicId)).toEqual(["ses_stays-user"]);
    expect(await store.access.members(v.id)).toEqual([{ userId: stays.id, email: "stays@example.com", role: "admin" }]);
    expect(await store.access.grantRole(v.id, agent.id)).toBe("proxy");
    expect(await store.credentials.keys(v.id)).toEqual(["K"]);
  });

  test("deleting an agent removes its sessions and grants, and only those", async () => {
    const store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const [gone, stays] = [
      await store.agents.create({ name: "gone", role: "member", createdBy: null, createdAt: 1 }),
      await store.agents.create({ name: "stays", role: "member", createdBy: null, createdAt: 1 }),
    ];
    for (const a of [gone, stays]) {
      await store.access.setGrant(v.id, a.id, "proxy", 1);
      await store.sessions.create(newSession(`agent-${a.name}`, { kind: "agent", agentId: a.id }));
      await store.sessions.create(newSession(`scoped-${a.name}`, { kind: "scoped", agentId: a.id, vaultId: v.id, role: "proxy" }));
    }
    expect(await store.agents.remove(gone.id)).toBe(true);
    expect(await countWhere(store, "sessions", "agent_id", gone.id)).toBe(0);
    expect(await countWhere(store, "agent_grants", "agent_id", gone.id)).toBe(0);
    expect(await store.sessions.countActiveForAgent(stays.id, 0)).toBe(2);
    expect(await store.access.grantsOfAgent(stays.id)).toEqual([{ vaultId: v.id, vaultName: "v", role: "proxy" }]);
  });

  test("a transaction's value is returned and its writes are committed together", async () => {
    const store = await backend.open();
    const result = await store.transaction(async (tx) => {
      const v = await tx.vaults.create("v", 1);
      await tx.credentials.put({ vaultId: v.id, key: "K", nonce: bytes(12, 0), ciphertext: bytes(17, 0) }, 1);
      expect(await tx.credentials.keys(v.id)).toEqual(["K"]); // reads inside see the transaction's own writes
      return { id: v.id, tag: "done" };
    });
    expect(result).toEqual({ id: expect.any(Number), tag: "done" });
    expect(await store.vaults.byId(result.id)).toMatchObject({ name: "v" });
    expect(await store.credentials.keys(result.id)).toEqual(["K"]);
  });

  test("a transaction that throws rolls back every write and rethrows the same error", async () => {
    const store = await backend.open();
    const before = await store.vaults.create("before", 1);
    const boom = new Error("boom");
    const failed = store.transaction(async (tx) => {
      const v = await tx.vaults.create("rolled-back", 1);
      await tx.credentials.put({ vaultId: before.id, key: "K", nonce: bytes(12, 0), ciphertext: bytes(17, 0) }, 1);
      await tx.settings.put("s", 1, 1);
      await tx.vaults.setUnmatchedHosts(before.id, "deny");
      await tx.vaults.remove(v.id);
      await tx.vaults.create("also-rolled-back", 1);
      throw boom;
    });
    await expect(failed).rejects.toBe(boom);
    expect((await store.vaults.list()).map((v) => v.name)).toEqual(["before"]);
    expect(await store.vaults.byId(before.id)).toEqual(before);
    expect(await store.credentials.keys(before.id)).toEqual([]);
    expect(await store.settings.get("s")).toBeUndefined();
  });

  test("a statement failing inside a transaction (a constraint) rolls back the writes before it", async () => {
    const store = await backend.open();
    await store.vaults.create("taken", 1);
    const failed = store.transaction(async (tx) => {
      await tx.vaults.create("fresh", 1);
      await tx.vaults.create("taken", 2); // UNIQUE (name)
    });
    await expect(failed).rejects.toThrow();
    expect((await store.vaults.list()).map((v) => v.name)).toEqual(["taken"]);
    // The store is still usable afterwards (the connection was not left inside a failed transaction).
    expect((await store.vaults.create("after", 3)).name).toBe("after");
  });

  test("a reader outside an open transaction never sees a write that is then rolled back", async () => {
    const store = await backend.open();
    let entered!: () => void;
    const inside = new Promise<void>((r) => (entered = r));
    let finish!: () => void;
    const done = new Promise<void>((r) => (finish = r));
    const tx = store.transaction(async (t) => {
      await t.vaults.create("uncommitted", 1);
      entered();
      await done;
      throw new Error("roll back");
    });
    await inside;
    // SQLite makes this reader wait for the transaction; PostgreSQL answers at once from committed data.
    const seen = store.vaults.list().then((l) => l.map((v) => v.name));
    setTimeout(finish, 20);
    await expect(tx).rejects.toThrow("roll back");
    expect(await seen).toEqual([]);
    expect(await store.vaults.list()).toEqual([]);
  });

  test("keyring.lock() inside a transaction makes another transaction's lock wait until the first ends", async () => {
    const store = await backend.open();
    await store.keyring.create({ mode: "plain", dataKey: bytes(32, 0) }, 1);
    const events: string[] = [];
    let locked!: () => void;
    const holding = new Promise<void>((r) => (locked = r));
    const first = store.transaction(async (tx) => {
      await tx.keyring.lock();
      locked();
      await Bun.sleep(50);
      events.push("first ends");
    });
    await holding;
    const second = store.transaction(async (tx) => {
      await tx.keyring.lock();
      events.push("second locked");
    });
    await Promise.all([first, second]);
    expect(events).toEqual(["first ends", "second locked"]);
    expect((await store.keyring.get())?.mode).toBe("plain"); // the lock changes nothing
  });
});

forEachBackend((backend) => {
  test("a unique violation (two requests that raced past the domain's own check) is a 409 Conflict, not a raw database error", async () => {
    const store = await backend.open();
    await store.vaults.create("twin", 1);
    const err = await store.vaults.create("twin", 2).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Conflict);
    expect((err as Conflict).status).toBe(409);
    expect((await store.vaults.list()).filter((v) => v.name === "twin")).toHaveLength(1);
  });
});
