// `broker service add|update|list` with rules, the CLI run from source against an in-process broker:
// the rules the person types with --allow are the ones /proxy then enforces, `update` replaces or
// removes them, `list` shows them in words, and mistakes get a message and a next step.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { expectEnvelope, startBroker, type Broker } from "./proxy-fixture.ts";
import { sourceCli } from "./cli-from-source.ts";

const SECRET = `sk-cli-rules-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let broker: Broker;
let host: string;
let home: string;
const outputs: string[] = [];

const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  upstream = await startUpstream();
  broker = await startBroker({ caPem: upstream.pki.caPem });
  host = `127.0.0.1:${upstream.port}`;
  home = mkdtempSync(join(tmpdir(), "broker-cli-rules-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  await ok(["credential", "set", "GH_TOKEN"], `${SECRET}\n`);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

const status = async (method: string, path: string) => (await broker.proxy(host, path, { method })).status;

describe("broker service with rules", () => {
  test("add --allow (repeated) sets the rules /proxy enforces, and says so in words", async () => {
    const out = await ok([
      "service",
      "add",
      host,
      "--auth",
      "bearer",
      "--token",
      "GH_TOKEN",
      "--allow",
      "GET HEAD /repos/*/issues/**",
      "--allow=post /repos/*/issues",
    ]);
    expect(out).toContain(`Added ${host}`);
    expect(out).toContain("Agents may use GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues.");
    expect(await status("GET", "/repos/acme/issues/1/comments")).toBe(200);
    expect(await status("POST", "/repos/acme/issues")).toBe(200);
    const refused = await broker.proxy(host, "/repos/acme/issues/1", { method: "DELETE" });
    const body = await expectEnvelope(refused, 403, "request_not_allowed");
    expect(body.allowed).toEqual([
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["POST"], paths: ["/repos/*/issues"] },
    ]);
  });

  test("list shows the rules in words; --json carries them as data", async () => {
    const table = await ok(["service", "list"]);
    expect(table.split("\n")[0]).toMatch(/^HOST\s+AUTH\s+ENABLED\s+DESCRIPTION\s+ALLOWS$/);
    expect(table).toContain("GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues");
    const [svc] = JSON.parse(await ok(["service", "list", "--json"]));
    expect(svc.rules).toEqual([
      { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
      { methods: ["POST"], paths: ["/repos/*/issues"] },
    ]);
  });

  test("update --allow replaces the rules; --no-rules removes them", async () => {
    const out = await ok(["service", "update", host, "--allow", "DELETE /repos/*/issues/*"]);
    expect(out).toBe(`Updated ${host} in vault ${broker.vault}: agents may use DELETE on /repos/*/issues/*.\n`);
    expect(await status("DELETE", "/repos/acme/issues/1")).toBe(200);
    expect(await status("GET", "/repos/acme/issues/1")).toBe(403);
    const cleared = await ok(["service", "update", host, "--no-rules"]);
    expect(cleared).toContain("agents may use every method and path");
    expect(await status("PUT", "/anything/at/all")).toBe(200);
    expect(await ok(["service", "list"])).toMatch(/every method and path\n$/);
    expect(JSON.parse(await ok(["service", "list", "--json"]))[0].rules).toBeUndefined();
  });

  test("mistakes say what went wrong and what to do", async () => {
    const bad = await cli(["service", "update", host, "--allow", "GET /repos/../admin"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      'error: --allow "GET /repos/../admin": in path /repos/../admin, dot segments are not allowed\nhint: paths start with /; * matches one segment, ** any number; .., //, ;, %2F, %5C, %00 and backslashes are refused\n',
    );
    const missing = await cli(["service", "update", "nope.example.com", "--no-rules"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no service for nope.example.com");
    expect(await status("PUT", "/still/open")).toBe(200); // nothing changed by the failures
  });

  test("no CLI output holds the credential", () => {
    for (const o of outputs) expect(o).not.toContain(SECRET);
  });
});
