// The console's Logs page names credentials by reference (issue 36) where it shows credential keys: in the
// table, small and muted after the keys, and in the live tail's feed (and so the script's rows).

import { expect, test } from "bun:test";
import { loadRootCa, type CaHolder } from "../../../src/crypto/index.ts";
import { auditEntry } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import { LOG_TAIL_SCRIPT } from "../../../src/server/console/log-tail-script.ts";
import { createBrowser } from "./console-fixtures.ts";
import { createHarness, createVault, register } from "./fixtures.ts";

const REF = "prod-vault:kv/stripe#api_key (version 3)";

test("the Logs page and its feed show a record's references beside its keys; a record without shows none", async () => {
  const h = await createHarness();
  const root = await loadRootCa(h.store, h.domain.dataKey, h.clock.now());
  const ca: CaHolder = { current: root, rotate: async () => root };
  const app = createApi({ domain: h.domain, log: createMemoryLogger(), ca, auditRetention: { days: 30, maxRows: 1_000_000 } });
  const owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "main");
  const vault = (await h.store.vaults.byName("main"))!;
  const request = { principal: "user:1", contained: false, vault, ingress: "explicit", method: "GET", host: "api.example.com", port: 443 };
  const outcome = { status: 200, bytesIn: 0, bytesOut: 1, error: null, service: "api.example.com" };
  await h.store.audit.insert([
    auditEntry({ ...request, target: "/plain" }, h.clock.now(), h.clock.now(), { ...outcome, credentialKeys: ["API_KEY"] }),
    auditEntry({ ...request, target: "/by-ref" }, h.clock.now(), h.clock.now(), { ...outcome, credentialKeys: ["STRIPE"], credentialRefs: [REF] }),
  ]);
  const b = createBrowser(app, { session: owner });
  const page = await b.get("/vaults/main/logs");
  expect(page.status).toBe(200);
  expect(page.text).toContain(`<span class="muted small"> ${REF}</span>`);
  expect(page.text.split(REF)).toHaveLength(2); // once: the record made without references shows none
  const feed = JSON.parse((await b.get("/vaults/main/logs/feed?after=0")).text) as { logs: { request: string; keys: string; refs: string }[] };
  expect(feed.logs.map((r) => [r.request, r.keys, r.refs])).toEqual([
    ["GET api.example.com/plain", "API_KEY", ""],
    ["GET api.example.com/by-ref", "STRIPE", REF],
  ]);
  expect(LOG_TAIL_SCRIPT).toContain('el("span", "muted small", " " + r.refs)');
});
