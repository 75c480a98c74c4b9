import { afterAll, beforeAll, expect, test } from "bun:test";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

const TOKEN = "hvs.SCRATCHtoken0123456789abcdefgh";
const clock = { t: Date.now() };
let store: TestVaultServer; let up: TestUpstream; let broker: Broker;
beforeAll(async () => {
  store = await startVaultServer({ now: () => clock.t } as any);
  store.addToken(TOKEN);
  up = await startUpstream();
  broker = await startBroker({ caPem: up.pki.caPem, now: () => clock.t });
});
afterAll(async () => { await broker?.stop(); await up?.close(); await store?.close(); });

test("idle", async () => {
  const u = broker.userToken;
  const must = async (m: string, p: string, b: unknown, s = 200) => { const r = await broker.api(m, p, b, u); if (r.status !== s) throw new Error(`${m} ${p} ${r.status} ${JSON.stringify(r.body)}`); return r.body; };
  store.put("team-a/db", { v: "value-one-AAAAAAAAAAAA" });
  await must("POST", "/v1/secret-stores", { name: "corp", kind: "vault", address: store.address, ca_pem: store.pki.caPem, auth: { method: "token", token: TOKEN }, refresh_seconds: 300, grace_seconds: 3600 }, 201);
  await must("PUT", "/v1/secret-stores/corp/vaults/proxy-e2e", {});
  await must("PUT", `/v1/vaults/proxy-e2e/credentials/KEY`, { ref: "corp:team-a/db#v" });
  const host = `127.0.0.1:${up.port}`;
  await must("POST", `/v1/vaults/proxy-e2e/services`, { host, auth: { type: "header", header: "x-cred", token: "KEY" } }, 201);
  const sent = () => up.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "x-cred")?.[1];
  const ask = async () => { const r = await broker.proxy(host, "/x"); await r.text(); return r.status; };
  expect(await ask()).toBe(200);
  expect(sent()).toBe("value-one-AAAAAAAAAAAA");
  for (let i = 0; i < 16; i++) {
    clock.t += 250_000;
    await Bun.sleep(1_100);
    expect(await ask()).toBe(200);
  }
  console.log("reads so far", store.counts.reads);
  store.put("team-a/db", { v: "value-two-BBBBBBBBBBBB" });
  clock.t += 310_000;
  await Bun.sleep(1_300);
  clock.t += 10_000;
  await Bun.sleep(1_300);
  expect(await ask()).toBe(200);
  console.log("reads after", store.counts.reads);
  expect(sent()).toBe("value-two-BBBBBBBBBBBB");
}, 120_000);
