// Vaults kept as code in the store (migration 29, src/store/vault-code.ts), on every backend: a vault starts unmanaged
// with nothing declared, its flag and declarations round-trip, a vault's grants are listed and taken away one by one,
// a member removed; and `broker apply`'s transaction (workflows/vault-apply.ts) on each backend: a dry run rolls back
// everything it did, an apply commits it all, a second apply changes nothing, and a failing file leaves nothing behind.

import { expect, test } from "bun:test";
import { unlockKeyring } from "../../../src/crypto/index.ts";
import { createAuthenticator, type Domain, type UserPrincipal } from "../../../src/identity/index.ts";
import { createLoginThrottle } from "../../../src/ratelimit/index.ts";
import type { Store } from "../../../src/store/index.ts";
import { applyVaultFile, type VaultCodeFile } from "../../../src/workflows/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser } from "./conformance-fixtures.ts";

async function domainOn(store: Store): Promise<Domain> {
  const now = () => 1_000;
  const keyring = await unlockKeyring(store, undefined, { now });
  return {
    store,
    dataKey: keyring.dataKey,
    auth: createAuthenticator(store, { now, cacheTtlMs: 0 }),
    hashing: { run: (fn) => fn() } as Domain["hashing"],
    now,
    publicUrl: "http://broker.test",
    proxyUrl: "http://broker.test:14322",
    loginThrottle: createLoginThrottle({ now }),
  };
}

const person = (userId: number): UserPrincipal => ({
  kind: "user",
  id: `user:${userId}`,
  userId,
  email: "owner@example.com",
  instanceRole: "owner",
  sessionId: 1,
  sessionPublicId: "ses_1",
  expiresAt: null,
});

forEachBackend((backend) => {
  test("a vault starts unmanaged; its flag and declarations round-trip; grants and members are taken away one by one", async () => {
    const store = await backend.open();
    const vault = await store.vaults.create("pay", 1);
    expect(await store.vaultCode.state(vault.id)).toEqual({ managed: false, declared: null });
    const declared = { values: ["STRIPE_KEY"], agents: { "ci-bot": "proxy" as const }, members: { "a@example.com": "admin" as const } };
    await store.vaultCode.set(vault.id, { managed: true, declared });
    expect(await store.vaultCode.state(vault.id)).toEqual({ managed: true, declared });
    await store.vaultCode.set(vault.id, { managed: false, declared: null });
    expect(await store.vaultCode.state(vault.id)).toEqual({ managed: false, declared: null });

    const bot = await store.agents.create({ name: "bot", role: "member", createdBy: null, createdAt: 1 });
    const zed = await store.agents.create({ name: "zed", role: "member", createdBy: null, createdAt: 1 });
    await store.access.setGrant(vault.id, zed.id, "admin", 1);
    await store.access.setGrant(vault.id, bot.id, "proxy", 1);
    expect((await store.access.grantsInVault(vault.id)).map((g) => [g.agentName, g.role])).toEqual([
      ["bot", "proxy"],
      ["zed", "admin"],
    ]);
    expect(await store.access.removeGrant(vault.id, bot.id)).toBe(true);
    expect(await store.access.removeGrant(vault.id, bot.id)).toBe(false);
    expect((await store.access.grantsInVault(vault.id)).map((g) => g.agentName)).toEqual(["zed"]);
    const user = await addUser(store, "a@example.com");
    await store.access.setMember(vault.id, user.id, "member", 1);
    expect(await store.access.removeMember(vault.id, user.id)).toBe(true);
    expect(await store.access.members(vault.id)).toEqual([]);
  });

  test("apply runs in one transaction: a dry run rolls back, an apply commits, a second changes nothing, a failure leaves nothing", async () => {
    const store = await backend.open();
    const d = await domainOn(store);
    const p = person((await addUser(store, "owner@example.com", "owner")).id);
    const file: VaultCodeFile = {
      vaults: {
        pay: {
          managed: true,
          unmatched_hosts: "deny",
          services: [{ host: "api.example.com", description: "", enabled: true, auth: { type: "bearer", token: "EX_KEY" } }],
          credentials: [{ key: "EX_KEY" }],
          budgets: { daily: { scope: "vault", period: "day", limits: { requests: 10 } } },
        },
      },
    };
    const dry = await applyVaultFile(d, p, file, { dryRun: true });
    expect(dry.changes).toBe(5);
    expect(await store.vaults.byName("pay")).toBeUndefined();
    const done = await applyVaultFile(d, p, file, { dryRun: false });
    expect(done.vaults).toEqual(dry.vaults);
    const vault = (await store.vaults.byName("pay"))!;
    expect(vault.unmatchedHosts).toBe("deny");
    expect(await store.vaultCode.state(vault.id)).toEqual({ managed: true, declared: { values: ["EX_KEY"], agents: {}, members: {} } });
    expect((await applyVaultFile(d, p, file, { dryRun: false })).changes).toBe(0);

    const failing: VaultCodeFile = {
      vaults: {
        pay: { unmatched_hosts: "tunnel" },
        other: {
          webhooks: [
            { url: "https://hooks.example.com/a", format: "json" },
            { url: "https://hooks.example.com/a", format: "slack" },
          ],
        },
      },
    };
    await expect(applyVaultFile(d, p, failing, { dryRun: false })).rejects.toThrow("already has a webhook with that url");
    expect((await store.vaults.byName("pay"))!.unmatchedHosts).toBe("deny");
    expect(await store.vaults.byName("other")).toBeUndefined();
  });
});
