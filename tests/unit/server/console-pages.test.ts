// The console's lists that can grow show one page (CONSOLE_PAGE_SIZE entries) and a plain link to the
// next one (`?after=` or, for decided proposals, `?before=`: "Older"), with a way back to the first; no
// script. Services, agents, the Account page's sessions, proposals and held requests. The rows are made
// through the store where the API would take many calls or the proxy (agents, sessions, decided proposals, held requests).

import { beforeAll, describe, expect, test } from "bun:test";
import { CONSOLE_PAGE_SIZE } from "../../../src/server/console/page-links.tsx";
import { setUpOwnerConsole, type PageBrowser } from "./console-fixtures.ts";
import { newSession } from "../store/conformance-fixtures.ts";
import { expectNoLeak, sentinel, setCredential, type Harness } from "./fixtures.ts";

const MORE = CONSOLE_PAGE_SIZE + 2;
const two = (n: number) => String(n).padStart(2, "0");
let h: Harness;
let owner: string;
let b: PageBrowser;
let stored: string;
let vaultId: number;

beforeAll(async () => {
  ({ h, owner, b } = await setUpOwnerConsole("v1"));
  vaultId = (await h.store.vaults.byName("v1"))!.id;
  stored = sentinel("console-pages");
  await setCredential(h, { token: owner }, "v1", "API_KEY", stored);
});

/** The href of the link `id`'s navigation holds with `word` in it, decoded from the HTML. */
function linkIn(html: string, navId: string, word: string): string | undefined {
  const nav = new RegExp(`<nav[^>]*id="${navId}"[^>]*>([\\s\\S]*?)</nav>`).exec(html)?.[1] ?? "";
  const m = [...nav.matchAll(/<a href="([^"]+)"[^>]*>([^<]*)<\/a>/g)].find((a) => a[2]!.includes(word));
  return m?.[1]?.replaceAll("&amp;", "&");
}

/** Opens `path`, checks the first page holds `first` and not `last`, follows its link `word`, and answers the second page's HTML. */
async function followNext(path: string, navId: string, word: "Next" | "Older", first: string, last: string): Promise<string> {
  const one = await b.get(path);
  expect(one.status).toBe(200);
  expect(one.text).toContain(first);
  expect(one.text).not.toContain(last);
  expect(linkIn(one.text, navId, "First page")).toBeUndefined();
  const next = linkIn(one.text, navId, word);
  expect(next).toMatch(/\?(after|before)=/);
  const two = await b.get(next!);
  expect(two.status).toBe(200);
  expect(two.text).toContain(last);
  expect(two.text).not.toContain(first);
  expect(linkIn(two.text, navId, word)).toBeUndefined();
  expect(linkIn(two.text, navId, "First page")).toBe(path);
  return two.text;
}

describe("one page at a time, with a link to the next", () => {
  test("services: the first 50 by host, then the rest", async () => {
    for (let i = 0; i < MORE; i++) {
      const res = await h.call("POST", "/v1/vaults/v1/services", {
        token: owner,
        body: { host: `svc-${two(i)}.example.com`, auth: { type: "bearer", token: "API_KEY" } },
      });
      expect(res.status).toBe(201);
    }
    const second = await followNext("/vaults/v1/services", "service-pages", "Next", "svc-00.example.com", `svc-${two(MORE - 1)}.example.com`);
    expect(second).toContain(`svc-${two(CONSOLE_PAGE_SIZE)}.example.com`);
    const bad = await b.get("/vaults/v1/services?after=%20");
    expect(bad.status).toBe(400);
  });

  test("agents of the vault, by name; the heading counts them all", async () => {
    for (let i = 0; i < MORE; i++) {
      const agent = await h.store.agents.create({ name: `bot-${two(i)}`, role: "member", createdBy: null, createdAt: 1 });
      await h.store.access.setGrant(vaultId, agent.id, "proxy", 1);
    }
    await h.store.agents.create({ name: "bot-elsewhere", role: "member", createdBy: null, createdAt: 1 });
    const first = await b.get("/vaults/v1/agents");
    expect(first.text).toContain(`Agents (${MORE})`);
    expect(first.text).not.toContain("bot-elsewhere");
    await followNext("/vaults/v1/agents", "agent-pages", "Next", "bot-00", `bot-${two(MORE - 1)}`);
  });

  test("the Account page's sessions, oldest first", async () => {
    const now = h.clock.now();
    for (let i = 0; i < MORE; i++) await h.store.sessions.create(newSession(`console-${i}`, { userId: 1, createdAt: now, expiresAt: now + 3_600_000 }));
    const first = await b.get("/account");
    const next = linkIn(first.text, "session-pages", "Next");
    expect(next).toMatch(/^\/account\?after=\d+$/);
    const second = await b.get(next!);
    expect(second.status).toBe(200);
    expect(linkIn(second.text, "session-pages", "First page")).toBe("/account");
  });

  test("decided proposals, newest first, with Older; those awaiting a decision on the first page only", async () => {
    const made: number[] = [];
    for (let i = 0; i <= MORE; i++) {
      const p = await h.store.proposals.create({
        vaultId,
        message: `proposal-${two(i)}`,
        userMessage: "",
        services: [{ action: "set", host: `asked-${two(i)}.example.com`, description: "", auth: { type: "passthrough" } }],
        credentials: [],
        createdBy: "agent:1",
        createdAt: h.clock.now(),
        expiresAt: h.clock.now() + 3_600_000,
        approvalTokenHash: `appr-console-${i}`,
        approvalExpiresAt: h.clock.now() + 3_600_000,
      });
      made.push(p.id);
      if (i > 0) await h.store.proposals.decide(p.id, "rejected", 1, h.clock.now());
    }
    // asked-00 still waits; asked-01 … asked-52 were decided, newest first: 52 … 03 on the first page, 02 and 01 older.
    const second = await followNext("/vaults/v1/proposals", "proposal-pages", "Older", `asked-${two(MORE)}.example.com`, "asked-01.example.com");
    expect(second).not.toContain("asked-00.example.com");
    expect(second).not.toContain('id="pending"');
    const first = await b.get("/vaults/v1/proposals");
    expect(first.text).toContain("asked-00.example.com");
  });

  test("held requests: those awaiting a decision first; the heading counts the vault's", async () => {
    for (let i = 0; i < MORE; i++) {
      await h.store.requestApprovals.create({
        publicId: `apr_consolepage${two(i)}xx`,
        vaultId,
        principal: "agent:1",
        viaSession: false,
        fingerprint: String(i).padStart(64, "0"),
        method: "POST",
        host: "api.example.com",
        target: `/refunds/held-${two(i)}`,
        service: "api.example.com",
        headers: [],
        bodyPreview: null,
        bodyBytes: 0,
        bodySha256: "e".repeat(64),
        createdAt: h.clock.now(),
        expiresAt: h.clock.now() + 600_000,
        sealedNonce: null,
        sealedDescription: null,
      });
    }
    const first = await b.get("/vaults/v1/requests");
    expect(first.text).toContain(`Waiting for a decision (${MORE})`);
    await followNext("/vaults/v1/requests", "request-pages", "Next", "held-00", `held-${two(MORE - 1)}`);
  });
});

test("the stored credential is on no page and in no log line", () => {
  for (const page of b.pages) expect(page.html.includes(stored)).toBe(false);
  for (const line of b.logs) expect(line.includes(stored)).toBe(false);
  expectNoLeak(h, stored);
});
