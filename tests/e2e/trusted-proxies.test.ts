// BROKER_TRUSTED_PROXIES over a real listener with real curl: curl on 127.0.0.1 plays the reverse proxy. When
// 127.0.0.1 is trusted, the sign-in throttle locks the X-Forwarded-For client (also split over several headers)
// and not its neighbours behind the same proxy; when it is not, X-Forwarded-For is ignored. The log names the
// locked address and never a password; an https:// BROKER_PUBLIC_URL without trusted proxies is warned about.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestPki } from "../helpers/pki.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

const PASSWORD = "correct horse battery";
const WRONG = "wrong-password-xff-e2e";
let trusting: Broker;
let notTrusting: Broker;
let caPem: string;

beforeAll(async () => {
  const pki = await createTestPki();
  caPem = pki.caPem;
  [trusting, notTrusting] = await Promise.all([
    startBroker({ caPem: pki.caPem, env: { BROKER_TRUSTED_PROXIES: "127.0.0.1" } }),
    startBroker({ caPem: pki.caPem, env: { BROKER_TRUSTED_PROXIES: "192.0.2.1" } }), // some other proxy, not curl
  ]);
});
afterAll(async () => {
  await trusting?.stop();
  await notTrusting?.stop();
});

async function curlLogin(broker: Broker, email: string, password: string, forwardedFor: string[]): Promise<number> {
  const headers = forwardedFor.flatMap((v) => ["-H", `X-Forwarded-For: ${v}`]);
  const proc = Bun.spawn(
    [
      "curl",
      "-sS",
      "-o",
      "/dev/null",
      "-w",
      "%{http_code}",
      ...headers,
      "-H",
      "content-type: application/json",
      "--data-binary",
      JSON.stringify({ email, password }),
      `${broker.apiUrl}/v1/auth/login`,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  return Number(out);
}

/** 20 wrong passwords over 20 emails: the per-address threshold, never the per-account one. */
async function failTwentyTimes(broker: Broker, forwardedFor: (i: number) => string[]): Promise<void> {
  for (let i = 0; i < 20; i++) expect(await curlLogin(broker, `user${i}@example.com`, `${WRONG}-${i}`, forwardedFor(i))).toBe(401);
}

describe("curl through a trusted proxy (BROKER_TRUSTED_PROXIES=127.0.0.1)", () => {
  test("the X-Forwarded-For client is locked, its neighbour behind the same proxy is not", async () => {
    await failTwentyTimes(trusting, () => ["203.0.113.66, 198.51.100.1"]);
    expect(await curlLogin(trusting, "owner@example.com", PASSWORD, ["198.51.100.1"])).toBe(429);
    // Two headers are one list: the rightmost entry is still the attacker's.
    expect(await curlLogin(trusting, "owner@example.com", PASSWORD, ["198.51.100.7", "198.51.100.1"])).toBe(429);
    expect(await curlLogin(trusting, "owner@example.com", PASSWORD, ["198.51.100.2"])).toBe(200);
    expect(await curlLogin(trusting, "owner@example.com", PASSWORD, ["198.51.100.1", "198.51.100.2"])).toBe(200);
    const locked = trusting.logLines.filter((l) => l.includes('"event":"login_throttled"')).map((l) => JSON.parse(l));
    expect(locked.length).toBeGreaterThan(0);
    expect(locked[0]).toMatchObject({ scope: "address", address: "198.51.100.1", failures: 20 });
    for (const line of trusting.logLines) {
      expect(line).not.toContain(WRONG);
      expect(line).not.toContain(PASSWORD);
    }
  });
});

describe("curl from a peer that is not a trusted proxy", () => {
  test("X-Forwarded-For is ignored: a new spoofed address on every attempt still locks the real one", async () => {
    await failTwentyTimes(notTrusting, (i) => [`198.51.100.${i + 1}`]);
    expect(await curlLogin(notTrusting, "owner@example.com", PASSWORD, ["198.51.100.99"])).toBe(429);
    const locked = notTrusting.logLines.filter((l) => l.includes('"event":"login_throttled"')).map((l) => JSON.parse(l));
    expect(locked[0]).toMatchObject({ scope: "address", address: "127.0.0.1" });
  });
});

test("start-up warns when BROKER_PUBLIC_URL is https:// and BROKER_TRUSTED_PROXIES is empty", async () => {
  await using behindTls = await startBroker({ caPem, env: { BROKER_PUBLIC_URL: "https://broker.example.com" } });
  const warning = behindTls.logLines.find((l) => l.includes('"event":"trusted_proxies_unset"')) ?? "";
  expect(JSON.parse(warning)).toMatchObject({ level: "warn" });
  expect(warning).toContain("BROKER_TRUSTED_PROXIES");
  expect(trusting.logLines.some((l) => l.includes("trusted_proxies_unset"))).toBe(false);
});
