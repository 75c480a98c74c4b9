// Templates as a user meets them, end to end through the broker (issue 33's acceptance): the GitHub
// template with `read` lets an agent's GET through with the credential injected and refuses its DELETE;
// an agent's proposal of `{"template": "stripe", "operations": ["read"]}` is worded on the approval page
// and, once approved, a read passes and a refund is refused. A local HTTPS upstream on port 443 of its
// own loopback address stands in for api.github.com and api.stripe.com (BROKER_RESOLVE maps the names to
// it; the network guard still checks the address, so the allowlist names the loopback range).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomInt } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sourceCli } from "./cli-from-source.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const ADDRESS = `127.${randomInt(1, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`; // one per run: files run side by side
const HOSTS = ["api.github.com", "api.stripe.com"];
let upstream: TestUpstream;
let broker: Broker;
const GITHUB_VALUE = `ghp_${crypto.randomUUID().replaceAll("-", "")}`;
const STRIPE_VALUE = `sk_test_${crypto.randomUUID().replaceAll("-", "")}`;
/** Everything the broker answered, for the leak check. */
const outputs: string[] = [];
const kept = <T>(value: T): T => (outputs.push(typeof value === "string" ? value : JSON.stringify(value)), value);

beforeAll(async () => {
  upstream = await startUpstream(
    (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end('{"ok":true}');
    },
    { host: ADDRESS, port: 443, names: { dns: HOSTS, ips: [] } },
  );
  broker = await startBroker({
    caPem: upstream.pki.caPem,
    env: { BROKER_RESOLVE: HOSTS.map((h) => `${h}:443:${ADDRESS}`).join(","), BROKER_NETWORK_ALLOWLIST: "127.0.0.0/8" },
  });
});

afterAll(async () => {
  for (const value of [GITHUB_VALUE, STRIPE_VALUE]) await expectNoLeak(broker, value, outputs);
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

let home = "";
const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

const lastAuthorization = () => upstream.received.at(-1)?.rawHeaders.find(([name]) => name.toLowerCase() === "authorization")?.[1];

describe("a service from the GitHub template, read only", () => {
  test("the agent's GET carries the credential; its DELETE is refused before the upstream", async () => {
    await broker.setCredential("GITHUB_TOKEN", GITHUB_VALUE);
    const added = await broker.api("POST", `/v1/vaults/${broker.vault}/services`, { template: "github", operations: ["read"] }, broker.userToken);
    kept(added.body);
    expect(added.status).toBe(201);
    expect(added.body.template.said).toBe("GitHub (api.github.com), read only");

    const read = await broker.proxy("api.github.com", "/repos/acme/widgets");
    kept(await read.clone().text());
    expect(read.status).toBe(200);
    expect(lastAuthorization()).toBe(`Bearer ${GITHUB_VALUE}`);
    const seen = upstream.received.length;

    const del = await broker.proxy("api.github.com", "/repos/acme/widgets", { method: "DELETE" });
    expect(del.status).toBe(403);
    expect(kept(await del.json()).error).toBe("request_not_allowed");
    expect(upstream.received.length).toBe(seen);
  });
});

describe("an agent proposes Stripe, read only", () => {
  test("the approval page words it; once approved a read passes and a refund is refused", async () => {
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ template: "stripe", operations: ["read"] }], credentials: [{ key: "STRIPE_SECRET_KEY", description: "Stripe secret key" }] },
      broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    const page = await fetch(filed.body.approval_url.replace(/^https?:\/\/[^/]+/, broker.apiUrl));
    const html = kept(await page.text());
    expect(html).toContain("Stripe (api.stripe.com), read only");
    expect(html).toContain("read:");

    const approved = await broker.api("POST", `/v1/proposals/${filed.body.id}/approve`, { credentials: { STRIPE_SECRET_KEY: STRIPE_VALUE } }, broker.userToken);
    kept(approved.body);
    expect(approved.status).toBe(200);

    const charges = await broker.proxy("api.stripe.com", "/v1/charges?limit=3");
    kept(await charges.clone().text());
    expect(charges.status).toBe(200);
    expect(lastAuthorization()).toBe(`Bearer ${STRIPE_VALUE}`);
    const seen = upstream.received.length;

    const refund = await broker.proxy("api.stripe.com", "/v1/refunds", {
      method: "POST",
      body: "charge=ch_1",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(refund.status).toBe(403);
    expect(kept(await refund.json()).error).toBe("request_not_allowed");
    expect(upstream.received.length).toBe(seen);
  });
});

describe("the CLI", () => {
  test("template list and show; service add --template with its own settings; refusals named against the flags", async () => {
    home = mkdtempSync(join(tmpdir(), "broker-cli-templates-"));
    await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
    await ok(["vault", "use", broker.vault]);
    const list = await ok(["template", "list"]);
    expect(list).toContain("github ");
    expect(Number(/(\d+) templates\./.exec(list)?.[1])).toBeGreaterThanOrEqual(40);
    const show = await ok(["template", "show", "twilio"]);
    expect(show).toContain("your own:   --username:");
    const missing = await cli(["service", "add", "--template", "twilio"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--username is needed for Twilio");
    const badOp = await cli(["service", "add", "--template", "twilio", "--username", "AC1", "--operations", "admin"]);
    expect(badOp.code).toBe(2);
    expect(badOp.stderr).toContain("--operations must be one of read, write, destructive");
    const added = await ok(["service", "add", "--template", "twilio", "--username", "AC1", "--operations", "read,write", "--key", "TWILIO_MAIN"]);
    expect(added).toContain("Added api.twilio.com to vault");
    expect(added).toContain("(Twilio (api.twilio.com), read and write)");
    expect(await ok(["service", "list"])).toContain("Twilio (api.twilio.com), read and write");
  });
});
