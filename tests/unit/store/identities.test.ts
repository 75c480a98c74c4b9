// Identity store: (issuer, subject) unique, cascade on user delete, states and CLI codes single use.

import { expect, test } from "bun:test";
import { forEachBackend, type Backend } from "../../helpers/store-backends.ts";

async function setup(backend: Backend) {
  const store = await backend.open();
  const user = await store.users.create({
    email: "a@example.com",
    passwordHash: new Uint8Array(32),
    passwordSalt: new Uint8Array(16),
    passwordParams: "{}",
    role: "owner",
    createdAt: 1,
  });
  return { store, user };
}

forEachBackend((backend) => {
  test("an identity belongs to one user; the pair (issuer, subject) is unique", async () => {
    const { store, user } = await setup(backend);
    const row = await store.identities.create({ userId: user.id, issuer: "https://idp", subject: "s1", email: "a@example.com", createdAt: 5 });
    expect(await store.identities.bySubject("https://idp", "s1")).toEqual(row);
    expect(await store.identities.bySubject("https://other", "s1")).toBeUndefined();
    await expect(store.identities.create({ userId: user.id, issuer: "https://idp", subject: "s1", email: "x@example.com", createdAt: 6 })).rejects.toThrow();
    expect(await store.identities.forUser(user.id)).toEqual([row]);
    expect(await store.identities.remove(row.id, user.id + 1)).toBe(false);
    expect(await store.identities.remove(row.id, user.id)).toBe(true);
    expect(await store.identities.forUser(user.id)).toEqual([]);
  });

  test("deleting a user deletes its identities", async () => {
    const { store, user } = await setup(backend);
    await store.identities.create({ userId: user.id, issuer: "https://idp", subject: "s1", email: "a@example.com", createdAt: 5 });
    await store.db.run("DELETE FROM users WHERE id = ?", [user.id]);
    expect(await store.identities.bySubject("https://idp", "s1")).toBeUndefined();
  });

  test("a state is taken once, and pruning removes expired ones", async () => {
    const { store, user } = await setup(backend);
    const state = {
      stateHash: "h1",
      nonce: "n",
      codeVerifier: "v",
      purpose: "link" as const,
      userId: user.id,
      returnTo: null,
      cliPort: null,
      cliNonce: null,
      expiresAt: 100,
    };
    await store.identities.putState(state);
    await store.identities.putState({ ...state, stateHash: "h2", purpose: "cli", userId: null, cliPort: 5000, cliNonce: "c", expiresAt: 10 });
    expect(await store.identities.takeState("h1")).toEqual(state);
    expect(await store.identities.takeState("h1")).toBeUndefined();
    expect(await store.identities.pruneStates(50)).toBe(1);
    expect(await store.identities.takeState("h2")).toBeUndefined();
  });

  test("a CLI code is taken once", async () => {
    const { store, user } = await setup(backend);
    await store.identities.putCliCode({ codeHash: "c1", userId: user.id, cliNonce: "n", expiresAt: 9 });
    expect(await store.identities.takeCliCode("c1")).toEqual({ codeHash: "c1", userId: user.id, cliNonce: "n", expiresAt: 9 });
    expect(await store.identities.takeCliCode("c1")).toBeUndefined();
  });
});
