// Pending account connections on every backend (migration 17): a state is read once (deleted as it is
// read, so a replay finds nothing), expired rows are pruned, and deleting the person or the vault removes them.

import { expect, test } from "bun:test";
import type { ConnectStateRow, Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser } from "./conformance-fixtures.ts";

forEachBackend((backend) => {
  let store: Store;
  const row = (stateHash: string, userId: number, vaultId: number, expiresAt: number): ConnectStateRow => ({
    stateHash,
    codeVerifier: `verifier-${stateHash}`,
    userId,
    sessionPublicId: "ses_abc",
    vaultId,
    template: "github",
    operations: ["read", "write"],
    expiresAt,
  });
  const count = async () => Number((await store.db.get<{ n: number }>("SELECT COUNT(*) AS n FROM connect_states"))!.n);

  test("connect states: put, take once, prune by expiry", async () => {
    store = await backend.open();
    const u = await addUser(store, "a@example.com");
    const v = await store.vaults.create("v", 1);
    await store.connectStates.put(row("s1", u.id, v.id, 1_000));
    await store.connectStates.put(row("s2", u.id, v.id, 5_000));
    expect(await store.connectStates.take("s1")).toEqual(row("s1", u.id, v.id, 1_000));
    expect(await store.connectStates.take("s1")).toBeUndefined(); // single use
    expect(await store.connectStates.take("nope")).toBeUndefined();
    await store.connectStates.put(row("s3", u.id, v.id, 2_000));
    expect(await store.connectStates.prune(2_000)).toBe(1); // s3: expires_at <= now
    expect(await store.connectStates.take("s2")).toEqual(row("s2", u.id, v.id, 5_000));
  });

  test("connect states go with their person and their vault", async () => {
    store = await backend.open();
    const [gone, stays] = [await addUser(store, "gone@example.com"), await addUser(store, "stays@example.com")];
    const [v, w] = [await store.vaults.create("v", 1), await store.vaults.create("w", 1)];
    await store.connectStates.put(row("a", gone.id, v.id, 9_000));
    await store.connectStates.put(row("b", stays.id, v.id, 9_000));
    await store.connectStates.put(row("c", stays.id, w.id, 9_000));
    await store.db.run("DELETE FROM users WHERE id = ?", [gone.id]);
    expect(await count()).toBe(2);
    await store.db.run("DELETE FROM vaults WHERE id = ?", [w.id]);
    expect(await count()).toBe(1);
    expect((await store.connectStates.take("b"))?.userId).toBe(stays.id);
  });
});
