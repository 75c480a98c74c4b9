// A change to one secret store connection must leave the values read through the others alone (issue 36; the
// registry's own header: "every value read through a changed connection is dropped", only that one). Here the
// owner's connection "team-a" is shared with the vault, its value injected, then its store goes down: the value
// must keep serving for the connection's grace (an hour here). Creating an unrelated connection "team-b" in the
// meantime must not change that: an agent's curl under `broker vault run` still gets team-a's last value, and the
// credential still shows when it was last read.

import { afterAll, beforeAll, expect, test } from "bun:test";
import {
  requireCurl,
  startRecordingUpstream,
  startStoreBroker,
  VAULT,
  type RecordingUpstream,
  type StoreAgent,
  type StoreBroker,
} from "../helpers/secret-stores/e2e-broker.ts";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";

const hasCurl = requireCurl();
const VALUE = `team-a-value-${crypto.randomUUID()}`;
const TOKEN = `hvs.${crypto.randomUUID().replaceAll("-", "")}`;
let store: TestVaultServer;
let other: TestVaultServer;
let upstream: RecordingUpstream;
let broker: StoreBroker;
let agent: StoreAgent;
const agentSaw: string[] = [];

beforeAll(async () => {
  if (!hasCurl) return;
  [store, other, upstream] = await Promise.all([startVaultServer(), startVaultServer(), startRecordingUpstream("authorization", "Bearer ")]);
  store.addToken(TOKEN);
  store.put("app/api", { token: VALUE });
  broker = await startStoreBroker({ cas: [upstream.caPem] });
  agent = await broker.agent("change-agent");
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await Promise.allSettled([store?.close(), other?.close(), upstream?.upstream.close()]);
});

const connection = (name: string, server: TestVaultServer, token: string) => ({
  name,
  kind: "vault",
  address: server.address,
  ca_pem: server.pki.caPem,
  refresh_seconds: 10,
  grace_seconds: 3600,
  auth: { method: "token", token },
});

test.skipIf(!hasCurl)(
  "creating another connection keeps serving a shared connection's last value through its grace",
  async () => {
    expect((await broker.api("POST", "/v1/secret-stores", connection("team-a", store, TOKEN))).status).toBe(201);
    expect((await broker.api("PUT", `/v1/secret-stores/team-a/vaults/${VAULT}`)).status).toBe(200);
    const set = await broker.api("PUT", `/v1/vaults/${VAULT}/credentials/API_KEY`, { ref: "team-a:app/api#token" });
    expect([set.status, set.body?.reference?.last_error]).toEqual([200, null]);
    expect((await broker.api("POST", `/v1/vaults/${VAULT}/services`, { host: upstream.host, auth: { type: "bearer", token: "API_KEY" } })).status).toBe(201);
    const url = `https://${upstream.host}/`;

    const first = await agent.curl(url);
    agentSaw.push(first.response, first.stderr);
    expect([first.status, upstream.values.at(-1)]).toEqual([200, VALUE]);

    // team-a's store goes down: its last value serves for the grace (an hour).
    await store.stop();
    const down = await agent.curl(url);
    agentSaw.push(down.response, down.stderr);
    expect([down.status, upstream.values.at(-1)]).toEqual([200, VALUE]);
    const before = (await broker.api("GET", `/v1/vaults/${VAULT}/credentials/API_KEY`)).body.reference;
    expect(before.last_refresh).toEqual(expect.any(String));

    // Another team's connection is created (not even shared): nothing about team-a changed.
    expect((await broker.api("POST", "/v1/secret-stores", connection("team-b", other, `hvs.${crypto.randomUUID().replaceAll("-", "")}`))).status).toBe(201);
    const after = (await broker.api("GET", `/v1/vaults/${VAULT}/credentials/API_KEY`)).body.reference;
    const still = await agent.curl(url);
    agentSaw.push(still.response, still.stderr);
    expect({ status: still.status, body: still.status === 200 ? "" : still.body }).toEqual({ status: 200, body: "" });
    expect(upstream.values.at(-1)).toBe(VALUE);
    expect(after.last_refresh).toBe(before.last_refresh);

    for (const text of [...agentSaw, ...broker.seen, broker.server.logs()]) {
      expect(text).not.toContain(VALUE);
      expect(text).not.toContain(TOKEN);
    }
  },
  60_000,
);
