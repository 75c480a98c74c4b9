// On every backend: a vault's counts (credentials, services, agents, members, pending proposals, held
// requests pending and unexpired) in one statement, the pending counts of every vault by name in one
// grouped statement, and a session's origin columns (migration 18) as stored, cut to their bounds.

import { expect, test } from "bun:test";
import type { Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { addUser, bytes, newSession } from "./conformance-fixtures.ts";

forEachBackend((backend) => {
  let store: Store;

  async function propose(vaultId: number, tag: string) {
    return store.proposals.create({
      vaultId,
      message: tag,
      userMessage: "",
      services: [],
      credentials: [],
      createdBy: "agent:1",
      createdAt: 10,
      expiresAt: 1000,
      approvalTokenHash: `appr-${tag}`,
      approvalExpiresAt: 500,
    });
  }

  async function hold(vaultId: number, tag: string, expiresAt = 1000) {
    return store.requestApprovals.create({
      publicId: `apr_${tag.padEnd(16, "x")}`,
      vaultId,
      principal: "agent:1",
      viaSession: false,
      fingerprint: tag.padEnd(64, "0"),
      method: "POST",
      host: "api.example.com",
      target: "/",
      service: "api.example.com",
      headers: [],
      bodyPreview: null,
      bodyBytes: 0,
      bodySha256: "e".repeat(64),
      createdAt: 100,
      expiresAt,
      sealedNonce: null,
      sealedDescription: null,
    });
  }

  test("vault counts: each table counted for its vault only; decided proposals and expired or decided held requests left out", async () => {
    store = await backend.open();
    const [v, w, quiet] = [await store.vaults.create("v", 1), await store.vaults.create("w", 1), await store.vaults.create("quiet", 1)];
    expect(await store.vaultCounts.of(v.id, 200)).toEqual({ credentials: 0, services: 0, agents: 0, members: 0, proposals: 0, requests: 0 });

    for (const key of ["A", "B"]) await store.credentials.put({ vaultId: v.id, key, nonce: bytes(12, 0), ciphertext: bytes(17, 0) }, 1);
    await store.credentials.put({ vaultId: w.id, key: "A", nonce: bytes(12, 0), ciphertext: bytes(17, 0) }, 1);
    const service = {
      description: "",
      authType: "bearer",
      authKey: "A",
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
    } as const;
    await store.services.put({ ...service, vaultId: v.id, host: "a.example.com" }, 1);
    const u = await addUser(store, "a@example.com");
    await store.access.setMember(v.id, u.id, "admin", 1);
    await store.access.setMember(w.id, u.id, "proxy", 1);
    const agent = await store.agents.create({ name: "bot", role: "member", createdBy: null, createdAt: 1 });
    await store.access.setGrant(v.id, agent.id, "proxy", 1);

    const p1 = await propose(v.id, "1");
    await propose(v.id, "2");
    await propose(w.id, "3");
    expect(await store.proposals.decide(p1.id, "applied", u.id, 20)).toBe(true);
    const decided = await hold(v.id, "a");
    await hold(v.id, "b");
    await hold(v.id, "c", 150); // expires before the count's "now"
    await hold(w.id, "d");
    expect(await store.requestApprovals.decide(decided.id, "approved", u.id, 120)).toBe(true);

    expect(await store.vaultCounts.of(v.id, 200)).toEqual({ credentials: 2, services: 1, agents: 1, members: 1, proposals: 1, requests: 1 });
    expect(await store.vaultCounts.of(w.id, 200)).toEqual({ credentials: 1, services: 0, agents: 0, members: 1, proposals: 1, requests: 1 });
    expect(await store.vaultCounts.of(quiet.id, 200)).toEqual({ credentials: 0, services: 0, agents: 0, members: 0, proposals: 0, requests: 0 });
    // At 100 the third held request has not expired yet.
    expect((await store.vaultCounts.of(v.id, 100)).requests).toBe(2);

    const pending = await store.vaultCounts.pendingByVault(200);
    expect(Object.fromEntries(pending)).toEqual({ v: { proposals: 1, requests: 1 }, w: { proposals: 1, requests: 1 } });
    expect(pending.has("quiet")).toBe(false);
    await store.proposals.decide((await propose(quiet.id, "4")).id, "rejected", u.id, 30);
    await hold(quiet.id, "e");
    expect((await store.vaultCounts.pendingByVault(200)).get("quiet")).toEqual({ proposals: 0, requests: 1 });
  });

  test("sessions keep how they were made, the client's User-Agent (cut to 256 characters) and address; absent means null", async () => {
    store = await backend.open();
    const u = await addUser(store, "a@example.com");
    const long = `agent/${"x".repeat(400)}`;
    const made = await store.sessions.create({
      ...newSession("o", { userId: u.id }),
      channel: "form",
      clientAgent: long,
      clientAddress: "2001:db8::1",
    });
    expect(made).toMatchObject({ channel: "form", clientAgent: long.slice(0, 256), clientAddress: "2001:db8::1" });
    expect(await store.sessions.byPublicId("ses_o")).toEqual(made);
    const bare = await store.sessions.create(newSession("bare", { userId: u.id }));
    expect(bare).toMatchObject({ channel: null, clientAgent: null, clientAddress: null });
    expect((await store.sessions.activeForUser(u.id, 20, 0, 100)).map((s) => [s.publicId, s.channel, s.clientAddress])).toEqual([
      ["ses_o", "form", "2001:db8::1"],
      ["ses_bare", null, null],
    ]);
  });
});
