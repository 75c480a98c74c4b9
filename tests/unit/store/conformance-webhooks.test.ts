// The webhooks repository on every backend: sealed secret bytes round-trip, list order, per-vault
// removal, delivery status, the vault-and-URL uniqueness and the cascade when a vault is deleted.

import { expect, test } from "bun:test";
import type { Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { bytes } from "./conformance-fixtures.ts";

forEachBackend((backend) => {
  let store: Store;

  test("webhooks: create, byId, list, count, record delivery, unique URL per vault, remove, cascade", async () => {
    store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const other = await store.vaults.create("other", 1);
    const nonce = bytes(12, 3);
    const ciphertext = bytes(300, 9);
    const a = await store.webhooks.create({
      vaultId: v.id,
      url: "https://a.example/hook",
      format: "json",
      secretNonce: nonce,
      secretCiphertext: ciphertext,
      createdBy: null,
      createdAt: 10,
    });
    expect({ ...a, secretNonce: [...a.secretNonce], secretCiphertext: [...a.secretCiphertext] }).toEqual({
      id: expect.any(Number),
      vaultId: v.id,
      url: "https://a.example/hook",
      format: "json",
      secretNonce: [...nonce],
      secretCiphertext: [...ciphertext],
      createdBy: null,
      createdAt: 10,
      lastStatus: null,
      lastEvent: null,
      lastAttempts: 0,
      lastError: null,
      lastAttemptAt: null,
    });
    expect(a.secretCiphertext.constructor).toBe(Uint8Array);
    const b = await store.webhooks.create({
      vaultId: v.id,
      url: "https://b.example/",
      format: "slack",
      secretNonce: nonce,
      secretCiphertext: ciphertext,
      createdBy: null,
      createdAt: 11,
    });
    await expect(
      store.webhooks.create({
        vaultId: v.id,
        url: "https://a.example/hook",
        format: "json",
        secretNonce: nonce,
        secretCiphertext: ciphertext,
        createdBy: null,
        createdAt: 12,
      }),
    ).rejects.toThrow();
    await store.webhooks.create({
      vaultId: other.id,
      url: "https://a.example/hook",
      format: "json",
      secretNonce: nonce,
      secretCiphertext: ciphertext,
      createdBy: null,
      createdAt: 12,
    });
    expect((await store.webhooks.list(v.id)).map((w) => w.id)).toEqual([a.id, b.id]);
    expect(await store.webhooks.count(v.id)).toBe(2);
    expect(
      await store.webhooks.recordDelivery(a.id, {
        status: "retrying",
        event: "proposal.created",
        attempts: 2,
        error: "the receiver answered HTTP 500",
        at: 99,
      }),
    ).toBe(true);
    expect(await store.webhooks.byId(a.id)).toMatchObject({
      lastStatus: "retrying",
      lastEvent: "proposal.created",
      lastAttempts: 2,
      lastError: "the receiver answered HTTP 500",
      lastAttemptAt: 99,
    });
    expect(await store.webhooks.remove(other.id, a.id)).toBe(false); // another vault's id
    expect(await store.webhooks.remove(v.id, a.id)).toBe(true);
    expect(await store.webhooks.recordDelivery(a.id, { status: "delivered", event: "proposal.created", attempts: 3, error: null, at: 100 })).toBe(false);
    expect(await store.webhooks.byId(a.id)).toBeUndefined();
    await store.vaults.remove(v.id);
    expect(await store.webhooks.byId(b.id)).toBeUndefined();
    expect(await store.webhooks.count(other.id)).toBe(1);
  });
});
