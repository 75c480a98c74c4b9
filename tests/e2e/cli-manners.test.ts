// A group named alone runs its `list`, checked against a real broker with the CLI run from source:
// `broker auth sessions` lists the sessions, `broker vault` the vaults, `broker service` the services,
// and a flag given to the bare group goes to `list` (`broker credential --json`).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { sourceCli } from "./cli-from-source.ts";
import { type Broker, startBroker } from "./proxy-fixture.ts";

let broker: Broker;
let home: string;
const outputs: string[] = [];
const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

beforeAll(async () => {
  broker = await startBroker({ caPem: (await createTestPki()).caPem });
  home = mkdtempSync(join(tmpdir(), "broker-cli-manners-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  await ok(["service", "add", "api.manners.test", "--auth", "bearer", "--token", "API_KEY"]);
  await ok(["credential", "set", "API_KEY"], "manners-value\n");
});
afterAll(async () => {
  await broker?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("bare groups run their list", () => {
  test("`broker auth sessions` lists the sessions", async () => {
    const bare = await ok(["auth", "sessions"]);
    expect(bare).toContain("(this session)");
    expect(bare).toMatch(/^ID\s+KIND\s+VAULT/);
    // The same table as `list` (compared by id: LAST SEEN moves with every call).
    const ids = (table: string) => table.split("\n").map((line) => line.split(" ")[0]);
    expect(ids(bare)).toEqual(ids(await ok(["auth", "sessions", "list"])));
  });

  test("`broker vault` and `broker service` list vaults and services", async () => {
    const vaults = await ok(["vault"]);
    expect(vaults).toContain(broker.vault);
    expect(vaults).toBe(await ok(["vault", "list"]));
    const services = await ok(["service"]);
    expect(services).toContain("api.manners.test");
    expect(services).toBe(await ok(["service", "list"]));
  });

  test("a flag after a bare group is list's flag", async () => {
    const keys = JSON.parse(await ok(["credential", "--json"])) as { key: string }[];
    expect(keys.map((k) => k.key)).toContain("API_KEY");
    const typo = await cli(["credential", "--jsno"]);
    expect({ code: typo.code, stderr: typo.stderr }).toEqual({ code: 2, stderr: "error: unknown option --jsno\ndid you mean: --json?\n" });
  });

  test("a group without list shows its help and succeeds", async () => {
    const r = await cli(["owner", "settings"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("USAGE broker owner settings get|set");
    expect(r.stderr).toBe("");
  });

  test("no output holds the credential's value", () => {
    for (const text of outputs) expect(text).not.toContain("manners-value");
  });
});
