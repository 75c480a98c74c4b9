// Proposals that carry rules, through the JSON API: the agent asks for a service with rules, the
// human narrows them while approving, and the applied service enforces the narrowed rules; an agent
// refused by a rule files the proposal its hint suggests, and approving it widens the rules.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, startNamedUpstream, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let host: string;
const SECRET = `sk-proposed-${crypto.randomUUID()}`;
const outputs: string[] = [];

beforeAll(async () => {
  ({ upstream, broker, host } = await startNamedUpstream());
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

async function agentCall(method: string, path: string): Promise<Response> {
  const res = await broker.proxy(host, path, { method });
  outputs.push(await dumpResponse(res.clone()));
  return res;
}

describe("proposals with rules", () => {
  test("asked rules are validated like a service's", async () => {
    const bad = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host, auth: { type: "bearer", token: "API_KEY" }, rules: [{ methods: ["GET"], paths: ["/a/%2F"] }] }], credentials: [{ key: "API_KEY" }] },
      broker.sessionToken,
    );
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe("services[0].rules[0].paths[0]");
  });

  test("the human narrows the asked rules while approving; the service enforces what the human chose", async () => {
    const asked = [
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["DELETE"], paths: ["/repos/**"] },
    ];
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host, auth: { type: "bearer", token: "API_KEY" }, rules: asked }], credentials: [{ key: "API_KEY" }], message: "issues" },
      broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    const shown = await broker.api("GET", `/v1/proposals/${filed.body.id}`, undefined, broker.userToken);
    expect(shown.body.services[0].rules).toEqual(asked);

    const typo = await broker.api(
      "POST",
      `/v1/proposals/${filed.body.id}/approve`,
      { credentials: { API_KEY: SECRET }, rules: { "other.test": null } },
      broker.userToken,
    );
    expect(typo.status).toBe(400);
    expect(typo.body.field).toBe("rules.other.test");

    const approved = await broker.api(
      "POST",
      `/v1/proposals/${filed.body.id}/approve`,
      { credentials: { API_KEY: SECRET }, rules: { [host]: [asked[0]] } },
      broker.userToken,
    );
    expect(approved.status).toBe(200);
    expect(approved.body.status).toBe("applied");

    const ok = await agentCall("GET", "/repos/acme/issues/7");
    expect(ok.status).toBe(200);
    expect(upstream.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1]).toBe(`Bearer ${SECRET}`);
    await expectEnvelope(await agentCall("DELETE", "/repos/acme"), 403, "request_not_allowed");
  });

  test("the hint of a refusal is a proposal that, once approved, allows exactly that request too", async () => {
    const refused = await expectEnvelope(await agentCall("POST", "/repos/acme/issues"), 403, "request_not_allowed");
    const filed = await broker.api("POST", "/v1/proposals", refused.proposal_hint.proposal, broker.sessionToken);
    expect(filed.status).toBe(201);
    // The stored value stays: the slot-less proposal keeps API_KEY as it is.
    const approved = await broker.api("POST", `/v1/proposals/${filed.body.id}/approve`, { credentials: {} }, broker.userToken);
    expect(approved.body.status).toBe("applied");
    expect((await agentCall("POST", "/repos/acme/issues")).status).toBe(200);
    expect((await agentCall("GET", "/repos/acme/issues/7")).status).toBe(200);
    await expectEnvelope(await agentCall("DELETE", "/repos/acme"), 403, "request_not_allowed");
  });

  test("nothing the broker answered or logged holds the credential", async () => {
    await expectNoLeak(broker, SECRET, outputs);
  });
});
