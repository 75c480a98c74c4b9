// The workload-identity repository (migration 30) on every backend: issuers and bindings round-trip (audiences and
// conditions as JSON), bindings listed in the order they were made, removals cascade, the binding's agent is nulled
// when the agent goes, and a token id is claimed once while it is valid (one statement, so concurrent claims race
// safely) and is free again after it expired; token ids are kept per iss (migration 33, which carries older ones over).

import { expect, test } from "bun:test";
import { createStore, MIGRATIONS, migrate, type Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const ISS = "https://iss.example";

forEachBackend((backend) => {
  let store: Store;

  test("workload issuers, bindings and token ids", async () => {
    store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const agent = await store.agents.create({ name: "wl-gh-b", role: "member", createdBy: null, createdAt: 1 });
    const issuer = await store.workload.addIssuer({
      name: "gh",
      issuer: "https://iss.example",
      jwksUrl: null,
      jwks: null,
      requireJti: false,
      audiences: ["a", "b"],
      clockSkewSeconds: 60,
      createdAt: 5,
    });
    expect(issuer).toEqual({
      id: expect.any(Number),
      name: "gh",
      issuer: "https://iss.example",
      jwksUrl: null,
      jwks: null,
      requireJti: false,
      audiences: ["a", "b"],
      clockSkewSeconds: 60,
      createdAt: 5,
    });
    expect(await store.workload.issuersFor("https://iss.example")).toEqual([issuer]);
    expect(await store.workload.issuerByName("gh")).toEqual(issuer);
    const conditions = { sub: "repo:o/r:*", "kubernetes.io/namespace": ["ci", "ops-*"] };
    const b = await store.workload.addBinding({
      issuerId: issuer.id,
      name: "b",
      conditions,
      vaultId: v.id,
      role: "proxy",
      maxSessionSeconds: 900,
      agentId: agent.id,
      createdAt: 6,
    });
    const c = await store.workload.addBinding({
      issuerId: issuer.id,
      name: "a",
      conditions: { sub: "x" },
      vaultId: v.id,
      role: "member",
      maxSessionSeconds: 60,
      agentId: null,
      createdAt: 7,
    });
    expect((await store.workload.bindings(issuer.id)).map((r) => r.name)).toEqual(["b", "a"]);
    expect(b).toMatchObject({ conditions, agentId: agent.id, maxSessionSeconds: 900 });
    await store.agents.remove(agent.id);
    expect((await store.workload.bindings(issuer.id))[0]!.agentId).toBeNull();
    expect(await store.workload.removeBinding(issuer.id, "a")).toMatchObject({ id: c.id });
    expect(await store.workload.removeBinding(issuer.id, "a")).toBeUndefined();

    expect(await store.workload.claimJti(ISS, "j", 100, 10)).toBe(true);
    expect(await store.workload.claimJti(ISS, "j", 100, 50)).toBe(false);
    const both = await Promise.all([store.workload.claimJti(ISS, "k", 100, 10), store.workload.claimJti(ISS, "k", 100, 10)]);
    expect(both.filter(Boolean)).toHaveLength(1);
    expect(await store.workload.claimJti(ISS, "j", 300, 100)).toBe(true); // expired at 100: free again
    expect(await store.workload.pruneJtis(200)).toBe(1); // k
    // A workload session's expiry moves later for the same agent and subject only, and only while it is live.
    const a2 = await store.agents.create({ name: "wl-gh-c", role: "member", createdBy: null, createdAt: 1 });
    const base = { tokenHash: "h1", kind: "scoped" as const, userId: null, vaultId: v.id, role: "proxy", createdAt: 10, lastSeenAt: 10 };
    const s = await store.sessions.create({ ...base, publicId: "ses_w1", agentId: a2.id, expiresAt: 100, workloadSubject: "repo:o/r", workloadIssuer: ISS });
    expect(s.workloadSubject).toBe("repo:o/r");
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id, issuer: ISS, subject: "repo:o/other", expiresAt: 500 }, 50)).toBe(false);
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id, issuer: "https://other.example", subject: "repo:o/r", expiresAt: 500 }, 50)).toBe(false);
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id + 1000, issuer: ISS, subject: "repo:o/r", expiresAt: 500 }, 50)).toBe(false);
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id, issuer: ISS, subject: "repo:o/r", expiresAt: 500 }, 50)).toBe(true);
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id, issuer: ISS, subject: "repo:o/r", expiresAt: 200 }, 60)).toBe(true); // never earlier
    expect((await store.sessions.byPublicId("ses_w1"))?.expiresAt).toBe(500);
    expect(await store.sessions.renewWorkload(s.id, { agentId: a2.id, issuer: ISS, subject: "repo:o/r", expiresAt: 900 }, 600)).toBe(false); // expired
    expect(await store.workload.removeIssuer(issuer.id)).toBe(true);
    expect(await store.workload.bindings(issuer.id)).toEqual([]);
    // Token ids outlive the issuer row: re-adding it does not let a token be exchanged again.
    expect(await store.workload.claimJti(ISS, "j", 300, 100)).toBe(false);
  });

  test("migration 33 carries the token ids kept per issuer row over to their iss", async () => {
    const db = (await backend.freshDatabase())();
    await migrate(
      db,
      MIGRATIONS.filter((m) => m.version < 33),
    );
    const issuer = (name: string, iss: string) =>
      db.run("INSERT INTO workload_issuers (name, issuer, audiences, clock_skew_seconds, created_at) VALUES (?, ?, '[]', 0, 1)", [name, iss]);
    await issuer("a", ISS);
    await issuer("b", ISS); // a second row trusting the same iss
    await issuer("c", "https://other.example");
    const ids = Object.fromEntries((await db.all<{ id: number; name: string }>("SELECT id, name FROM workload_issuers")).map((r) => [r.name, Number(r.id)]));
    for (const [row, jti, exp] of [
      ["a", "j1", 100],
      ["b", "j1", 300],
      ["b", "j2", 200],
      ["c", "j1", 400],
    ] as const) {
      await db.run("INSERT INTO workload_jtis (issuer_id, jti, expires_at) VALUES (?, ?, ?)", [ids[row]!, jti, exp]);
    }
    expect(await migrate(db)).toContain(33);
    const rows = await db.all<{ issuer: string; jti: string; expires_at: number }>(
      "SELECT issuer, jti, expires_at FROM workload_token_ids ORDER BY issuer, jti",
    );
    expect(rows.map((r) => [r.issuer, r.jti, Number(r.expires_at)])).toEqual([
      [ISS, "j1", 300],
      [ISS, "j2", 200],
      ["https://other.example", "j1", 400],
    ]);
    const store = createStore(db);
    expect(await store.workload.claimJti(ISS, "j2", 900, 150)).toBe(false);
    expect(await store.workload.claimJti(ISS, "j2", 900, 250)).toBe(true); // expired at 200
  });
});
