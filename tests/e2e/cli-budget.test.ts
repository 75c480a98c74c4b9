// `broker budget set|list|reset|remove`, the CLI run from source against an in-process broker: a person sets a daily
// token and money budget and an agent's request budget, lists them with their usage and reset time, resets and
// removes one; bad flags exit 2 naming the flag; an agent's session is refused with what to do. Counting through the
// proxy is not here yet (issue 38).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { sourceCli } from "./cli-from-source.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

let broker: Broker;
let home: string;
const outputs: string[] = [];
const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  broker = await startBroker({ caPem: (await createTestPki()).caPem });
  home = mkdtempSync(join(tmpdir(), "broker-cli-budget-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  const inv = await broker.api("POST", `/v1/vaults/${broker.vault}/agent-invites`, { name: "ci-bot", role: "admin" }, broker.userToken);
  expect(inv.status).toBe(201);
  expect((await fetch(inv.body.invite_url, { method: "POST" })).status).toBe(201);
});

afterAll(async () => {
  await broker?.stop();
  rmSync(home, { recursive: true, force: true });
});

test("set, list, reset and remove budgets", async () => {
  const set = await ok(["budget", "set", "daily-llm", "--tokens", "200000", "--cost", "20", "--soft", "80", "--soft-action", "approve"]);
  expect(set).toMatch(/^Budget daily-llm of vault \S+: 0\/200000 tokens, 0\.00\/20\.00 USD per day \(resets \d{4}-\d\d-\d\dT00:00:00\.000Z\)\.\n$/);
  await ok(["budget", "set", "bot-hourly", "--agent", "ci-bot", "--period", "hour", "--requests", "500"]);
  const list = await ok(["budget", "list"]);
  expect(list).toContain("bot-hourly");
  expect(list).toContain("agent ci-bot");
  expect(list).toContain("0/500 requests");
  const json = JSON.parse(await ok(["budget", "list", "--json"]));
  expect(json.map((b: { name: string; state: string }) => [b.name, b.state])).toEqual([
    ["bot-hourly", "ok"],
    ["daily-llm", "ok"],
  ]);
  expect(await ok(["budget", "reset", "daily-llm"])).toBe(`Budget daily-llm of vault ${broker.vault} counts again from nothing this day.\n`);
  expect(await ok(["budget", "remove", "bot-hourly"])).toBe(`Removed budget bot-hourly from vault ${broker.vault}.\n`);
  const gone = await cli(["budget", "remove", "bot-hourly"]);
  expect(gone.code).not.toBe(0);
  expect(gone.stderr).toContain("broker budget list");
});

test("bad flags exit 2 naming the flag; help on every subcommand", async () => {
  for (const [args, says] of [
    [["budget", "set", "x"], "give at least one limit"],
    [["budget", "set", "x", "--tokens", "lots"], "--tokens must be a whole number"],
    [["budget", "set", "x", "--cost", "-3"], "--cost must be an amount above 0"],
    [["budget", "set", "x", "--requests", "1", "--agent", "a", "--service", "s"], "at most one of --agent, --service, --hosts and --template"],
  ] as const) {
    const r = await cli([...args]);
    expect({ args, code: r.code, says: r.stderr.includes(says) }).toEqual({ args, code: 2, says: true });
  }
  const refused = await cli(["budget", "set", "x", "--requests", "1", "--period", "fortnight"]);
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toContain("period");
  for (const sub of ["set", "list", "reset", "remove"]) expect((await cli(["budget", sub, "--help"])).code).toBe(0);
});
