// Cloud metadata and credential endpoints through the in-process broker: refused with 403 egress_blocked naming the
// endpoint, even with BROKER_ALLOW_PRIVATE_RANGES=true and an allowlist that covers every address.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectEnvelope, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;

beforeAll(async () => {
  upstream = await startUpstream();
  broker = await startBroker({
    caPem: upstream.pki.caPem,
    env: {
      BROKER_ALLOW_PRIVATE_RANGES: "true",
      BROKER_NETWORK_ALLOWLIST: "169.254.0.0/16,100.64.0.0/10,192.0.0.0/24,fd00::/8,0.0.0.0/0,::/0",
    },
  });
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

const ENDPOINTS: readonly (readonly [name: string, answer: string, label: string])[] = [
  ["imds.test", "169.254.169.254", "AWS, GCP, Azure and OCI instance metadata"],
  ["imds6.test", "fd00:ec2::254", "AWS instance metadata over IPv6"],
  ["ecs.test", "169.254.170.2", "ECS task credentials"],
  ["ecs-mapped.test", "::ffff:169.254.170.2", "ECS task credentials"],
  ["eks.test", "169.254.170.23", "EKS pod identity"],
  ["eks6.test", "fd00:ec2::23", "EKS pod identity over IPv6"],
  ["alibaba.test", "100.100.100.200", "Alibaba Cloud instance metadata"],
  ["alibaba-nat64.test", "64:ff9b::6464:64c8", "Alibaba Cloud instance metadata"],
  ["oracle.test", "192.0.0.192", "Oracle Cloud instance metadata"],
  ["oracle-6to4.test", "2002:c000:c0::", "Oracle Cloud instance metadata"],
];

describe("credential endpoints stay blocked with private ranges allowed and everything allowlisted", () => {
  for (const [name, answer, label] of ENDPOINTS) {
    test(`${name} -> ${answer}`, async () => {
      broker.dns.set(name, [answer]);
      await broker.addService(name, { type: "passthrough" });
      const body = await expectEnvelope(await broker.proxy(name, "/latest/meta-data/"), 403, "egress_blocked");
      expect(body.host).toBe(name);
      expect(body.message).toContain(`cloud metadata endpoint (${label})`);
    });
  }

  test("the allowlist still opens an ordinary private address (the policy above is really permissive)", async () => {
    broker.dns.set("upstream.test", ["127.0.0.1"]);
    await broker.addService(`upstream.test:${upstream.port}`, { type: "passthrough" });
    expect((await broker.proxy(`upstream.test:${upstream.port}`, "/")).status).toBe(200);
  });
});
