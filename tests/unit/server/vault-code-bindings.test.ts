// Vaults as code with workload bindings (issue 39 point 4): the export writes the bindings to a vault (not their agents,
// which the bindings make), a fresh instance that trusts the issuer reproduces them, a budget on a binding's agent
// included; the owner changes, removes and re-makes them through the file; any other admin may apply a file whose
// bindings match the instance's, and is refused one that would change them; a file naming a binding's agent among the
// agents is told where its role lives.

import { beforeEach, describe, expect, test } from "bun:test";
import { addUser, createHarness, createVault, type Harness, register } from "./fixtures.ts";

type File = { version: 1; vaults: Record<string, Record<string, any>> };
const GITHUB = "https://token.actions.githubusercontent.com";
const ISSUER = { name: "github", issuer: GITHUB, audiences: ["https://broker.example"] };
const DEPLOY = { name: "deploy", vault: "pay", conditions: { repository: "org/pay", ref: ["refs/heads/main", "refs/tags/v*"] }, max_session_seconds: 900 };

async function call(h: Harness, token: string, method: string, path: string, body?: unknown, status = 200) {
  const res = await h.call(method, path, { token, body });
  expect({ path, status: res.status, body: res.body }).toMatchObject({ path, status });
  return res;
}
const exportOf = async (h: Harness, token: string) => (await call(h, token, "GET", "/v1/export?vault=pay")).body as File;
const apply = (h: Harness, token: string, file: unknown) => h.call("POST", "/v1/apply", { token, body: file });
const said = (res: { body: any }) => res.body.vaults.flatMap((v: any) => v.changes.map((c: any) => c.said)) as string[];
const pending = (res: { body: any }) => res.body.vaults.flatMap((v: any) => v.pending.map((c: any) => c.said)) as string[];
const bindings = async (h: Harness, token: string) => (await call(h, token, "GET", "/v1/workload-issuers/github/bindings")).body.bindings as any[];

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "pay");
  await call(h, owner, "POST", "/v1/workload-issuers", ISSUER, 201);
  await call(h, owner, "POST", "/v1/workload-issuers/github/bindings", DEPLOY, 201);
  await call(h, owner, "PUT", "/v1/vaults/pay/budgets/ci", { scope: "agent", agent: "wl-github-deploy", period: "day", limits: { requests: 500 } });
});

describe("export and apply with workload bindings", () => {
  test("the export writes the binding, not its agent; a fresh instance trusting the issuer reproduces both, and its budget", async () => {
    const file = await exportOf(h, owner);
    expect(file.vaults.pay!.workload_bindings).toEqual([
      { issuer: "github", name: "deploy", conditions: DEPLOY.conditions, role: "proxy", max_session_seconds: 900 },
    ]);
    expect(file.vaults.pay!.agents).toEqual([]);
    expect(file.vaults.pay!.budgets.ci).toMatchObject({ scope: "agent", agent: "wl-github-deploy" });

    const fresh = await createHarness();
    const freshOwner = (await register(fresh, "owner@example.com")).token;
    // Without the issuer: left for the owner, nothing guessed (and the budget's agent is not there yet).
    const untrusted = await apply(fresh, freshOwner, { ...file, vaults: { pay: { ...file.vaults.pay, budgets: {} } } });
    expect(untrusted.status).toBe(200);
    expect(pending(untrusted)).toContain(
      "workload issuer github is not trusted on this instance: the owner adds it (broker workload-issuer add github --issuer https://… --audience …), then apply again",
    );
    await call(fresh, freshOwner, "POST", "/v1/workload-issuers", ISSUER, 201);
    const bound = await apply(fresh, freshOwner, file);
    expect(bound.status).toBe(200);
    expect(said(bound)).toEqual([
      "add workload binding github/deploy: repository=org/pay, ref=refs/heads/main|refs/tags/v* → proxy, sessions up to 900s (its workloads act as agent wl-github-deploy)",
      "add budget ci (agent wl-github-deploy: 500 requests per day)",
    ]);
    expect(await exportOf(fresh, freshOwner)).toEqual(file);
    const again = await apply(fresh, freshOwner, file);
    expect({ changes: again.body.changes, pending: pending(again) }).toEqual({ changes: 0, pending: [] });
  });

  test("the owner changes, removes and re-makes bindings through the file", async () => {
    const file = await exportOf(h, owner);
    const withBindings = (list: unknown[]) => ({ ...file, vaults: { pay: { ...file.vaults.pay, budgets: {}, workload_bindings: list } } });
    // Conditions listed in another order are the same binding.
    const reordered = {
      issuer: "github",
      name: "deploy",
      conditions: { ref: DEPLOY.conditions.ref, repository: "org/pay" },
      role: "proxy",
      max_session_seconds: 900,
    };
    const same = await apply(h, owner, { ...file, vaults: { pay: { ...file.vaults.pay, workload_bindings: [reordered] } } });
    expect(same.body.changes).toBe(0);

    const changed = await apply(h, owner, withBindings([{ ...reordered, role: "member", conditions: { repository: "org/pay" } }]));
    expect(said(changed)).toContain("workload binding github/deploy: repository=org/pay → member, sessions up to 900s");
    expect((await bindings(h, owner)).map((b) => [b.name, b.role, b.conditions, b.agent])).toEqual([
      ["deploy", "member", { repository: "org/pay" }, "wl-github-deploy"],
    ]);
    const grants = (await call(h, owner, "GET", "/v1/agents")).body.agents as any[];
    expect(grants.find((a) => a.name === "wl-github-deploy")?.vaults.find((v: any) => v.name === "pay")?.role).toBe("member");

    // Revoked by someone: the file makes its agent again.
    await call(h, owner, "DELETE", "/v1/agents/wl-github-deploy", undefined, 204);
    expect((await bindings(h, owner))[0].agent).toBeNull();
    const remade = await apply(h, owner, withBindings([{ ...reordered, role: "member", conditions: { repository: "org/pay" } }]));
    expect(said(remade)).toEqual(["workload binding github/deploy: its revoked agent made again"]);
    expect((await bindings(h, owner))[0].agent).toBe("wl-github-deploy");

    const removed = await apply(h, owner, withBindings([]));
    expect(said(removed)).toEqual(["remove workload binding github/deploy (its agent and every session exchanged under it end)"]);
    expect(await bindings(h, owner)).toEqual([]);
    expect(((await call(h, owner, "GET", "/v1/agents")).body.agents as any[]).map((a) => a.name)).not.toContain("wl-github-deploy");
  });

  test("another admin applies a file whose bindings match, and is refused one that changes them; nothing is applied then", async () => {
    const bob = await addUser(h, owner, "pay", "bob@example.com", "admin");
    const file = await exportOf(h, bob);
    expect(file.vaults.pay!.workload_bindings).toHaveLength(1);
    const same = await apply(h, bob, { ...file, vaults: { pay: { ...file.vaults.pay, unmatched_hosts: "deny" } } });
    expect({ status: same.status, said: said(same) }).toEqual({ status: 200, said: ["unmatched hosts: tunnel → deny"] });
    for (const list of [[], [{ ...file.vaults.pay!.workload_bindings[0], role: "admin" }]]) {
      const res = await apply(h, bob, { ...file, vaults: { pay: { ...file.vaults.pay, unmatched_hosts: "tunnel", workload_bindings: list } } });
      expect({ status: res.status, error: res.body.error }).toEqual({ status: 403, error: "forbidden" });
      expect(res.body.message).toContain("only the instance owner changes");
    }
    expect((await exportOf(h, owner)).vaults.pay!.unmatched_hosts).toBe("deny");
    expect((await bindings(h, owner)).map((b) => b.role)).toEqual(["proxy"]);
  });

  test("a binding's agent named among the agents is told where its role lives, and keeps it", async () => {
    const file = await exportOf(h, owner);
    const res = await apply(h, owner, { ...file, vaults: { pay: { ...file.vaults.pay, agents: [{ name: "wl-github-deploy", role: "admin" }] } } });
    expect(res.body.changes).toBe(0);
    expect(pending(res)).toEqual([
      "agent wl-github-deploy stands for a workload binding: its role is the binding's (workload_bindings), not listed under agents",
    ]);
  });
});

describe("people named in a file", () => {
  test("an admin adds people they already work with; anyone else is invited, in words that do not tell whether an account exists", async () => {
    const bob = await addUser(h, owner, "pay", "bob@example.com", "admin");
    await addUser(h, owner, "pay", "dave@example.com", "member");
    await register(h, "carol@example.com"); // an account in no vault of bob's
    const file = {
      version: 1,
      vaults: {
        ops: {
          members: [
            { email: "bob@example.com", role: "admin" },
            { email: "dave@example.com", role: "member" },
            { email: "carol@example.com", role: "admin" },
            { email: "nobody@example.com", role: "admin" },
          ],
        },
      },
    };
    const res = await apply(h, bob, file);
    expect(res.status).toBe(200);
    expect(said(res)).toEqual(["create vault ops (you are its admin)", "add member dave@example.com (member)"]);
    const invite = (email: string) =>
      `${email} is not a member of vault ops: invite them (broker vault invite --email ${email} --role admin --vault ops; allowed in a managed vault because the file names them; the broker sends no email)`;
    expect(pending(res)).toEqual([invite("carol@example.com"), invite("nobody@example.com")]);
    // The owner answers for every account.
    const byOwner = await apply(h, owner, {
      version: 1,
      vaults: {
        pay: {
          members: [
            { email: "owner@example.com", role: "admin" },
            { email: "bob@example.com", role: "admin" },
            { email: "dave@example.com", role: "member" },
            { email: "carol@example.com", role: "member" },
          ],
        },
      },
    });
    expect(said(byOwner)).toEqual(["add member carol@example.com (member)"]);
  });
});
