// Wildcards over a public suffix (`*.github.io`, `*.co.uk`, `*.com`) through the API: refused with 400
// invalid_request naming the field and saying why, when a human adds or changes a service and when an agent
// proposes one. A row stored before the rule can still be removed.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, createHarness, createVault, type Harness, register } from "./fixtures.ts";

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v");
});

const SUFFIX_WILDCARDS = ["*.github.io", "*.herokuapp.com", "*.co.uk", "*.com", "*.s3.amazonaws.com"];

function expectRefusal(res: { status: number; body: any; headers: Headers }, field: string, pattern: string) {
  expect({ status: res.status, error: res.body?.error, field: res.body?.field }).toEqual({ status: 400, error: "invalid_request", field });
  expect(res.headers.get("x-broker-error")).toBe("invalid_request");
  expect(res.body.message).toContain(`${pattern} would match every site under the`);
  expect(res.body.message).toContain("name the host, e.g. you.");
}

describe("POST /v1/vaults/v/services", () => {
  test.each(SUFFIX_WILDCARDS)("%p is refused", async (host) => {
    const res = await h.call("POST", "/v1/vaults/v/services", { token: owner, body: { host, auth: { type: "passthrough" } } });
    expectRefusal(res, "host", host);
    const list = await h.call("GET", "/v1/vaults/v/services", { token: owner });
    expect(list.body.services).toEqual([]);
  });

  test("a wildcard one level below the suffix, and the exact suffix host, are accepted", async () => {
    for (const host of ["*.you.github.io", "github.io"]) {
      const res = await h.call("POST", "/v1/vaults/v/services", { token: owner, body: { host, auth: { type: "passthrough" } } });
      expect(res.status).toBe(201);
    }
  });
});

describe("a row stored before the rule", () => {
  beforeEach(async () => {
    const vault = await h.store.vaults.byName("v");
    await h.store.services.put(
      {
        vaultId: vault!.id,
        host: "*.github.io",
        description: "",
        authType: "passthrough",
        authKey: null,
        authHeader: null,
        authPrefix: null,
        authUsername: null,
        enabled: true,
      },
      Date.now(),
    );
  });

  test("PATCH is refused: changing it would keep the wildcard", async () => {
    const res = await h.call("PATCH", `/v1/vaults/v/services/${encodeURIComponent("*.github.io")}`, { token: owner, body: { description: "x" } });
    expectRefusal(res, "host", "*.github.io");
  });

  test("DELETE removes it", async () => {
    const res = await h.call("DELETE", `/v1/vaults/v/services/${encodeURIComponent("*.github.io")}`, { token: owner });
    expect(res.status).toBe(204);
    expect((await h.call("GET", "/v1/vaults/v/services", { token: owner })).body.services).toEqual([]);
  });
});

describe("POST /v1/proposals", () => {
  test.each(SUFFIX_WILDCARDS)("%p is refused, naming services[1].host", async (host) => {
    const agent = await addAgent(h, owner, "v", "proxy", "bot");
    const service = (host: string) => ({ action: "set", host, description: "d", auth: { type: "passthrough" } });
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: { services: [service("ok.example.com"), service(host)] },
    });
    expectRefusal(res, "services[1].host", host);
  });
});
