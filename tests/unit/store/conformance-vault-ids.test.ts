// A vault's id names its audit records and hash chain, which outlive the vault (issue 37): on every backend a
// deleted vault's id is never given to a new one, so a new vault never shows or continues another's log.

import { expect, test } from "bun:test";
import { forEachBackend } from "../../helpers/store-backends.ts";

forEachBackend((backend) => {
  test("a deleted vault's id is never given to a new vault: its audit records and chain outlive it", async () => {
    const store = await backend.open();
    await store.vaults.create("first", 1);
    const last = await store.vaults.create("last", 1);
    await store.audit.insert([
      {
        at: 1,
        principal: "user:1",
        vaultId: last.id,
        vault: "last",
        ingress: "explicit",
        method: "GET",
        host: "h",
        path: "/",
        service: null,
        credentialKeys: "",
        status: 200,
        bytesIn: 0,
        bytesOut: 0,
        durationMs: 1,
        error: null,
        contained: false,
        approvedBy: null,
      },
    ]);
    await store.auditChains.lockHead(last.id);
    expect(await store.vaults.remove(last.id)).toBe(true);
    const next = await store.vaults.create("next", 2);
    expect(next.id).toBeGreaterThan(last.id);
    expect(await store.audit.list({ vaultId: next.id, limit: 10 })).toEqual([]);
    expect(await store.auditChains.get(next.id)).toBeUndefined();
  });
});
