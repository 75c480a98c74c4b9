// The CLI's list commands read every page the server answers (following next_cursor), so their output
// is the whole list as before paging; `--limit N` stops after N. readPages on its own (pages, the stop,
// a server from before paging, a repeated cursor), then `broker service list` and `broker agent list`
// from source against an in-process broker holding more services than one page.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { parseListLimit, readPages } from "../../../src/cli/kit/pages.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { LIMITS } from "../../../src/policy/index.ts";
import { createApi } from "../../../src/server/app.ts";
import { addAgent, createHarness, createVault, expectNoLeak, type Harness, register, sentinel, setCredential } from "../server/fixtures.ts";

describe("readPages", () => {
  /** A server of `entries` answering `size` a page, `after` the last one shown; it records each query. */
  function fakeServer(entries: string[], size: number) {
    const queries: string[] = [];
    const fetchPage = async (query: string) => {
      queries.push(query);
      const q = new URLSearchParams(query);
      const from = q.has("after") ? entries.indexOf(q.get("after")!) + 1 : 0;
      const page = entries.slice(from, from + Math.min(size, Number(q.get("limit"))));
      const more = from + page.length < entries.length;
      return { items: page, next_cursor: more ? page.at(-1)! : null };
    };
    return { queries, fetchPage };
  }

  test("follows next_cursor to the last page; --limit stops early and asks for no more than it needs", async () => {
    const all = ["a", "b", "c", "d", "e"];
    const s = fakeServer(all, 2);
    expect(await readPages(s.fetchPage, (b) => b.items, "after")).toEqual(all);
    expect(s.queries).toEqual([`limit=${LIMITS.listPageMax}`, `limit=${LIMITS.listPageMax}&after=b`, `limit=${LIMITS.listPageMax}&after=d`]);
    const t = fakeServer(all, 2);
    expect(await readPages(t.fetchPage, (b) => b.items, "after", 3)).toEqual(["a", "b", "c"]);
    expect(t.queries).toEqual(["limit=3", "limit=1&after=b"]);
  });

  test("a server from before paging (no next_cursor) is one page; a cursor sent twice is refused", async () => {
    expect(
      await readPages(
        async (): Promise<{ items: string[]; next_cursor?: string }> => ({ items: ["x", "y"] }),
        (b) => b.items,
        "before",
      ),
    ).toEqual(["x", "y"]);
    const loop = readPages(
      async () => ({ items: ["x"], next_cursor: "same" }),
      (b) => b.items,
      "after",
    );
    await expect(loop).rejects.toThrow("the server sent the same page twice");
  });

  test("--limit is a whole number from 1", () => {
    expect(parseListLimit(undefined)).toBeUndefined();
    expect(parseListLimit("7")).toBe(7);
    for (const bad of ["0", "-1", "abc", "1.5", ""]) expect(() => parseListLimit(bad)).toThrow(CliFailure);
  });
});

describe("list commands against a broker", () => {
  const SERVICES = LIMITS.listPageMax + 3;
  let h: Harness;
  let server: ReturnType<typeof Bun.serve>;
  let owner: string;
  let home: string;
  let stored: string;
  const outputs: string[] = [];
  const serverLog = createMemoryLogger();

  beforeAll(async () => {
    h = await createHarness();
    owner = (await register(h, "owner@example.com")).token;
    await createVault(h, owner, "v");
    stored = sentinel("cli-pages");
    await setCredential(h, { token: owner }, "v", "API_KEY", stored);
    const vault = (await h.store.vaults.byName("v"))!;
    for (let i = 0; i < SERVICES; i++) {
      const host = `svc-${String(i).padStart(4, "0")}.example.com`;
      await h.store.services.put(
        {
          vaultId: vault.id,
          host,
          description: "",
          authType: "bearer",
          authKey: "API_KEY",
          authHeader: null,
          authPrefix: null,
          authUsername: null,
          enabled: true,
        },
        1,
      );
    }
    for (const name of ["zed", "amy", "kim"]) await addAgent(h, owner, "v", "proxy", name);
    const app = createApi({ domain: h.domain, log: serverLog });
    server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => app.fetch(req) });
    home = mkdtempSync(join(tmpdir(), "broker-cli-pages-"));
  });

  afterAll(() => {
    server?.stop(true);
    rmSync(home, { recursive: true, force: true });
  });

  async function cli(args: string[]): Promise<string> {
    const proc = Bun.spawn([process.execPath, resolve(import.meta.dir, "..", "..", "..", "src", "index.ts"), ...args], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: home,
        BROKER_CONFIG_DIR: join(home, "config"),
        BROKER_ADDR: `http://127.0.0.1:${server.port}`,
        BROKER_SESSION_TOKEN: owner,
        BROKER_VAULT: "v",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    outputs.push(stdout, stderr);
    expect({ args, code, stderr }).toEqual({ args, code: 0, stderr: "" });
    return stdout;
  }

  test("`service list` prints every service, read over two pages; --limit stops after N", async () => {
    const all = JSON.parse(await cli(["service", "list", "--json"])) as { host: string }[];
    expect(all.length).toBe(SERVICES);
    expect(all.map((s) => s.host)).toEqual([...all.map((s) => s.host)].sort());
    expect(all.at(-1)!.host).toBe(`svc-${String(SERVICES - 1).padStart(4, "0")}.example.com`);
    const three = JSON.parse(await cli(["service", "list", "--json", "--limit", "3"])) as { host: string }[];
    expect(three.map((s) => s.host)).toEqual(["svc-0000.example.com", "svc-0001.example.com", "svc-0002.example.com"]);
    const table = await cli(["service", "list", "--limit", "2"]);
    expect(table.trim().split("\n").length).toBe(3); // the header and two services
  });

  test("`agent list --limit 2` shows the first two by name", async () => {
    const two = JSON.parse(await cli(["agent", "list", "--json", "--limit", "2"])) as { name: string }[];
    expect(two.map((a) => a.name)).toEqual(["amy", "kim"]);
  });

  test("the help names --limit", async () => {
    expect(await cli(["service", "list", "--help"])).toContain("--limit");
  });

  test("the stored credential is in no output, answer or log line", () => {
    for (const text of [...outputs, ...serverLog.lines]) expect(text.includes(stored)).toBe(false);
    expectNoLeak(h, stored);
  });
});
