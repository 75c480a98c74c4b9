// Who decides a proposal, through the API (architecture.md D9; the domain checks the role itself):
// nobody but a person who is admin or member of the proposal's own vault, and each refusal keeps the
// status, code and message the API has always given.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { callApi, startNamedUpstream, type Broker } from "./proxy-fixture.ts";
import type { TestUpstream } from "../helpers/upstream.ts";

let broker: Broker;
let upstream: TestUpstream;
const tokens: Record<string, string> = {};
let proposalId: number;
let otherProposalId: number;

beforeAll(async () => {
  ({ broker, upstream } = await startNamedUpstream());
  const b = broker;
  // An agent with admin in the vault.
  const inv = await b.api("POST", `/v1/vaults/${b.vault}/agent-invites`, { name: "bot", role: "admin" }, b.userToken);
  expect(inv.status).toBe(201);
  tokens.agent = (await b.api("POST", new URL(inv.body.invite_url).pathname)).body.token;
  // A scoped session of the owner with the admin role.
  const s = await b.api("POST", "/v1/sessions", { vault: b.vault, role: "admin" }, b.userToken);
  expect(s.status).toBe(201);
  tokens.scopedAdmin = s.body.token;
  // A person with the proxy role in the vault; a person who is admin of another vault only.
  for (const [name, role, vault] of [
    ["proxyMember", "proxy", b.vault],
    ["otherAdmin", "admin", "other-vault"],
  ] as const) {
    const who = { email: `${name.toLowerCase()}@example.com`, password: "correct horse battery staple" };
    expect((await callApi(b.apiUrl, "POST", "/v1/auth/register", who)).status).toBe(201);
    tokens[name] = (await callApi(b.apiUrl, "POST", "/v1/auth/login", who)).body.token;
    if (vault !== b.vault && (await b.api("GET", `/v1/vaults/${vault}`, undefined, b.userToken)).status === 404) {
      expect((await b.api("POST", "/v1/vaults", { name: vault }, b.userToken)).status).toBe(201);
    }
    const invite = await b.api("POST", `/v1/vaults/${vault}/invites`, { email: who.email, role }, b.userToken);
    expect(invite.status).toBe(201);
    expect((await callApi(b.apiUrl, "POST", `/v1/vault-invites/${invite.body.token}/accept`, undefined, tokens[name])).status).toBe(200);
  }
  const file = async (vault: string) => {
    const r = await fetch(`${b.apiUrl}/v1/proposals`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens.agent}`, "x-vault": vault, "content-type": "application/json" },
      body: JSON.stringify({
        services: [{ action: "set", host: "api.example.com", auth: { type: "bearer", token: "K" } }],
        credentials: [{ action: "set", key: "K", description: "a key" }],
      }),
    });
    const body = (await r.json()) as { id: number };
    expect(r.status).toBe(201);
    return body.id;
  };
  proposalId = await file(b.vault);
  otherProposalId = await file(b.vault);
});

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

async function decide(id: number, verb: "approve" | "reject", token: string, xVault?: string) {
  const res = await fetch(`${broker.apiUrl}/v1/proposals/${id}/${verb}`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", ...(xVault ? { "x-vault": xVault } : {}) },
    body: JSON.stringify(verb === "approve" ? { credentials: { K: "value-that-must-not-land" } } : {}),
  });
  return { status: res.status, code: res.headers.get("x-broker-error"), body: (await res.json()) as any };
}

const status = async (id: number) => (await broker.api("GET", `/v1/proposals/${id}`, undefined, broker.userToken)).body.status;

describe("review: who may decide a proposal through the API", () => {
  const HUMAN_ONLY = "only a human with a user session can approve or reject proposals";
  for (const verb of ["approve", "reject"] as const) {
    test(`${verb}: an agent with admin in the vault → 403 forbidden, the same message`, async () => {
      const r = await decide(proposalId, verb, tokens.agent!, broker.vault);
      expect([r.status, r.code, r.body.message]).toEqual([403, "forbidden", HUMAN_ONLY]);
      expect(await status(proposalId)).toBe("pending");
    });
    test(`${verb}: an owner's admin scoped session → 403 forbidden`, async () => {
      const r = await decide(proposalId, verb, tokens.scopedAdmin!);
      expect([r.status, r.code, r.body.message]).toEqual([403, "forbidden", HUMAN_ONLY]);
      expect(await status(proposalId)).toBe("pending");
    });
    test(`${verb}: a person with the proxy role → 403 forbidden`, async () => {
      const r = await decide(proposalId, verb, tokens.proxyMember!);
      expect([r.status, r.code]).toEqual([403, "forbidden"]);
      expect(r.body.message).toBe("your role in this vault (proxy) does not allow this");
      expect(await status(proposalId)).toBe("pending");
    });
    test(`${verb}: an admin of another vault → 404 not_found, X-Vault naming their vault changes nothing`, async () => {
      for (const xv of [undefined, "other-vault"]) {
        const r = await decide(proposalId, verb, tokens.otherAdmin!, xv);
        expect([r.status, r.code]).toEqual([404, "not_found"]);
      }
      expect(await status(proposalId)).toBe("pending");
    });
  }
  test("the owner (admin) still approves one and rejects the other", async () => {
    expect((await decide(proposalId, "approve", broker.userToken)).status).toBe(200);
    expect((await decide(otherProposalId, "reject", broker.userToken)).status).toBe(200);
    expect(await status(proposalId)).toBe("applied");
    expect(await status(otherProposalId)).toBe("rejected");
  });
});
