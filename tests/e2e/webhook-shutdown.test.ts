// A webhook delivery in flight when the broker stops (in process, SQLite store): the receiver answers slowly,
// the app's stop() runs during the delivery. Before, the store closed under it and the broker logged
// `webhook_delivery_error` "Cannot use a closed database" after `shutdown_complete`, leaving the hook
// "pending". Now the delivery's outcome is recorded before the store closes, within the grace (delivered)
// or cut at its end (failed, saying why), no error is logged, and nothing is logged after shutdown_complete.

import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore, type WebhookRow } from "../../src/store/index.ts";
import { createTestPki } from "../helpers/pki.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

interface Scene {
  broker: Broker;
  dataDir: string;
  /** Resolves when the receiver has the delivery's request. */
  arrived: Promise<void>;
  /** Lets the receiver answer 200. */
  answer(): void;
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A broker with one webhook on its vault, and a proposal that fires it. The receiver holds every request
 * until answer(), then answers `status`; `held: false` answers at once.
 */
async function deliveryInFlight({ status = 200, held = true } = {}): Promise<Scene> {
  const dir = mkdtempSync(join(tmpdir(), "broker-webhook-stop-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const arrived = Promise.withResolvers<void>();
  const release = Promise.withResolvers<void>();
  if (!held) release.resolve();
  const receiver = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      await req.text();
      arrived.resolve();
      await release.promise;
      return new Response("answer", { status });
    },
  });
  cleanups.push(() => receiver.stop(true));
  const dataDir = join(dir, "data");
  const broker = await startBroker({ caPem: (await createTestPki()).caPem, env: { BROKER_NETWORK_ALLOWLIST: "127.0.0.1", BROKER_DATA_DIR: dataDir } });
  cleanups.push(() => release.resolve()); // lets the receiver's held request end before it stops
  const add = await broker.api("POST", `/v1/vaults/${broker.vault}/webhooks`, { url: `http://127.0.0.1:${receiver.port}/hook` }, broker.userToken);
  expect(add.status).toBe(201);
  const proposal = await fetch(`${broker.apiUrl}/v1/proposals`, {
    method: "POST",
    headers: { authorization: `Bearer ${broker.sessionToken}`, "x-vault": broker.vault, "content-type": "application/json" },
    body: JSON.stringify({
      message: "need the billing API",
      services: [{ action: "set", host: "api.stripe.com", description: "billing", auth: { type: "bearer", token: "STRIPE_KEY" } }],
      credentials: [{ action: "set", key: "STRIPE_KEY", description: "the key" }],
    }),
  });
  expect(proposal.status).toBe(201);
  return { broker, dataDir, arrived: arrived.promise, answer: () => release.resolve() };
}

/** The hook's row, read from the store on disk after the broker stopped. */
async function hookAfterStop(s: Scene): Promise<WebhookRow> {
  const store = await openStore({ dataDir: s.dataDir });
  try {
    const vault = await store.vaults.byName(s.broker.vault);
    const [hook] = await store.webhooks.list(vault!.id);
    return hook!;
  } finally {
    store.close();
  }
}

/** Log events (level and name) from shutting_down on; every line after it must be the broker's own, never an error. */
function shutdownEvents(lines: string[]): string[] {
  const events = lines.map((l) => JSON.parse(l) as { level: string; event: string; err?: unknown });
  return events.slice(events.findIndex((e) => e.event === "shutting_down")).map((e) => `${e.level} ${e.event}`);
}

test("a delivery answered within the grace is recorded as delivered before the store closes", async () => {
  const s = await deliveryInFlight();
  await s.arrived;
  const stopped = s.broker.server.stop({ graceMs: 30_000, reason: "test" });
  s.answer();
  await stopped;
  await Bun.sleep(50); // a late write would fail (and log) on the closed store in these milliseconds
  expect(s.broker.logLines.join("\n")).not.toContain("closed database");
  expect(shutdownEvents(s.broker.logLines)).toEqual(["info shutting_down", "info shutdown_complete"]);
  expect(await hookAfterStop(s)).toMatchObject({ lastStatus: "delivered", lastEvent: "proposal.created", lastAttempts: 1, lastError: null });
});

test("a delivery still unanswered when the grace ends is cut and recorded as failed, saying the broker shut down", async () => {
  const s = await deliveryInFlight();
  await s.arrived;
  await s.broker.server.stop({ graceMs: 0, reason: "test" });
  await Bun.sleep(50);
  expect(s.broker.logLines.join("\n")).not.toContain("closed database");
  expect(shutdownEvents(s.broker.logLines)).toEqual(["info shutting_down", "warn webhook_delivery_failed", "info shutdown_complete"]);
  expect(await hookAfterStop(s)).toMatchObject({
    lastStatus: "failed",
    lastEvent: "proposal.created",
    lastAttempts: 1,
    lastError: "the broker shut down before the receiver answered",
  });
});

test("a retry waiting for its time at shutdown is not left 'retrying': it is recorded as failed, with the last try's error", async () => {
  const s = await deliveryInFlight({ status: 500, held: false });
  await s.arrived;
  // The first try's outcome is recorded; the next try would come a second later (the default backoff).
  const retrying = async () =>
    (await s.broker.api("GET", `/v1/vaults/${s.broker.vault}/webhooks`, undefined, s.broker.userToken)).body.webhooks[0].delivery.status === "retrying";
  while (!(await retrying())) await Bun.sleep(10);
  await s.broker.server.stop({ graceMs: 30_000, reason: "test" });
  await Bun.sleep(50);
  expect(shutdownEvents(s.broker.logLines)).toEqual(["info shutting_down", "info shutdown_complete"]);
  expect(await hookAfterStop(s)).toMatchObject({
    lastStatus: "failed",
    lastAttempts: 1,
    lastError: "not tried again: the broker shut down (last try: the receiver answered HTTP 500)",
  });
});
