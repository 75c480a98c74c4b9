// Secret store connections and their shares (issue 36, migration 22), on every backend: a row round-trips
// (sealed bytes exact), names are unique, updates change what they name, shares are a set, and deleting a
// vault takes its own connections, its shares and its references with it.

import { expect, test } from "bun:test";
import type { Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { bytes } from "./conformance-fixtures.ts";

forEachBackend((backend) => {
  let store: Store;
  const open = async () => (store = await backend.open());
  const connection = (name: string, vaultId: number | null) => ({
    name,
    kind: "vault" as const,
    vaultId,
    settings: JSON.stringify({ kind: "vault", address: "https://vault.example.com", auth: { method: "token" } }),
    secretsNonce: bytes(12, 1),
    secretsCiphertext: bytes(300, 2),
    refreshSeconds: 300,
    graceSeconds: 60,
    createdBy: null,
    createdAt: 10,
  });

  test("secret stores: create, look up, list by name, unique names, update, shares, cascades", async () => {
    await open();
    const v = await store.vaults.create("v", 1);
    const w = await store.vaults.create("w", 1);
    const kv = await store.secretStores.create(connection("kv", null));
    const own = await store.secretStores.create(connection("own", v.id));
    expect(kv).toMatchObject({ name: "kv", kind: "vault", vaultId: null, refreshSeconds: 300, graceSeconds: 60, createdAt: 10, updatedAt: 10 });
    expect(Buffer.from((await store.secretStores.byName("kv"))!.secretsCiphertext).equals(Buffer.from(bytes(300, 2)))).toBe(true);
    expect((await store.secretStores.list()).map((c) => c.name)).toEqual(["kv", "own"]);
    await expect(store.secretStores.create(connection("kv", null))).rejects.toThrow();
    await store.secretStores.update(
      kv.id,
      { settings: "{}", secretsNonce: bytes(12, 3), secretsCiphertext: bytes(5, 4), refreshSeconds: 10, graceSeconds: 0 },
      20,
    );
    expect(await store.secretStores.byName("kv")).toMatchObject({ settings: "{}", refreshSeconds: 10, graceSeconds: 0, updatedAt: 20 });
    await store.secretStores.share(kv.id, v.id, null, 30);
    await store.secretStores.share(kv.id, v.id, null, 31); // a set: sharing twice changes nothing
    await store.secretStores.share(kv.id, w.id, null, 32);
    await store.secretStores.share(kv.id, w.id, ["payments/", "shared/"], 33); // sharing again replaces the prefixes
    expect(await store.secretStores.shares()).toEqual([
      { connectionId: kv.id, vaultId: v.id, pathPrefixes: null },
      { connectionId: kv.id, vaultId: w.id, pathPrefixes: ["payments/", "shared/"] },
    ]);
    expect(await store.secretStores.unshare(kv.id, w.id)).toBe(true);
    expect(await store.secretStores.unshare(kv.id, w.id)).toBe(false);
    await store.credentials.put({ vaultId: v.id, key: "REF", reference: { connection: "own", path: "a/b" } }, 40);
    // Deleting the vault takes its own connection, its shares and its credentials.
    expect(await store.vaults.remove(v.id)).toBe(true);
    expect((await store.secretStores.list()).map((c) => c.name)).toEqual(["kv"]);
    expect(await store.secretStores.shares()).toEqual([]);
    expect(await store.credentials.references()).toEqual([]);
    expect(await store.secretStores.remove(kv.id)).toBe(true);
    expect(await store.secretStores.byName("kv")).toBeUndefined();
  });
});
