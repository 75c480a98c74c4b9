import { expect, test } from "bun:test";
import { addAgent, createHarness, createVault, register } from "../unit/server/fixtures.ts";

test("scratch constructor", async () => {
  const h = await createHarness();
  const owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  const agent = await addAgent(h, owner, "v1", "proxy", "bot");
  const rules = [{ methods: ["GET"], paths: ["/read"] }];
  const p = await h.call("POST", "/v1/proposals", {
    token: agent.token,
    headers: agent.headers,
    body: {
      services: [
        { host: "constructor", auth: { type: "passthrough" }, rules },
        { host: "api.example.com", auth: { type: "passthrough" }, rules },
      ],
    },
  });
  console.log(p.status, p.body);
  const a = await h.call("POST", `/v1/proposals/${p.body.id}/approve`, {
    token: owner,
    headers: { "x-vault": "v1" },
    body: { rules: { "api.example.com": rules } },
  });
  console.log(a.status, JSON.stringify(a.body));
  const s = await h.call("GET", "/v1/vaults/v1/services", { token: owner });
  console.log(JSON.stringify(s.body));
  const disc = await h.call("GET", "/discover", { token: agent.token, headers: agent.headers });
  console.log(JSON.stringify(disc.body));
});
