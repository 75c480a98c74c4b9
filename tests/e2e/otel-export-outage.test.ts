// The OTLP export while the collector is down (issue 37): proxied requests are answered as fast as ever,
// the outage is logged once, the spans and audit records wait in memory, and all of them reach the
// collector once it answers again; the database has every record throughout.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { startOtlpReceiver, type OtlpReceiver } from "../helpers/otlp-receiver.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, startBroker, type Broker } from "./proxy-fixture.ts";

const SECRET = `sk-outage-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let collector: OtlpReceiver;
let broker: Broker;
let hp = "";

beforeAll(async () => {
  upstream = await startUpstream();
  collector = await startOtlpReceiver(upstream.pki); // trusted through the fixture's BROKER_UPSTREAM_CA_FILE
  collector.answer(503);
  broker = await startBroker({
    caPem: upstream.pki.caPem,
    // A short timeout: the transport's own retries give up at once, so the queue's pause is what is tested.
    env: { BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_TIMEOUT: "500" },
  });
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(hp, { type: "bearer", token: "API_KEY" });
});

afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  await collector?.close();
});

const events = (name: string) => broker.logLines.filter((l) => l.includes(`"event":"${name}"`));

test("a collector that answers 503: requests go on, the outage is told once, and nothing is lost when it is back", async () => {
  const slowest = { ms: 0 };
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    const res = await broker.proxy(hp, `/during-outage/${i}?token=q`);
    expect(res.status).toBe(200);
    await dumpResponse(res);
    slowest.ms = Math.max(slowest.ms, performance.now() - t0);
  }
  expect(slowest.ms).toBeLessThan(1000); // no request waits for the collector
  const deadline = Date.now() + 10_000;
  while (events("otel_export_failing").length === 0 && Date.now() < deadline) await Bun.sleep(50);
  expect(events("otel_export_failing").length).toBeGreaterThanOrEqual(1);
  expect(events("otel_export_failing").length).toBeLessThanOrEqual(2); // once per signal, not per batch or request
  expect(collector.exports).toEqual([]);
  expect((await broker.auditLogs()).length).toBe(20);

  collector.answer(200);
  const back = Date.now() + 20_000;
  while ((collector.logs().length < 20 || collector.spans().length < 80) && Date.now() < back) await Bun.sleep(100);
  expect(
    collector
      .logs()
      .map((l) => l.attributes["broker.audit.path"])
      .sort(),
  ).toEqual(Array.from({ length: 20 }, (_, i) => `/during-outage/${i}`).sort());
  expect(collector.spans().filter((s) => s.kind === 2)).toHaveLength(20);
  expect(events("otel_export_recovered").length).toBeGreaterThanOrEqual(1);
  expect(events("otel_export_dropped")).toEqual([]);
  for (const e of collector.exports) expect(Buffer.from(e.raw).toString("latin1")).not.toContain(SECRET);
}, 60_000);
