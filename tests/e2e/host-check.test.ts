// The API's Host check over a real listener with real curl: a DNS name rebound to the broker's address
// (curl --resolve plays the attacker's DNS) and a forged Host header get 421 misdirected_request with the
// envelope; loopback names, the bound address and BROKER_ALLOWED_HOSTS are answered.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestPki } from "../helpers/pki.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let port: string;

beforeAll(async () => {
  const pki = await createTestPki();
  broker = await startBroker({ caPem: pki.caPem, env: { BROKER_ALLOWED_HOSTS: "broker.lan" } });
  port = new URL(broker.apiUrl).port;
});
afterAll(() => broker?.stop());

async function curl(args: string[]): Promise<{ status: number; headers: string; body: string }> {
  const proc = Bun.spawn(["curl", "-sS", "-D", "-", ...args], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const cut = out.indexOf("\r\n\r\n");
  const head = out.slice(0, cut);
  return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(head)?.[1]), headers: head.toLowerCase(), body: out.slice(cut + 4) };
}

function expectMisdirected(res: { status: number; headers: string; body: string }): void {
  expect(res.status).toBe(421);
  expect(res.headers).toContain("\nx-broker-error: misdirected_request");
  expect(JSON.parse(res.body)).toMatchObject({ error: "misdirected_request" });
  expect(res.body).not.toContain("evil");
}

test("curl -H 'Host: evil.example' gets 421 with the envelope, on the API and on /proxy", async () => {
  expectMisdirected(await curl(["-H", "Host: evil.example", `${broker.apiUrl}/health`]));
  expectMisdirected(await curl(["-H", `Host: evil.example:${port}`, "-H", `authorization: Bearer ${broker.sessionToken}`, `${broker.apiUrl}/discover`]));
  expectMisdirected(await curl(["-H", "Host: evil.example", `${broker.apiUrl}/proxy/api.example.com/x`]));
});

test("a rebound DNS name (evil.example resolving to 127.0.0.1) is refused, as a browser's request would be", async () => {
  expectMisdirected(await curl(["--resolve", `evil.example:${port}:127.0.0.1`, `http://evil.example:${port}/health`]));
  expectMisdirected(
    await curl([
      "--resolve",
      `evil.example:${port}:127.0.0.1`,
      "-X",
      "POST",
      "-H",
      "content-type: application/json",
      "--data",
      '{"email":"owner@example.com","password":"x"}',
      `http://evil.example:${port}/v1/auth/login`,
    ]),
  );
});

test("loopback names, the bound address and BROKER_ALLOWED_HOSTS are answered", async () => {
  for (const url of [`http://127.0.0.1:${port}/health`, `http://localhost:${port}/health`]) expect((await curl([url])).status).toBe(200);
  expect((await curl(["-H", "Host: LOCALHOST.", `${broker.apiUrl}/health`])).status).toBe(200);
  expect((await curl(["--resolve", `broker.lan:${port}:127.0.0.1`, `http://broker.lan:${port}/health`])).status).toBe(200);
  expect((await curl(["-H", `Host: Broker.LAN.:${port}`, "-H", `authorization: Bearer ${broker.sessionToken}`, `${broker.apiUrl}/discover`])).status).toBe(200);
});

test("bound to 0.0.0.0 without names: a start-up warning says what to set; IP literals are answered, names are not", async () => {
  const pki = await createTestPki();
  await using wide = await startBroker({ caPem: pki.caPem, env: { BROKER_HOST: "0.0.0.0" } });
  const warning = wide.logLines.find((l) => l.includes('"event":"api_host_names_unset"')) ?? "";
  expect(warning).toContain("BROKER_PUBLIC_URL");
  expect(warning).toContain("BROKER_ALLOWED_HOSTS");
  const widePort = new URL(wide.apiUrl).port;
  for (const host of ["10.9.8.7", `192.168.1.5:${widePort}`, "localhost"])
    expect((await curl(["-H", `Host: ${host}`, `http://127.0.0.1:${widePort}/health`])).status).toBe(200);
  expectMisdirected(await curl(["--resolve", `evil.example:${widePort}:127.0.0.1`, `http://evil.example:${widePort}/health`]));
  expect(broker.logLines.some((l) => l.includes("api_host_names_unset"))).toBe(false); // loopback bind: nothing to say
});
