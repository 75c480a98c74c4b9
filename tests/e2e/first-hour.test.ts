// The snags of a newcomer's first hour, each as the user meets it (issue 34): the proposal hint for an
// IP-literal host is accepted by /v1/proposals as it is (where the network guard would reach the
// address; refused with the guard's reason where it would not), `*` is every method in the CLI's rules,
// and `--approve` alone on a service that allowed everything holds those requests and keeps the rest.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { sourceCli } from "./cli-from-source.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let home = "";
const outputs: string[] = [];
const SECRET = `sk_first_${crypto.randomUUID()}`;
const { ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["pay.test"], ips: ["127.0.0.1"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("pay.test", ["127.0.0.1"]);
  home = mkdtempSync(join(tmpdir(), "broker-first-hour-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  await ok(["credential", "set", "PAY_KEY"], `${SECRET}\n`);
});

afterAll(async () => {
  await expectNoLeak(broker, SECRET, outputs);
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("the proposal hint for an IP-literal host", () => {
  test("is accepted as it is where the guard reaches the address, and refused with the guard's reason where it does not", async () => {
    const host = `127.0.0.1:${upstream.port}`;
    const denied = await broker.proxy(host, "/v1/x");
    expect(denied.status).toBe(403);
    const hint = (await denied.json()).proposal_hint;
    outputs.push(JSON.stringify(hint));
    const filed = await broker.api("POST", "/v1/proposals", hint.proposal, broker.sessionToken);
    expect(filed.status).toBe(201);
    const blocked = structuredClone(hint.proposal);
    blocked.services[0].host = "169.254.169.254";
    const refused = await broker.api("POST", "/v1/proposals", blocked, broker.sessionToken);
    expect(refused.status).toBe(400);
    expect(refused.body.field).toBe("services[0].host");
    expect(refused.body.message).toContain("169.254.169.254 is an address the broker will not reach");
  });
});

describe("rules as people type them", () => {
  test("--approve alone on a new service holds those requests and keeps every other method and path allowed", async () => {
    const host = `pay.test:${upstream.port}`;
    const out = await ok(["service", "add", host, "--auth", "bearer", "--token", "PAY_KEY", "--approve", "POST /v1/refunds"]);
    expect(out).toContain("POST on /v1/refunds (each request approved by a human)");
    expect(out).toContain("GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS on /**");
    const read = await broker.proxy(host, "/v1/charges");
    outputs.push(await read.clone().text());
    expect(read.status).toBe(200);
    const refund = await broker.proxy(host, "/v1/refunds", { method: "POST", body: "x=1" });
    outputs.push(await refund.clone().text());
    expect(refund.status).toBe(428);
  });

  test("`*` is every method; on a service with rules, --approve alone replaces them as the help says", async () => {
    const host = `pay.test:${upstream.port}`;
    const star = await ok(["service", "update", host, "--allow", "* /v1/**"]);
    expect(star).toContain("GET, HEAD, POST, PUT, PATCH, DELETE and OPTIONS on /v1/**");
    const replaced = await ok(["service", "update", host, "--approve", "POST /v1/refunds"]);
    expect(replaced).toContain("agents may use POST on /v1/refunds (each request approved by a human).");
  });
});
