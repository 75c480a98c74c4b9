// The login throttle over a real listener with real curl, on a broker whose rate-limit profile is `off`:
// wrong passwords become 429 with an integer Retry-After, the right one succeeds once the lock ends, and the
// log names the throttled account without ever holding a password.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestPki } from "../helpers/pki.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let t = Date.UTC(2026, 0, 1);

beforeAll(async () => {
  const pki = await createTestPki();
  broker = await startBroker({ caPem: pki.caPem, now: () => t }); // BROKER_RATELIMIT_PROFILE=off in the fixture
});
afterAll(() => broker?.stop());

async function curlLogin(password: string): Promise<{ status: number; headers: string; body: any }> {
  const proc = Bun.spawn(
    [
      "curl",
      "-sS",
      "-D",
      "-",
      "-H",
      "content-type: application/json",
      "--data-binary",
      JSON.stringify({ email: "owner@example.com", password }),
      `${broker.apiUrl}/v1/auth/login`,
    ],
    { stdout: "pipe", stderr: "pipe" },
  );
  const out = await new Response(proc.stdout).text();
  expect(await proc.exited).toBe(0);
  const [head = "", body = ""] = out.split("\r\n\r\n");
  return { status: Number(/^HTTP\/[\d.]+ (\d{3})/.exec(head)?.[1]), headers: head.toLowerCase(), body: JSON.parse(body) };
}

test("curl: five wrong passwords get 401, then 429 with Retry-After; the right one works after the wait", async () => {
  const wrong = "wrong-password-e2e-guess";
  for (let i = 0; i < 5; i++) expect((await curlLogin(`${wrong}-${i}`)).status).toBe(401);
  for (const password of [`${wrong}-5`, "correct horse battery"]) {
    const limited = await curlLogin(password);
    expect(limited.status).toBe(429);
    expect(limited.headers).toContain("\nretry-after: 1");
    expect(limited.headers).toContain("\nx-broker-error: rate_limited");
    expect(limited.body).toMatchObject({ error: "rate_limited", retry_after: 1 });
  }
  t += 1000;
  const ok = await curlLogin("correct horse battery");
  expect(ok.status).toBe(200);
  expect(typeof ok.body.token).toBe("string");
  const throttled = broker.logLines.filter((l) => l.includes('"event":"login_throttled"'));
  expect(throttled.length).toBe(1);
  expect(JSON.parse(throttled[0]!)).toMatchObject({ level: "warn", scope: "account", email: "owner@example.com", failures: 5, lock_s: 1 });
  for (const line of broker.logLines) {
    expect(line).not.toContain(wrong);
    expect(line).not.toContain("correct horse battery");
  }
});
