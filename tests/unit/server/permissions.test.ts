// The permission matrix: every kind of principal against every identity-and-access operation,
// each in a fresh world, asserting the exact status. Key rules: only human user sessions of vault
// admins/members ever read credential values (agents, scoped sessions and `proxy` never, whatever
// their role); a user without a role on the vault gets 404 (its existence is not revealed).

import { describe, expect, test } from "bun:test";
import { addAgent, addUser, createHarness, createVault, expectNoLeak, expectNoTokensInLogs, type As, type Harness, mintScoped, register, sentinel, setCredential } from "./fixtures.ts";

const WHO = ["owner", "admin", "member", "proxy", "norole", "agentProxy", "agentMember", "agentAdmin", "scopedProxy", "scopedMember", "scopedAdmin"] as const;
type Who = (typeof WHO)[number];

interface World {
  h: Harness;
  secret: string;
  as: Record<Who, As>;
}

async function buildWorld(): Promise<World> {
  const h = await createHarness();
  const owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  const admin = await addUser(h, owner, "v1", "admin@example.com", "admin");
  const member = await addUser(h, owner, "v1", "member@example.com", "member");
  const proxy = await addUser(h, owner, "v1", "proxy@example.com", "proxy");
  const norole = (await register(h, "norole@example.com")).token;
  const agentProxy = await addAgent(h, owner, "v1", "proxy", "agent-proxy");
  const agentMember = await addAgent(h, owner, "v1", "member", "agent-member");
  const agentAdmin = await addAgent(h, owner, "v1", "admin", "agent-admin");
  const sp = await mintScoped(h, { token: admin }, "v1", { role: "proxy" });
  const sm = await mintScoped(h, { token: admin }, "v1", { role: "member" });
  const sa = await mintScoped(h, { token: admin }, "v1", { role: "admin" });
  expect([sp.status, sm.status, sa.status]).toEqual([201, 201, 201]);
  const secret = sentinel("matrix");
  await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
  const svc = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: "api.example.com", auth: { type: "bearer", token: "API_KEY" } } });
  expect(svc.status).toBe(201);
  return {
    h,
    secret,
    as: {
      owner: { token: owner },
      admin: { token: admin },
      member: { token: member },
      proxy: { token: proxy },
      norole: { token: norole },
      agentProxy,
      agentMember,
      agentAdmin,
      scopedProxy: { token: sp.body.token },
      scopedMember: { token: sm.body.token },
      scopedAdmin: { token: sa.body.token },
    },
  };
}

type Op = (h: Harness, as: As) => ReturnType<Harness["call"]>;
const on = (method: string, path: string, body?: unknown): Op => (h, as) => h.call(method, path, { token: as.token, headers: as.headers, body });
const mint = (role: string): Op => (h, as) => mintScoped(h, as, "v1", { role });

// Columns: owner, admin, member, proxy, norole, agentProxy, agentMember, agentAdmin, scopedProxy, scopedMember, scopedAdmin
const MATRIX: [string, Op, number[], { reveals?: boolean }?][] = [
  ["describe vault", on("GET", "/v1/vaults/v1"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200]],
  ["list credential keys", on("GET", "/v1/vaults/v1/credentials"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200]],
  ["set credential", on("PUT", "/v1/vaults/v1/credentials/OTHER_KEY", { value: "not-the-sentinel" }), [200, 200, 200, 403, 404, 403, 200, 200, 403, 200, 200]],
  ["delete credential", on("DELETE", "/v1/vaults/v1/credentials/API_KEY"), [204, 204, 204, 403, 404, 403, 204, 204, 403, 204, 204]],
  ["reveal one credential", on("GET", "/v1/vaults/v1/credentials/API_KEY"), [200, 200, 200, 403, 404, 403, 403, 403, 403, 403, 403], { reveals: true }],
  ["list with ?reveal=true", on("GET", "/v1/vaults/v1/credentials?reveal=true"), [200, 200, 200, 403, 404, 403, 403, 403, 403, 403, 403], { reveals: true }],
  ["list services", on("GET", "/v1/vaults/v1/services"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200]],
  ["add service", on("POST", "/v1/vaults/v1/services", { host: "new.example.com", auth: { type: "passthrough" } }), [201, 201, 201, 403, 404, 403, 201, 201, 403, 201, 201]],
  ["update service", on("PATCH", "/v1/vaults/v1/services/api.example.com", { description: "changed" }), [200, 200, 200, 403, 404, 403, 200, 200, 403, 200, 200]],
  ["remove service", on("DELETE", "/v1/vaults/v1/services/api.example.com"), [204, 204, 204, 403, 404, 403, 204, 204, 403, 204, 204]],
  ["create agent invite", on("POST", "/v1/vaults/v1/agent-invites", { role: "proxy" }), [201, 201, 403, 403, 404, 403, 403, 201, 403, 403, 403]],
  ["list agent invites", on("GET", "/v1/vaults/v1/agent-invites"), [200, 200, 403, 403, 404, 403, 403, 200, 403, 403, 403]],
  ["create vault invite", on("POST", "/v1/vaults/v1/invites", { role: "member" }), [201, 201, 403, 403, 404, 403, 403, 201, 403, 403, 403]],
  ["list vault invites", on("GET", "/v1/vaults/v1/invites"), [200, 200, 403, 403, 404, 403, 403, 200, 403, 403, 403]],
  ["list members", on("GET", "/v1/vaults/v1/members"), [200, 200, 403, 403, 404, 403, 403, 200, 403, 403, 403]],
  ["update vault", on("PATCH", "/v1/vaults/v1", { unmatched_hosts: "deny" }), [200, 200, 403, 403, 404, 403, 403, 200, 403, 403, 403]],
  ["delete vault", on("DELETE", "/v1/vaults/v1"), [204, 204, 403, 403, 404, 403, 403, 204, 403, 403, 403]],
  ["mint proxy scoped session", mint("proxy"), [201, 201, 201, 201, 404, 201, 201, 201, 403, 403, 403]],
  ["mint member scoped session", mint("member"), [201, 201, 201, 403, 404, 403, 201, 201, 403, 403, 403]],
  ["mint admin scoped session", mint("admin"), [201, 201, 403, 403, 404, 403, 403, 201, 403, 403, 403]],
  // Principals administering none of the agent's vaults learn nothing about it: 404, not 403.
  ["revoke an agent", on("DELETE", "/v1/agents/agent-proxy"), [204, 204, 404, 404, 404, 404, 404, 204, 404, 404, 404]],
  ["create vault", on("POST", "/v1/vaults", { name: "fresh" }), [201, 201, 201, 201, 201, 403, 403, 403, 403, 403, 403]],
  ["get owner settings", on("GET", "/v1/owner/settings"), [200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403]],
  ["patch owner settings", on("PATCH", "/v1/owner/settings", { allowed_domains: ["example.com"] }), [200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403]],
];

const CODE: Record<number, string> = { 400: "invalid_request", 403: "forbidden", 404: "not_found" };

describe("permission matrix", () => {
  for (const [name, op, statuses, flags] of MATRIX) {
    describe(name, () => {
      WHO.forEach((who, i) => {
        const want = statuses[i]!;
        test(`${who} → ${want}`, async () => {
          const w = await buildWorld();
          const before = w.h.responses.length;
          const res = await op(w.h, w.as[who]);
          expect(res.status).toBe(want);
          if (want >= 400) {
            expect(res.body.error).toBe(CODE[want]!);
            expect(res.headers.get("x-broker-error")).toBe(CODE[want]!);
          }
          const reveal = flags?.reveals === true && want === 200;
          if (reveal) {
            const values = res.body.value !== undefined ? [res.body.value] : res.body.credentials.map((c: { value: string }) => c.value);
            expect(values).toEqual([w.secret]);
          }
          // The value reaches only the reveal response to a human; nothing else, no log line, no token in logs.
          const allowed = expectNoLeak(w.h, w.secret, (r) => reveal && w.h.responses.indexOf(r) === before);
          expect(allowed).toBe(reveal ? 1 : 0);
          expectNoTokensInLogs(w.h);
        });
      });
    });
  }
});

describe("effects of allowed operations", () => {
  test("a denied write leaves the vault unchanged; an allowed one changes it", async () => {
    const w = await buildWorld();
    expect((await on("DELETE", "/v1/vaults/v1/credentials/API_KEY")(w.h, w.as.agentProxy)).status).toBe(403);
    expect((await on("DELETE", "/v1/vaults/v1/services/api.example.com")(w.h, w.as.scopedProxy)).status).toBe(403);
    const keys = await on("GET", "/v1/vaults/v1/credentials")(w.h, w.as.owner);
    expect(keys.body.credentials.map((c: { key: string }) => c.key)).toEqual(["API_KEY"]);
    expect((await on("DELETE", "/v1/vaults/v1/credentials/API_KEY")(w.h, w.as.scopedMember)).status).toBe(204);
    expect((await on("GET", "/v1/vaults/v1/credentials")(w.h, w.as.owner)).body.credentials).toEqual([]);
    expect((await on("GET", "/v1/vaults/v1/services")(w.h, w.as.agentProxy)).body.services.map((s: { host: string }) => s.host)).toEqual(["api.example.com"]);
  });

  test("a scoped session never exceeds its minter's current role", async () => {
    const w = await buildWorld();
    // scopedMember was minted by admin@; demote admin@ to proxy: the session's writes are refused now.
    const adminUser = (await w.h.store.users.byEmail("admin@example.com"))!;
    const vault = (await w.h.store.vaults.byName("v1"))!;
    await w.h.store.access.setMember(vault.id, adminUser.id, "proxy", w.h.clock.now());
    expect((await on("PUT", "/v1/vaults/v1/credentials/X", { value: "v" })(w.h, w.as.scopedMember)).status).toBe(403);
    // Removed from the vault altogether: the session sees no vault.
    await w.h.store.db.run("DELETE FROM vault_members WHERE vault_id = ? AND user_id = ?", [vault.id, adminUser.id]);
    expect((await on("GET", "/v1/vaults/v1/credentials")(w.h, w.as.scopedMember)).status).toBe(404);
  });

  test("a user without a role sees the same 404 for an existing and a missing vault", async () => {
    const w = await buildWorld();
    const a = await on("GET", "/v1/vaults/v1/credentials")(w.h, w.as.norole);
    const b = await on("GET", "/v1/vaults/nope/credentials")(w.h, w.as.norole);
    expect(a.status).toBe(404);
    expect(a.body).toEqual(b.body);
    expect((await on("GET", "/v1/vaults")(w.h, w.as.norole)).body.vaults).toEqual([]);
  });
});
