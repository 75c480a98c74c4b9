// The permission matrix: every kind of principal against every identity-and-access operation,
// each in a fresh world, asserting the exact status (the world is built once through the API; every
// case starts from a restored copy of it, checked against the built one: freshWorld). Key rules: only
// human user sessions of vault admins/members ever read credential values or create, change or delete
// credentials and services; agents and scoped sessions never, whatever their vault or instance role
// (architecture.md D18), and their refusal says to file a proposal; a user without a role on the vault
// gets 404 (its existence is not revealed). Roles still decide everything else agents do (logs,
// invites, members, proposals).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PermissionDenied } from "../../../src/errors.ts";
import { createLoginThrottle } from "../../../src/ratelimit/index.ts";
import {
  addService,
  deleteCredential,
  listCredentials,
  removeService,
  revealCredential,
  setCredential as setCredentialOp,
  updateService,
} from "../../../src/workflows/index.ts";
import { createVaultInvite, deleteVault, openVault } from "../../../src/identity/index.ts";
import {
  addAgent,
  addUser,
  createHarness,
  createVault,
  expectNoLeak,
  expectNoTokensInLogs,
  type As,
  type Harness,
  mintScoped,
  register,
  sentinel,
  setCredential,
} from "./fixtures.ts";
import { CredentialInput, parseWith, ServiceInput, ServiceUpdateInput } from "../../../src/contract/index.ts";

const WHO = [
  "owner",
  "admin",
  "member",
  "proxy",
  "norole",
  "agentProxy",
  "agentMember",
  "agentAdmin",
  "agentOwner",
  "scopedProxy",
  "scopedMember",
  "scopedAdmin",
] as const;
type Who = (typeof WHO)[number];
const MACHINES: readonly Who[] = ["agentProxy", "agentMember", "agentAdmin", "agentOwner", "scopedProxy", "scopedMember", "scopedAdmin"];

interface World {
  h: Harness;
  secret: string;
  proposalId: number;
  as: Record<Who, As>;
}

/** An agent granted admin on v1 whose instance role is `owner` (no API makes one; the store can). */
async function addOwnerAgent(h: Harness, owner: string) {
  const agent = await addAgent(h, owner, "v1", "admin", "agent-owner");
  await h.store.db.run("UPDATE agents SET role = 'owner' WHERE name = ?", ["agent-owner"]);
  h.domain.auth.forget();
  const whoami = await h.call("GET", "/v1/auth/whoami", { token: agent.token });
  expect(whoami.body.agent).toEqual({ name: "agent-owner", role: "owner" });
  return agent;
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
  const agentOwner = await addOwnerAgent(h, owner);
  const sp = await mintScoped(h, { token: admin }, "v1", { role: "proxy" });
  const sm = await mintScoped(h, { token: admin }, "v1", { role: "member" });
  const sa = await mintScoped(h, { token: admin }, "v1", { role: "admin" });
  expect([sp.status, sm.status, sa.status]).toEqual([201, 201, 201]);
  const secret = sentinel("matrix");
  await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
  const svc = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: "api.example.com", auth: { type: "bearer", token: "API_KEY" } } });
  expect(svc.status).toBe(201);
  const proposal = await h.call("POST", "/v1/proposals", { ...agentProxy, body: PROPOSAL });
  expect(proposal.status).toBe(201);
  return {
    h,
    secret,
    proposalId: proposal.body.id,
    as: {
      owner: { token: owner },
      admin: { token: admin },
      member: { token: member },
      proxy: { token: proxy },
      norole: { token: norole },
      agentProxy,
      agentMember,
      agentAdmin,
      agentOwner,
      scopedProxy: { token: sp.body.token },
      scopedMember: { token: sm.body.token },
      scopedAdmin: { token: sa.body.token },
    },
  };
}

/**
 * The world as buildWorld left it: the database (a `VACUUM INTO` copy in `file`, and every table's rows
 * to compare against) and the harness's in-memory state (recorded responses, tokens, log lines, clock).
 */
interface Built {
  readonly w: World;
  readonly dir: string;
  readonly file: string;
  readonly tables: readonly string[];
  readonly rows: Readonly<Record<string, unknown[]>>;
  /** PRAGMA database_list: the copy is attached only while it is read back. */
  readonly databases: readonly string[];
  readonly responses: number;
  readonly tokens: readonly string[];
  readonly logs: readonly string[];
  readonly now: number;
}

const tableRows = (w: World, table: string) => w.h.store.db.all(`SELECT * FROM main."${table}"`);
const databases = async (w: World) => (await w.h.store.db.all<{ name: string }>("PRAGMA database_list")).map((d) => d.name);

async function snapshot(w: World): Promise<Built> {
  const db = w.h.store.db;
  const tables = (await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")).map(
    (t) => t.name,
  );
  const rows: Record<string, unknown[]> = {};
  for (const t of tables) rows[t] = await tableRows(w, t);
  const attached = await databases(w);
  const dir = mkdtempSync(join(tmpdir(), "broker-permissions-"));
  const file = join(dir, "world.db");
  await db.run("VACUUM INTO ?", [file]);
  const { h } = w;
  return { w, dir, file, tables, rows, databases: attached, responses: h.responses.length, tokens: [...h.tokens], logs: [...h.logs], now: h.clock.now() };
}

let built: Built | undefined;
beforeAll(async () => {
  built = await snapshot(await buildWorld());
});
afterAll(() => {
  if (built) rmSync(built.dir, { recursive: true, force: true });
});

/**
 * The built world again, as buildWorld left it: every table emptied and refilled from the copy, the
 * recorded responses, tokens and log lines cut back, the clock rewound, the authenticator's cache
 * dropped and a new login throttle (as createTestApi makes it). Then checked: each table row for row
 * against the built world, and the in-memory state. Cases run one after another (bun's default), so
 * one world serves them all.
 */
async function freshWorld(): Promise<World> {
  const b = built!;
  const { h } = b.w;
  const db = h.store.db;
  await db.run("PRAGMA foreign_keys = OFF"); // the tables are refilled in name order, not in dependency order
  await db.run("ATTACH DATABASE ? AS snap", [b.file]);
  try {
    await db.transaction(async (tx) => {
      // The change log last: refilling the other tables fires its triggers (migration 32), which append rows to it.
      for (const t of [...b.tables.filter((n) => n !== "change_log"), ...b.tables.filter((n) => n === "change_log")]) {
        await tx.run(`DELETE FROM main."${t}"`);
        await tx.run(`INSERT INTO main."${t}" SELECT * FROM snap."${t}"`);
      }
    });
  } finally {
    await db.run("DETACH DATABASE snap");
    await db.run("PRAGMA foreign_keys = ON");
  }
  h.responses.length = b.responses;
  h.tokens.clear();
  for (const t of b.tokens) h.tokens.add(t);
  h.logs.length = 0;
  h.logs.push(...b.logs);
  h.clock.advance(b.now - h.clock.now());
  h.domain.auth.forget();
  Object.assign(h.domain, { loginThrottle: createLoginThrottle({ now: h.clock.now }) });

  for (const t of b.tables) expect({ table: t, rows: await tableRows(b.w, t) }).toEqual({ table: t, rows: b.rows[t]! });
  expect(await db.all("PRAGMA foreign_key_check")).toEqual([]);
  expect(await db.get("PRAGMA foreign_keys")).toEqual({ foreign_keys: 1 });
  expect(await databases(b.w)).toEqual([...b.databases]);
  expect(h.responses.length).toBe(b.responses);
  expect([...h.tokens]).toEqual([...b.tokens]);
  expect(h.logs).toEqual([...b.logs]);
  expect(h.clock.now()).toBe(b.now);
  expect(h.domain.loginThrottle.stats()).toEqual({ accounts: 0, addresses: 0, pairs: 0 });
  // This harness has no vault-access cache and no rate limiter (createTestApi): nothing else to reset.
  expect(h.domain.vaultAccess).toBeUndefined();
  expect(h.domain.rateLimiter).toBeUndefined();
  return b.w;
}

/** A proposal that reuses the stored key for another host: only a human may let it through. */
const PROPOSAL = {
  services: [{ action: "set", host: "new.example.com", description: "New API", auth: { type: "bearer", token: "API_KEY" } }],
  message: "Need new.example.com",
  user_message: "Please allow new.example.com",
};

type Op = (w: World, as: As) => ReturnType<Harness["call"]>;
const on =
  (method: string, path: string, body?: unknown): Op =>
  (w, as) =>
    w.h.call(method, path, { token: as.token, headers: as.headers, body });
/** Header-scoped agent-protocol calls: every caller names the vault in X-Vault (scoped sessions ignore it). */
const onVault =
  (method: string, path: (w: World) => string, body?: unknown): Op =>
  (w, as) =>
    w.h.call(method, path(w), { token: as.token, headers: { "x-vault": "v1", ...as.headers }, body });
const mint =
  (role: string): Op =>
  (w, as) =>
    mintScoped(w.h, as, "v1", { role });

interface Flags {
  /** The 200 answer carries the stored value (allowed for humans only). */
  reveals?: boolean;
  /** Text every machine's refusal must contain: what to do instead. */
  machineHint?: string;
}
const SECRET: Flags = { machineHint: "POST /v1/proposals" };
const REVEAL: Flags = { reveals: true, machineHint: "POST /v1/proposals" };

const HUMANS_WRITE = (ok: number) => [ok, ok, ok, 403, 404, 403, 403, 403, 403, 403, 403, 403];
const HUMANS_ADMIN = (ok: number) => [ok, ok, 403, 403, 404, 403, 403, 403, 403, 403, 403, 403];

// Columns: owner, admin, member, proxy, norole, agentProxy, agentMember, agentAdmin, agentOwner, scopedProxy, scopedMember, scopedAdmin
const MATRIX: [string, Op, number[], Flags?][] = [
  ["describe vault", on("GET", "/v1/vaults/v1"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200, 200]],
  ["list credential keys", on("GET", "/v1/vaults/v1/credentials"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200, 200]],
  ["set a new credential", on("PUT", "/v1/vaults/v1/credentials/OTHER_KEY", { value: "not-the-sentinel" }), HUMANS_WRITE(200), SECRET],
  ["overwrite the stored credential", on("PUT", "/v1/vaults/v1/credentials/API_KEY", { value: "attacker-chosen" }), HUMANS_WRITE(200), SECRET],
  ["delete credential", on("DELETE", "/v1/vaults/v1/credentials/API_KEY"), HUMANS_WRITE(204), SECRET],
  ["reveal one credential", on("GET", "/v1/vaults/v1/credentials/API_KEY"), HUMANS_WRITE(200), REVEAL],
  ["list with ?reveal=true", on("GET", "/v1/vaults/v1/credentials?reveal=true"), HUMANS_WRITE(200), REVEAL],
  ["list with ?reveal=1", on("GET", "/v1/vaults/v1/credentials?reveal=1"), HUMANS_WRITE(200), REVEAL],
  ["list services", on("GET", "/v1/vaults/v1/services"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200, 200]],
  ["add passthrough service", on("POST", "/v1/vaults/v1/services", { host: "new.example.com", auth: { type: "passthrough" } }), HUMANS_WRITE(201), SECRET],
  [
    "add service sending the stored key elsewhere",
    on("POST", "/v1/vaults/v1/services", { host: "attacker.example.net", auth: { type: "bearer", token: "API_KEY" } }),
    HUMANS_WRITE(201),
    SECRET,
  ],
  ["update service description", on("PATCH", "/v1/vaults/v1/services/api.example.com", { description: "changed" }), HUMANS_WRITE(200), SECRET],
  [
    "repoint service auth to another header",
    on("PATCH", "/v1/vaults/v1/services/api.example.com", { auth: { type: "header", header: "X-Echo-Me", token: "API_KEY" } }),
    HUMANS_WRITE(200),
    SECRET,
  ],
  ["disable service", on("PATCH", "/v1/vaults/v1/services/api.example.com", { enabled: false }), HUMANS_WRITE(200), SECRET],
  ["enable service", on("PATCH", "/v1/vaults/v1/services/api.example.com", { enabled: true }), HUMANS_WRITE(200), SECRET],
  ["remove service", on("DELETE", "/v1/vaults/v1/services/api.example.com"), HUMANS_WRITE(204), SECRET],
  // Roles still decide the rest for agents: logs, proposals, invites, members, vault settings.
  ["read audit log", on("GET", "/v1/vaults/v1/logs"), [200, 200, 200, 403, 404, 403, 200, 200, 200, 403, 200, 200]],
  ["discover", onVault("GET", () => "/discover"), [200, 200, 200, 200, 404, 200, 200, 200, 200, 200, 200, 200]],
  ["file a proposal", onVault("POST", () => "/v1/proposals", PROPOSAL), [201, 201, 201, 201, 404, 201, 201, 201, 201, 201, 201, 201]],
  [
    "approve a proposal",
    onVault("POST", (w) => `/v1/proposals/${w.proposalId}/approve`, { credentials: {} }),
    [200, 200, 200, 403, 404, 403, 403, 403, 403, 403, 403, 403],
  ],
  ["create agent invite", on("POST", "/v1/vaults/v1/agent-invites", { role: "proxy" }), [201, 201, 403, 403, 404, 403, 403, 201, 201, 403, 403, 403]],
  ["list agent invites", on("GET", "/v1/vaults/v1/agent-invites"), [200, 200, 403, 403, 404, 403, 403, 200, 200, 403, 403, 403]],
  // Inviting a person is human-only: an agent could accept its own invite and hold a human login.
  ["create vault invite", on("POST", "/v1/vaults/v1/invites", { role: "member" }), HUMANS_ADMIN(201), { machineHint: "agents never invite people" }],
  ["create proxy-role vault invite", on("POST", "/v1/vaults/v1/invites", { role: "proxy" }), HUMANS_ADMIN(201), { machineHint: "agents never invite people" }],
  ["list vault invites", on("GET", "/v1/vaults/v1/invites"), [200, 200, 403, 403, 404, 403, 403, 200, 200, 403, 403, 403]],
  ["list members", on("GET", "/v1/vaults/v1/members"), [200, 200, 403, 403, 404, 403, 403, 200, 200, 403, 403, 403]],
  ["update vault", on("PATCH", "/v1/vaults/v1", { unmatched_hosts: "deny" }), [200, 200, 403, 403, 404, 403, 403, 200, 200, 403, 403, 403]],
  // Deleting a vault deletes every credential and service in it: a secret write, humans only.
  ["delete vault", on("DELETE", "/v1/vaults/v1"), HUMANS_ADMIN(204), { machineHint: "ask a human admin" }],
  ["mint proxy scoped session", mint("proxy"), [201, 201, 201, 201, 404, 201, 201, 201, 201, 403, 403, 403]],
  ["mint member scoped session", mint("member"), [201, 201, 201, 403, 404, 403, 201, 201, 201, 403, 403, 403]],
  ["mint admin scoped session", mint("admin"), [201, 201, 403, 403, 404, 403, 403, 201, 201, 403, 403, 403]],
  // Principals administering none of the agent's vaults learn nothing about it: 404, not 403.
  ["revoke an agent", on("DELETE", "/v1/agents/agent-proxy"), [204, 204, 404, 404, 404, 404, 404, 204, 204, 404, 404, 404]],
  ["create vault", on("POST", "/v1/vaults", { name: "fresh" }), [201, 201, 201, 201, 201, 403, 403, 403, 201, 403, 403, 403]],
  ["get owner settings", on("GET", "/v1/owner/settings"), [200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403]],
  [
    "patch owner settings",
    on("PATCH", "/v1/owner/settings", { allowed_domains: ["example.com"] }),
    [200, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403],
  ],
];

const CODE: Record<number, string> = { 400: "invalid_request", 403: "forbidden", 404: "not_found" };

describe("permission matrix", () => {
  for (const [name, op, statuses, flags] of MATRIX) {
    describe(name, () => {
      WHO.forEach((who, i) => {
        const want = statuses[i]!;
        test(`${who} → ${want}`, async () => {
          const w = await freshWorld();
          const before = w.h.responses.length;
          const res = await op(w, w.as[who]);
          expect(res.status).toBe(want);
          if (want >= 400) {
            expect(res.body.error).toBe(CODE[want]!);
            expect(res.headers.get("x-broker-error")).toBe(CODE[want]!);
          }
          // A machine refused a secret operation is told what to do instead, not to ask for a bigger role.
          if (flags?.machineHint && MACHINES.includes(who)) expect(res.body.message).toContain(flags.machineHint);
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
    const w = await freshWorld();
    const services = async () => (await on("GET", "/v1/vaults/v1/services")(w, w.as.owner)).body.services;
    const before = await services();
    for (const who of MACHINES) {
      expect((await on("PUT", "/v1/vaults/v1/credentials/API_KEY", { value: "attacker-chosen" })(w, w.as[who])).status).toBe(403);
      expect((await on("DELETE", "/v1/vaults/v1/credentials/API_KEY")(w, w.as[who])).status).toBe(403);
      expect(
        (await on("POST", "/v1/vaults/v1/services", { host: "attacker.example.net", auth: { type: "bearer", token: "API_KEY" } })(w, w.as[who])).status,
      ).toBe(403);
      expect(
        (await on("PATCH", "/v1/vaults/v1/services/api.example.com", { auth: { type: "header", header: "X-Echo-Me", token: "API_KEY" } })(w, w.as[who])).status,
      ).toBe(403);
      expect((await on("DELETE", "/v1/vaults/v1/services/api.example.com")(w, w.as[who])).status).toBe(403);
    }
    expect(await services()).toEqual(before);
    const revealed = await on("GET", "/v1/vaults/v1/credentials/API_KEY")(w, w.as.owner);
    expect(revealed.body.value).toBe(w.secret); // still the human's value, not the attacker's
    expect((await on("DELETE", "/v1/vaults/v1/credentials/API_KEY")(w, w.as.member)).status).toBe(204);
    expect((await on("GET", "/v1/vaults/v1/credentials")(w, w.as.owner)).body.credentials).toEqual([]);
    expect((await on("GET", "/v1/vaults/v1/services")(w, w.as.agentProxy)).body.services.map((s: { host: string }) => s.host)).toEqual(["api.example.com"]);
  });

  test("a refused agent learns to file a proposal, which a human then approves", async () => {
    const w = await freshWorld();
    const refused = await on("POST", "/v1/vaults/v1/services", { host: "new.example.com", auth: { type: "bearer", token: "API_KEY" } })(w, w.as.agentAdmin);
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ error: "forbidden", message: expect.stringContaining("file a proposal") });
    expect(refused.body.message).toContain("POST /v1/proposals");
    const approved = await onVault("POST", (x) => `/v1/proposals/${x.proposalId}/approve`, { credentials: {} })(w, w.as.member);
    expect(approved.status).toBe(200);
    const hosts = (await on("GET", "/v1/vaults/v1/services")(w, w.as.agentAdmin)).body.services.map((s: { host: string }) => s.host);
    expect(hosts.sort()).toEqual(["api.example.com", "new.example.com"]);
  });

  test("an admin agent cannot mint itself a human login through a people invite", async () => {
    const w = await freshWorld();
    // A people invite is accepted without a session, with any fresh email and password: an agent
    // holding one could become a human admin. So no machine gets one, whatever its role.
    for (const who of MACHINES) {
      const inv = await on("POST", "/v1/vaults/v1/invites", { role: "admin" })(w, w.as[who]);
      expect({ who, status: inv.status }).toEqual({ who, status: 403 });
      expect(inv.body.token).toBeUndefined();
    }
    const agentInvite = await on("POST", "/v1/vaults/v1/agent-invites", { role: "admin" })(w, w.as.agentAdmin);
    expect(agentInvite.status).toBe(201); // agent invites stay role-decided: they make machines, not people
    const pending = await on("GET", "/v1/vaults/v1/invites")(w, w.as.agentAdmin);
    expect(pending.body.invites).toEqual([]);
  });

  test("a scoped session never exceeds its minter's current role", async () => {
    const w = await freshWorld();
    // scopedMember was minted by admin@; demote admin@ to proxy: what the member role allowed is refused now.
    expect((await on("GET", "/v1/vaults/v1/logs")(w, w.as.scopedMember)).status).toBe(200);
    const adminUser = (await w.h.store.users.byEmail("admin@example.com"))!;
    const vault = (await w.h.store.vaults.byName("v1"))!;
    await w.h.store.access.setMember(vault.id, adminUser.id, "proxy", w.h.clock.now());
    expect((await on("GET", "/v1/vaults/v1/logs")(w, w.as.scopedMember)).status).toBe(403);
    // Removed from the vault altogether: the session sees no vault.
    await w.h.store.db.run("DELETE FROM vault_members WHERE vault_id = ? AND user_id = ?", [vault.id, adminUser.id]);
    expect((await on("GET", "/v1/vaults/v1/credentials")(w, w.as.scopedMember)).status).toBe(404);
  });

  test("a user without a role sees the same 404 for an existing and a missing vault", async () => {
    const w = await freshWorld();
    const a = await on("GET", "/v1/vaults/v1/credentials")(w, w.as.norole);
    const b = await on("GET", "/v1/vaults/nope/credentials")(w, w.as.norole);
    expect(a.status).toBe(404);
    expect(a.body).toEqual(b.body);
    expect((await on("GET", "/v1/vaults")(w, w.as.norole)).body.vaults).toEqual([]);
  });
});

describe("the rule lives in the domain, not in the routes", () => {
  // A future caller (the web console, a new route) that opens a vault for "read" still cannot write
  // or reveal for a machine: each operation checks its own action against the same rule.
  test("operations on a vault opened for read refuse agents and scoped sessions of every role", async () => {
    const w = await freshWorld();
    for (const who of MACHINES) {
      const p = await w.h.domain.auth.authenticate(w.as[who].token!);
      const open = await openVault(w.h.domain, p, "v1", "read", "v1");
      const attempts: [string, () => Promise<unknown>][] = [
        ["set", () => setCredentialOp(w.h.domain, open, "API_KEY", parseWith(CredentialInput, { value: "attacker-chosen" }))],
        ["delete", () => deleteCredential(w.h.domain, open, "API_KEY")],
        ["reveal", () => revealCredential(w.h.domain, open, "API_KEY")],
        ["list values", () => listCredentials(w.h.domain, open, true)],
        [
          "add service",
          () => addService(w.h.domain, open, parseWith(ServiceInput, { host: "attacker.example.net", auth: { type: "bearer", token: "API_KEY" } })),
        ],
        [
          "repoint service",
          () =>
            updateService(
              w.h.domain,
              open,
              "api.example.com",
              parseWith(ServiceUpdateInput, { auth: { type: "header", header: "X-Echo-Me", token: "API_KEY" } }),
            ),
        ],
        ["remove service", () => removeService(w.h.domain, open, "api.example.com")],
        ["delete vault", () => deleteVault(w.h.domain, open)],
        ["invite a person", () => createVaultInvite(w.h.domain, p, open, { role: "admin" })],
      ];
      for (const [what, attempt] of attempts) {
        const err = await attempt().catch((e: unknown) => e);
        expect({ who, what, denied: err instanceof PermissionDenied }).toEqual({ who, what, denied: true });
      }
    }
    const open = await openVault(w.h.domain, await w.h.domain.auth.authenticate(w.as.member.token!), "v1", "read");
    expect((await revealCredential(w.h.domain, open, "API_KEY")).value?.reveal()).toBe(w.secret);
    expectNoLeak(w.h, w.secret);
  });
});
