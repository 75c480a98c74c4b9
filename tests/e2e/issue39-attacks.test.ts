// Issue 39 attacked (report mode, vaults as code), with an in-process broker and a local HTTPS upstream. Each test is
// one attack the broker defends (it would fail without the defence it names). The first attack found five holes, each
// closed since: apply granting a role to another team's agent (now only agents the applier already answers for),
// invites made before a vault was managed adding whom its file does not name, a cost limit that rounded to nothing
// (refused below 0.000001), a "billion laughs" file crashing the CLI (a file problem, exit 2), and an admin agent
// widening unmatched_hosts to tunnel (a person decides that, as report mode).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";
import { readVaultFile } from "../../src/cli/kit/vault-file.ts";
import { CliFailure } from "../../src/cli/kit/fail.ts";

const SECRET = `sk-issue39-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let broker: Broker;
/** "upstream.test:<port>": a bearer service of the fixture's vault, GET /allowed/** only. */
let svc: string;
let owner: string;

type Answer = { status: number; body: any };

async function call(method: string, path: string, body: unknown, token: string, headers: Record<string, string> = {}): Promise<Answer> {
  const h: Record<string, string> = { ...headers };
  if (token) h.authorization = `Bearer ${token}`;
  if (body !== undefined) h["content-type"] = "application/json";
  const res = await fetch(`${broker.apiUrl}${path}`, {
    method,
    headers: h,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: parsed };
}

async function ok(method: string, path: string, body: unknown, token: string, status = 200, headers: Record<string, string> = {}): Promise<any> {
  const r = await call(method, path, body, token, headers);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** A person with an account of their own (instance role member). */
async function person(email: string): Promise<string> {
  return (await ok("POST", "/v1/auth/register", { email, password: "correct horse battery staple" }, "", 201)).token;
}

/** An agent invited into `vault` by `token` with `role`, redeemed: its token. */
async function agent(vault: string, name: string, role: string, token = owner): Promise<string> {
  const inv = await ok("POST", `/v1/vaults/${vault}/agent-invites`, { name, role }, token, 201);
  return (await ok("POST", `/invite/${inv.token}`, undefined, "", 201)).token;
}

async function apply(file: unknown, token: string, dryRun = false): Promise<Answer> {
  return call("POST", `/v1/apply${dryRun ? "?dry_run=true" : ""}`, file, token);
}

const file = (vaults: Record<string, unknown>) => ({ version: 1, vaults });

/** The one-line JSON error envelope every refusal answers with. */
function envelope(r: Answer, status: number, error: string) {
  expect({ status: r.status, error: r.body?.error, message: typeof r.body?.message }).toEqual({ status, error, message: "string" });
}

function reached(path: string) {
  return upstream.received.filter((r) => r.url === path);
}

beforeAll(async () => {
  upstream = await startUpstream(
    (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ done: req.url }));
    },
    { names: { dns: ["upstream.test"], ips: ["127.0.0.1"] } },
  );
  broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  svc = `upstream.test:${upstream.port}`;
  owner = broker.userToken;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(svc, { type: "bearer", token: "API_KEY" }, { rules: [{ methods: ["GET"], paths: ["/allowed/**"] }] });
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

// ---------------------------------------------------------------------------------------------------------------
// Holes
// ---------------------------------------------------------------------------------------------------------------

describe("holes found by the first attack (each closed)", () => {
  test("any person can attach another team's agent to a vault of their own by apply, and its admin can then no longer revoke it", async () => {
    // Alice runs vault "alice-v" with her agent; Mallory is just another person on the instance (sign-up is open).
    const alice = await person("alice@example.com");
    await ok("POST", "/v1/vaults", { name: "alice-v" }, alice, 201);
    await agent("alice-v", "alice-bot", "proxy", alice);
    const mallory = await person("mallory@example.com");

    // An agent name that exists elsewhere must read exactly as one that does not (budgets.ts:135 keeps that rule),
    // and must never be granted: an existing agent joins no vault by invite (redeemAgentInvite creates a new agent).
    const plan = (
      await apply(
        file({
          "mallory-v": {
            agents: [
              { name: "alice-bot", role: "proxy" },
              { name: "no-such-bot", role: "proxy" },
            ],
          },
        }),
        mallory,
        true,
      )
    ).body;
    const said = (name: string) =>
      [...plan.vaults[0].changes, ...plan.vaults[0].pending].filter((c: any) => c.name === name).map((c: any) => c.said.replaceAll(name, "X"));
    const enumerated = JSON.stringify(said("alice-bot")) !== JSON.stringify(said("no-such-bot"));

    await ok("POST", "/v1/apply", file({ "mallory-v": { agents: [{ name: "alice-bot", role: "proxy" }] } }), mallory);
    const grants = (await ok("GET", "/v1/agents", undefined, alice)).agents.find((a: any) => a.name === "alice-bot")?.vaults.map((v: any) => v.name);
    // alice-bot is leaked / compromised: Alice revokes it (DELETE /v1/agents/{name}: admin of every vault it can use).
    const revoke = await call("DELETE", "/v1/agents/alice-bot", undefined, alice);
    expect({ enumerated, grants, revoke: revoke.status }).toEqual({ enumerated: false, grants: ["alice-v"], revoke: 204 });
  });

  test("an agent invite issued before the vault became managed still adds an undeclared agent (admin) after it is", async () => {
    await ok("POST", "/v1/vaults", { name: "inv-v" }, owner, 201);
    const inv = await ok("POST", "/v1/vaults/inv-v/agent-invites", { name: "sneaky-bot", role: "admin" }, owner, 201);
    const pinv = await ok("POST", "/v1/vaults/inv-v/invites", { role: "admin" }, owner, 201); // any email
    const r = await apply(file({ "inv-v": { managed: true, agents: [], members: [{ email: "owner@example.com", role: "admin" }] } }), owner);
    expect(r.status).toBe(200);
    const redeemed = await call("POST", `/invite/${inv.token}`, undefined, "");
    const eve = await person("eve@example.com");
    const accepted = await call("POST", `/v1/vault-invites/${pinv.token}/accept`, {}, eve);
    // A managed vault takes only the agents and people its file names: the redemption should be refused (409
    // vault_managed), or the apply that made it managed should have revoked the invites the file does not declare.
    const exported = (await ok("GET", "/v1/export?vault=inv-v", undefined, owner)).vaults["inv-v"];
    expect({ redeemed: redeemed.status, accepted: accepted.status, agents: exported.agents, members: exported.members }).toEqual({
      redeemed: 409,
      accepted: 409,
      agents: [],
      members: [{ email: "owner@example.com", role: "admin" }],
    });
  });

  test("a billion-laughs vault file is not a CliFailure (exit 2, 'nothing was applied') but an 'unexpected, report it' crash", () => {
    const laughs = [
      "version: 1",
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]",
      "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]",
      "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]",
      "vaults: {}",
    ].join("\n");
    let thrown: unknown;
    try {
      readVaultFile(laughs, {});
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CliFailure);
    expect((thrown as CliFailure).exitCode).toBe(2);
  });

  test("a budget whose cost rounds to 0 micro-units (cost: 0.0000004) makes GET /v1/export 500 for every vault its admin exports", async () => {
    await ok("POST", "/v1/vaults", { name: "tiny-v" }, owner, 201);
    // Set by the ordinary API (a human admin of one vault; the same schema reads an apply's): refused, naming the field.
    const set = await call("PUT", "/v1/vaults/tiny-v/budgets/tiny", { scope: "vault", period: "day", limits: { cost: 0.0000004 } }, owner);
    expect(set.status).toBe(400);
    expect(set.body).toMatchObject({ error: "invalid_request", field: "limits.cost" });
    const one = await call("GET", "/v1/export?vault=tiny-v", undefined, owner);
    const all = await call("GET", "/v1/export", undefined, owner); // the owner's export of every vault
    expect({ one: one.status, all: all.status }).toEqual({ one: 200, all: 200 });
  });

  test("(against D33's own reason) an agent with the admin role switches unmatched_hosts to tunnel, the same blind tunnel report mode gives, unmarked", async () => {
    await ok("POST", "/v1/vaults", { name: "deny-v" }, owner, 201);
    await ok("PATCH", "/v1/vaults/deny-v", { unmatched_hosts: "deny" }, owner);
    const bot = await agent("deny-v", "deny-admin-bot", "admin");
    const asBot = { "x-vault": "deny-v" };
    // policy_mode is refused to it ("a way round rules only a person may widen", D18/D33) ...
    envelope(await call("PATCH", "/v1/vaults/deny-v", { policy_mode: "report" }, bot, asBot), 403, "forbidden");
    // ... and unmatched_hosts: tunnel, which lets through strictly more (no would_refuse mark), should be refused too.
    const r = await call("PATCH", "/v1/vaults/deny-v", { unmatched_hosts: "tunnel" }, bot, asBot);
    expect(r.status).toBe(403);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// Defended attacks
// ---------------------------------------------------------------------------------------------------------------

describe("report mode: who may switch it", () => {
  test("an agent (even admin), a scoped admin session and a member person never switch policy_mode or rules_mode, nor apply or export", async () => {
    await ok("POST", "/v1/vaults", { name: "mode-v" }, owner, 201);
    await ok("PUT", "/v1/vaults/mode-v/credentials/K", { value: "v" }, owner);
    await ok(
      "POST",
      "/v1/vaults/mode-v/services",
      { host: "mode.example.com", auth: { type: "bearer", token: "K" }, rules: [{ methods: ["GET"], paths: ["/a"] }] },
      owner,
      201,
    );
    const bot = await agent("mode-v", "mode-admin-bot", "admin");
    const scoped = (await ok("POST", "/v1/sessions", { vault: "mode-v", role: "admin" }, owner, 201)).token;
    const memberToken = await person("member-of-mode@example.com");
    const inv = await ok("POST", "/v1/vaults/mode-v/invites", { email: "member-of-mode@example.com", role: "member" }, owner, 201);
    await ok("POST", `/v1/vault-invites/${inv.token}/accept`, {}, memberToken);
    const x = { "x-vault": "mode-v" };
    for (const [who, token, headers] of [
      ["agent", bot, x],
      ["scoped", scoped, {}],
      ["member", memberToken, {}],
    ] as const) {
      const vault = await call("PATCH", "/v1/vaults/mode-v", { policy_mode: "report" }, token, headers);
      const service = await call("PATCH", "/v1/vaults/mode-v/services/mode.example.com", { rules_mode: "report" }, token, headers);
      const added = await call(
        "POST",
        "/v1/vaults/mode-v/services",
        { host: "new.example.com", auth: { type: "bearer", token: "K" }, rules_mode: "report" },
        token,
        headers,
      );
      const applied = await apply(file({ "mode-v": { policy_mode: "report" } }), token);
      const exported = await call("GET", "/v1/export?vault=mode-v", undefined, token);
      expect({ who, s: [vault.status, service.status, added.status, applied.status, exported.status] }).toEqual({ who, s: [403, 403, 403, 403, 403] });
      for (const r of [vault, service, added, applied, exported]) expect(typeof r.body.message).toBe("string");
    }
    const after = await ok("GET", "/v1/vaults/mode-v", undefined, owner);
    expect(after.policy_mode).toBe("enforce");
    // A proposal has no rules_mode (strict body: 400 naming it).
    const proposal = await call(
      "POST",
      "/v1/proposals",
      { services: [{ action: "set", host: "mode.example.com", auth: { type: "bearer", token: "K" }, rules_mode: "report" }] },
      bot,
      x,
    );
    expect(proposal.status).toBe(400);
  });
});

describe("report mode: what it never lets through", () => {
  test("a disabled service, the network guard, a hold and /proxy to a host without a service stay refused in report mode", async () => {
    await ok("PATCH", `/v1/vaults/${broker.vault}`, { policy_mode: "report", unmatched_hosts: "deny" }, owner);
    try {
      // Outside the rules: let through (the feature), with the credential.
      expect((await broker.proxy(svc, "/outside/1", { method: "DELETE" })).status).toBe(200);
      expect(reached("/outside/1").length).toBe(1);
      // A host whose service resolves to an address the guard forbids (cloud metadata): refused, nothing dialled.
      broker.dns.set("meta.test", ["169.254.169.254"]);
      await ok(
        "POST",
        `/v1/vaults/${broker.vault}/services`,
        { host: "meta.test", auth: { type: "bearer", token: "API_KEY" }, rules: [{ methods: ["GET"], paths: ["/ok"] }] },
        owner,
        201,
      );
      const guarded = await broker.proxy("meta.test", "/latest/meta-data/");
      expect(guarded.status).toBeGreaterThanOrEqual(400);
      expect(guarded.status).not.toBe(200);
      // A hold for a person is still a hold.
      await ok(
        "PATCH",
        `/v1/vaults/${broker.vault}/services/${encodeURIComponent(svc)}`,
        {
          rules: [
            { methods: ["GET"], paths: ["/allowed/**"] },
            { methods: ["POST"], paths: ["/held"], approve: "each" },
          ],
        },
        owner,
      );
      const held = await broker.proxy(svc, "/held", { method: "POST", body: "{}" });
      expect(held.status).toBe(428);
      expect(reached("/held")).toEqual([]);
      // Disabled: refused whatever the mode.
      await ok("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(svc)}`, { enabled: false }, owner);
      const disabled = await broker.proxy(svc, "/outside/2", { method: "DELETE" });
      expect(disabled.status).toBeGreaterThanOrEqual(400);
      expect(reached("/outside/2")).toEqual([]);
      await ok("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(svc)}`, { enabled: true }, owner);
      // /proxy to a host without a service: 403, not an open relay.
      broker.dns.set("nowhere.test", ["127.0.0.1"]);
      const relay = await broker.proxy(`nowhere.test:${upstream.port}`, "/relay");
      expect(relay.status).toBe(403);
      expect(reached("/relay")).toEqual([]);
      // The let-through request is marked, listed, and its mark is not something the agent sees.
      let marked: any[] = [];
      for (let i = 0; i < 50 && marked.length < 2; i++) {
        await Bun.sleep(100);
        marked = (await ok("GET", `/v1/vaults/${broker.vault}/logs?would_refuse=true`, undefined, owner)).logs;
      }
      expect(marked.map((r: any) => [r.path, r.status, r.error])).toEqual([
        // Refused by the guard (403 egress_blocked), the mark first, as docs/api.md says.
        ["/latest/meta-data/", 403, "would_refuse:request_not_allowed,egress_blocked"],
        ["/outside/1", 200, "would_refuse:request_not_allowed"],
      ]);
    } finally {
      await ok("PATCH", `/v1/vaults/${broker.vault}`, { policy_mode: "enforce", unmatched_hosts: "tunnel" }, owner);
    }
  });

  test("an apply that does not mention policy_mode keeps the vault in report mode (a section left out is left as it is)", async () => {
    await ok("POST", "/v1/vaults", { name: "keep-v" }, owner, 201);
    await ok("PATCH", "/v1/vaults/keep-v", { policy_mode: "report" }, owner);
    const r = await ok("POST", "/v1/apply", file({ "keep-v": { unmatched_hosts: "deny" } }), owner);
    expect(r.changes).toBe(1);
    expect((await ok("GET", "/v1/vaults/keep-v", undefined, owner)).policy_mode).toBe("report");
  });
});

describe("vaults as code: who applies what", () => {
  test("a member (not admin) of an existing vault cannot apply it, and a file naming it changes nothing else either", async () => {
    await ok("POST", "/v1/vaults", { name: "guarded-v" }, owner, 201);
    const m = await person("plain-member@example.com");
    const inv = await ok("POST", "/v1/vaults/guarded-v/invites", { email: "plain-member@example.com", role: "member" }, owner, 201);
    await ok("POST", `/v1/vault-invites/${inv.token}/accept`, {}, m);
    const r = await apply(file({ "brand-new-v": {}, "guarded-v": { members: [{ email: "plain-member@example.com", role: "admin" }] } }), m);
    envelope(r, 403, "forbidden");
    // Nothing of the file happened: not even the vault it could have created.
    expect((await ok("GET", "/v1/vaults", undefined, m)).vaults.map((v: any) => v.name)).toEqual(["guarded-v"]);
    expect((await ok("GET", "/v1/vaults/guarded-v/members", undefined, owner)).members).toContainEqual({ email: "plain-member@example.com", role: "member" });
  });

  test("a person who is not the owner cannot apply a file taking their own admin role away (400), and the whole file is rolled back", async () => {
    const bob = await person("bob@example.com");
    await ok("POST", "/v1/vaults", { name: "bob-a" }, bob, 201);
    await ok("POST", "/v1/vaults", { name: "bob-b" }, bob, 201);
    const r = await apply(
      file({
        "bob-a": { unmatched_hosts: "deny", budgets: { b: { scope: "vault", period: "day", limits: { requests: 5 } } } },
        "bob-b": { members: [{ email: "bob@example.com", role: "member" }] },
      }),
      bob,
    );
    envelope(r, 400, "invalid_request");
    const a = (await ok("GET", "/v1/export?vault=bob-a", undefined, bob)).vaults["bob-a"];
    expect({ unmatched: a.unmatched_hosts, budgets: a.budgets }).toEqual({ unmatched: "tunnel", budgets: {} });
  });
});

describe("vaults as code: no value, no secret", () => {
  test("export and apply answers never carry a credential value, a webhook's secret part or its signing secret (after the once)", async () => {
    const hook = "https://hooks.slack.com/services/T0/B0/verysecretpart123";
    await ok("POST", "/v1/vaults", { name: "leak-v" }, owner, 201);
    await ok("PUT", "/v1/vaults/leak-v/credentials/LEAK", { value: SECRET }, owner);
    const first = await ok("POST", "/v1/apply", file({ "leak-v": { webhooks: [{ url: hook, format: "slack" }], credentials: [{ key: "LEAK" }] } }), owner);
    expect(first.webhook_secrets.length).toBe(1);
    const secret = first.webhook_secrets[0].secret;
    const exported = JSON.stringify(await ok("GET", "/v1/export?vault=leak-v", undefined, owner));
    const again = JSON.stringify(await ok("POST", "/v1/apply", JSON.parse(exported), owner));
    for (const text of [exported, again]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain("verysecretpart123");
      expect(text).not.toContain(secret);
    }
    expect(JSON.stringify(first)).not.toContain("verysecretpart123");
    // The exported file applied back changes nothing (the hidden URL is matched, not re-added with a new secret).
    expect(JSON.parse(again).changes).toBe(0);
  });

  test("a file cannot carry a value: `value` in a credential or a secret in a service is refused by name", async () => {
    for (const v of [
      { credentials: [{ key: "X", value: "sk-live-nope" }] },
      { services: [{ host: "v.example.com", auth: { type: "bearer", token: "X", value: "sk-live-nope" } }] },
    ]) {
      const r = await apply(file({ "value-v": v }), owner);
      envelope(r, 400, "invalid_request");
      expect(JSON.stringify(r.body)).not.toContain("sk-live-nope");
    }
    expect((await call("GET", "/v1/vaults/value-v", undefined, owner)).status).toBe(404);
  });
});

describe("vaults as code: hostile documents", () => {
  test("deep nesting, huge numbers, duplicate JSON keys and a wrong version are JSON 4xx envelopes, never a 500", async () => {
    const deep = `{"version":1,"vaults":{"d":{"budgets":${"[".repeat(20000)}${"]".repeat(20000)}}}}`;
    const huge = file({ "huge-v": { budgets: { b: { scope: "vault", period: "day", limits: { cost: 1e308, requests: 1e30 } } } } });
    for (const body of [deep, huge, '{"version":1,"vaults":{"dup-v":{}},"vaults":{"dup-v":{"managed":"yes"}}}', { version: 2, vaults: {} }, "[]", "null"]) {
      const r = await call("POST", "/v1/apply", body, owner);
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(typeof r.body?.error).toBe("string");
    }
    expect((await call("GET", "/v1/vaults/huge-v", undefined, owner)).status).toBe(404);
  });

  test("YAML: duplicate keys, deep nesting, unknown tags and unknown keys are reported with their line (exit 2)", () => {
    const cases = [
      ["version: 1\nvaults:\n  x:\n    managed: true\n    managed: false\n", "line 5"],
      ["version: 1\nvaults: " + "[".repeat(20000) + "]".repeat(20000) + "\n", "line 2"],
      ["version: 1\nvaults:\n  x:\n    policy_mode: !!js/function 'function(){}'\n", "line 4"],
      ["version: 1\nvaults:\n  x:\n    servics: []\n", "vaults.x.servics: unknown key (line 4)"],
    ] as const;
    for (const [text, said] of cases) {
      let thrown: any;
      try {
        readVaultFile(text, {});
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(CliFailure);
      expect(thrown.exitCode).toBe(2);
      expect(thrown.message).toContain(said);
    }
  });
});

describe("vaults as code: dry run and idempotence", () => {
  test("a dry run creates nothing and changes nothing; applying a rich file twice changes nothing the second time", async () => {
    const rich = file({
      "rich-v": {
        unmatched_hosts: "deny",
        policy_mode: "report",
        services: [
          {
            host: "API.Example.COM",
            auth: { type: "bearer", token: "EX" },
            rules: [{ methods: ["get", "POST"], paths: ["/v1/*"] }],
            rules_mode: "enforce",
            description: "d",
          },
          { host: "api.stripe.com", template: "stripe", operations: ["read"], keys: { token: "ST" } },
          { host: "off.example.com:8443", auth: { type: "header", header: "X-Key", token: "EX" }, enabled: false },
        ],
        credentials: [{ key: "EX" }, { key: "ST" }],
        webhooks: [{ url: "https://hooks.example.com/a/b/c", format: "json" }],
        budgets: {
          cheap: { scope: "vault", period: "day", limits: { cost: 0.5 } },
          hosts: { scope: "hosts", hosts: ["B.example.com", "a.example.com", "a.example.com"], period: "none", limits: { requests: 3 } },
          svc: { scope: "service", service: "API.example.com", period: "month", limits: { total_tokens: 10 }, soft_percent: 50, soft_action: "notify" },
        },
      },
    });
    const dry = await ok("POST", "/v1/apply?dry_run=true", rich, owner);
    expect(dry.changes).toBeGreaterThan(0);
    expect(dry.webhook_secrets).toEqual([]);
    expect((await call("GET", "/v1/vaults/rich-v", undefined, owner)).status).toBe(404);
    const first = await ok("POST", "/v1/apply", rich, owner);
    expect(first.changes).toBe(dry.changes);
    const second = await ok("POST", "/v1/apply", rich, owner);
    expect(second.vaults[0].changes).toEqual([]);
    const exported = await ok("GET", "/v1/export?vault=rich-v", undefined, owner);
    expect((await ok("POST", "/v1/apply", exported, owner)).changes).toBe(0);
    const before = JSON.stringify(exported);
    await ok("POST", "/v1/apply?dry_run=true", file({ "rich-v": { services: [], budgets: {}, webhooks: [], policy_mode: "enforce" } }), owner);
    expect(JSON.stringify(await ok("GET", "/v1/export?vault=rich-v", undefined, owner))).toBe(before);
  });
});

describe("vaults as code: a managed vault refuses every other write", () => {
  test("API writes to a managed vault, including a proposal's approval, references and invites the file does not name, are 409 vault_managed", async () => {
    await ok("POST", "/v1/vaults", { name: "man-v" }, owner, 201);
    await ok("PUT", "/v1/vaults/man-v/credentials/LISTED", { value: "v1" }, owner);
    const bot = await agent("man-v", "man-bot", "proxy");
    const proposal = await ok(
      "POST",
      "/v1/proposals",
      { services: [{ action: "set", host: "prop.example.com", auth: { type: "bearer", token: "LISTED" } }] },
      bot,
      201,
      { "x-vault": "man-v" },
    );
    await ok(
      "POST",
      "/v1/apply",
      file({
        "man-v": {
          managed: true,
          credentials: [{ key: "LISTED" }],
          agents: [{ name: "man-bot", role: "proxy" }],
          members: [{ email: "owner@example.com", role: "admin" }],
        },
      }),
      owner,
    );
    const tries: [string, string, unknown][] = [
      ["PATCH", "/v1/vaults/man-v", { policy_mode: "report" }],
      ["PATCH", "/v1/vaults/man-v", { unmatched_hosts: "deny" }],
      ["DELETE", "/v1/vaults/man-v", undefined],
      ["POST", "/v1/vaults/man-v/services", { host: "x.example.com", auth: { type: "bearer", token: "LISTED" } }],
      ["PUT", "/v1/vaults/man-v/credentials/UNLISTED", { value: "v" }],
      ["DELETE", "/v1/vaults/man-v/credentials/LISTED", undefined],
      ["PUT", "/v1/vaults/man-v/budgets/b", { scope: "vault", period: "day", limits: { requests: 1 } }],
      ["POST", "/v1/vaults/man-v/webhooks", { url: "https://hooks.example.com/x" }],
      ["POST", "/v1/vaults/man-v/invites", { email: "stranger@example.com", role: "admin" }],
      ["POST", "/v1/vaults/man-v/invites", { role: "member" }],
      ["POST", "/v1/vaults/man-v/agent-invites", { name: "man-bot-2", role: "proxy" }],
      ["POST", "/v1/vaults/man-v/agent-invites", { name: "man-bot", role: "admin" }],
      ["POST", `/v1/proposals/${proposal.id}/approve`, { credentials: {} }],
    ];
    for (const [method, path, body] of tries) {
      const r = await call(method, path, body, owner);
      expect({ method, path, status: r.status, error: r.body?.error }).toEqual({ method, path, status: 409, error: "vault_managed" });
    }
    // What the file leaves to people stays open: a value for the key it lists.
    await ok("PUT", "/v1/vaults/man-v/credentials/LISTED", { value: "v2" }, owner);
  });
});
