// Housekeeping: sessions and invites that ended more than 30 days ago are deleted; live ones stay.

import { expect, test } from "bun:test";
import { pruneEndedRows } from "../../../src/workflows/index.ts";
import { createTestApi } from "../../helpers/api.ts";

test("ended sessions and invites older than 30 days are pruned, live ones kept", async () => {
  const h = await createTestApi();
  const owner = (await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } })).body.token as string;
  await h.call("POST", "/v1/vaults", { token: owner, body: { name: "main" } });
  const scoped = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main", ttl_seconds: 300 } });
  expect(scoped.status).toBe(201);
  const revoked = await h.call("POST", "/v1/sessions", { token: owner, body: { vault: "main" } });
  await h.call("DELETE", `/v1/sessions/${revoked.body.id}`, { token: owner });
  await h.call("POST", "/v1/vaults/main/agent-invites", { token: owner, body: { name: "bot" } }); // expires in 15 min
  const count = async (table: string) => Number((await h.store.db.get<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`))!.n);
  expect(await count("sessions")).toBe(3);
  expect(await count("invites")).toBe(1);

  h.clock.advance(29 * 86_400_000);
  await pruneEndedRows(h.domain);
  expect(await count("sessions")).toBe(3); // ended, but not 30 days ago yet

  h.clock.advance(2 * 86_400_000);
  expect((await h.call("GET", "/v1/auth/whoami", { token: owner })).status).toBe(401); // idle for 31 days
  await pruneEndedRows(h.domain);
  expect(await count("sessions")).toBe(1); // the owner's user session: ended by idleness, kept until its absolute expiry
  expect(await count("invites")).toBe(0);
});
