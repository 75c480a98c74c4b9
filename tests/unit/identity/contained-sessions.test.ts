// Sessions minted by `vault run --contain` carry `contained`, and the principal they resolve to says so
// (every audit record made with it is then marked). Only a boolean is accepted; other sessions are never marked.

import { expect, test } from "bun:test";
import { auditEntry } from "../../../src/egress/audit.ts";
import { isContained } from "../../../src/identity/index.ts";
import { createTestApi } from "../../helpers/api.ts";

async function setUp() {
  const h = await createTestApi();
  const owner = (await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } })).body.token as string;
  await h.call("POST", "/v1/vaults", { token: owner, body: { name: "main" } });
  return { h, owner };
}

test("a session minted with contained: true resolves to a contained principal and is listed as such", async () => {
  const { h, owner } = await setUp();
  const minted = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main", contained: true } });
  expect(minted.status).toBe(201);
  expect(minted.body.contained).toBe(true);
  const plain = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main" } });
  expect(plain.body.contained).toBe(false);

  expect(isContained(await h.domain.auth.authenticate(minted.body.token))).toBe(true);
  expect(isContained(await h.domain.auth.authenticate(plain.body.token))).toBe(false);
  expect(isContained(await h.domain.auth.authenticate(owner))).toBe(false);

  const listed = await h.call("GET", "/v1/sessions?vault=main", { token: owner });
  const byId = new Map(listed.body.sessions.map((s: { id: string; contained: boolean }) => [s.id, s.contained]));
  expect(byId.get(minted.body.id)).toBe(true);
  expect(byId.get(plain.body.id)).toBe(false);
});

test("contained must be a boolean", async () => {
  const { h, owner } = await setUp();
  for (const contained of ["yes", 1, null]) {
    const res = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main", contained } });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("contained");
  }
});

test("audit records made with a contained session are marked, and read back marked through the logs API", async () => {
  const { h, owner } = await setUp();
  const vaultId = (await h.store.vaults.byName("main"))!.id;
  const request = {
    principal: "user:1",
    vault: { id: vaultId, name: "main" },
    ingress: "transparent",
    method: "GET",
    host: "api.example.com",
    port: 443,
    target: "/x?q=1",
  };
  const outcome = { status: 200, bytesIn: 0, bytesOut: 1, error: null, service: "api.example.com", credentialKeys: ["K"] };
  await h.store.audit.insert([
    auditEntry({ ...request, contained: true }, h.clock.now(), h.clock.now(), outcome),
    auditEntry({ ...request, contained: false }, h.clock.now(), h.clock.now(), outcome),
  ]);
  const logs = (await h.call("GET", "/v1/vaults/main/logs", { token: owner })).body.logs as { id: number; contained: boolean }[];
  expect(logs.map((l) => [l.id, l.contained])).toEqual([
    [2, false],
    [1, true],
  ]);
});
