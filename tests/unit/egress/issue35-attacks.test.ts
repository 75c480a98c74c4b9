// Issue 35 attacks on the plan-by-host look-up and the echo needles' background re-read (architecture.md
// D11, D22), at the unit level where the timing is exact: two plan caches on one store stand for two
// instances on one PostgreSQL database (each instance has its own caches and hears of the other's
// writes only through an announcement). Vault A's agent uses the first, vault B's the second, and an
// upstream that stores what A sent replays it to B: the value must be in B's answer's needle set.
// Reads are counted, never timed. Never prints a credential value.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAuditLog, type AuditEntry } from "../../../src/egress/audit.ts";
import { JOURNAL_FILE, openAuditJournal } from "../../../src/egress/audit-journal.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { openMemoryStore } from "../../../src/store/index.ts";
import { createPlanCache, type EgressPlan, type PlanCache } from "../../../src/egress/index.ts";
import type { Needles } from "../../../src/egress/redact.ts";
import { redactText } from "../../../src/egress/redact-headers.ts";
import { storeCredential } from "../../../src/crypto/index.ts";
import { HostNotAllowed, ServiceDisabled } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { bearer, observedStore, pagesRead, seedVaults, type ObservedStore } from "../../helpers/big-vault.ts";

const SERVICES = 5_000;
const QUIET = `sk-quiet-${crypto.randomUUID()}`;
let o: ObservedStore;
let big: { id: number; name: string };
let quiet: { id: number; name: string };

beforeAll(async () => {
  o = await observedStore();
  ({ big, quiet } = await seedVaults(o, SERVICES, QUIET));
});

/** The set redacts `value` whole (compared without printing it). */
function holds(n: Needles, value: string): boolean {
  const out = redactText(`<${value}>`, n);
  return out === "<[redacted]>" && !out.includes(value);
}

const injected = (p: EgressPlan) => p.injection?.value.reveal(); // reveal: compared in the test only
const cache = () => createPlanCache(o.store, o.dataKey, () => ({}));

/** Both "instances" warmed: each has read every vault once (their first answers wait for that). */
async function twoInstances(): Promise<{ one: PlanCache; two: PlanCache; quietPlanOnTwo: EgressPlan }> {
  const one = cache();
  const two = cache();
  await one.responseNeedles(await one.plan(quiet, "api.quiet.example", 443));
  const quietPlanOnTwo = await two.plan(quiet, "api.quiet.example", 443);
  await two.responseNeedles(quietPlanOnTwo);
  return { one, two, quietPlanOnTwo };
}

describe("one instance: what it sends is in every answer's set before it goes", () => {
  test("a burst of 50 rotations of a credential far down a 5,000-service vault: each value, sent once, is in the other vault's very next answer", async () => {
    const plans = cache();
    const quietPlan = await plans.plan(quiet, "api.quiet.example", 443);
    await plans.responseNeedles(quietPlan);
    const host = "svc-4990.big.example"; // K499: the last page in host order
    const sent: string[] = [];
    for (let i = 0; i < 50; i++) {
      const v = `sk-burst-${i}-${crypto.randomUUID()}`;
      await storeCredential(o.store, o.dataKey, big.id, "K499", new Secret(v), 3_000_000 + i);
      plans.invalidate(big.id);
      const p = await plans.plan(big, host, 443);
      expect(injected(p) === `Bearer ${v}`).toBe(true);
      await plans.responseNeedles(p); // what the request does before it dials
      sent.push(v);
      // Same tick: B's answer, with no wait for the background read.
      const n = await plans.responseNeedles(quietPlan);
      expect(holds(n, v)).toBe(true);
    }
    const n = await plans.responseNeedles(quietPlan);
    expect(sent.filter((v) => !holds(n, v))).toHaveLength(0); // every rotated value stays (recent half)
  });

  test("a service added on a new credential, a deleted service and a wildcard: sent values stay in the set", async () => {
    const plans = cache();
    const quietPlan = await plans.plan(quiet, "api.quiet.example", 443);
    await plans.responseNeedles(quietPlan);
    const fresh = `sk-fresh-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "FRESH", new Secret(fresh), 4_000_000);
    await o.store.services.put(bearer(big.id, "*.zz-wild.big.example", "FRESH"), 4_000_000);
    plans.invalidate(big.id);
    const p = await plans.plan(big, "a.zz-wild.big.example", 443);
    await plans.responseNeedles(p);
    expect(holds(await plans.responseNeedles(quietPlan), fresh)).toBe(true);
    // Deleted: the value was sent, so it stays looked for (24 h), whatever the read reached.
    await o.store.services.remove(big.id, "*.zz-wild.big.example");
    await o.store.credentials.remove(big.id, "FRESH");
    plans.invalidate(big.id);
    await expect(plans.plan(big, "a.zz-wild.big.example", 443)).rejects.toBeInstanceOf(HostNotAllowed);
    const n = await plans.responseNeedles(quietPlan);
    expect(holds(n, fresh)).toBe(true);
    for (let i = 0; i < 3000; i++) await new Promise((r) => setImmediate(r)); // the background read runs to its end
    expect(holds(await plans.responseNeedles(quietPlan), fresh)).toBe(true);
  });

  test("plans by host: disabled, removed, moved to another host and re-covered by a wildcard take effect on the next request", async () => {
    const plans = cache();
    const host = "svc-123.big.example";
    expect(injected(await plans.plan(big, host, 443))).toBeDefined();
    await o.store.services.put({ ...bearer(big.id, host, "K12"), enabled: false }, 5_000_000);
    plans.invalidate(big.id);
    await expect(plans.plan(big, host, 443)).rejects.toBeInstanceOf(ServiceDisabled);
    // "Edited to another host": removed here, added there; the old host is refused at once, the new one serves.
    await o.store.services.remove(big.id, host);
    await o.store.services.put(bearer(big.id, "moved-123.big.example", "K12"), 5_000_001);
    plans.invalidate(big.id);
    await expect(plans.plan(big, host, 443)).rejects.toBeInstanceOf(HostNotAllowed);
    expect(await plans.has(big, "moved-123.big.example", 443)).toBe(true);
    // A host refused (cached as "no service") is served once a wildcard covering it is added.
    await o.store.services.put(bearer(big.id, "*.big.example", "K13"), 5_000_002);
    plans.invalidate(big.id);
    expect((await plans.plan(big, host, 443)).credentialKeys).toEqual(["K13"]);
    // An exact service added later wins over the wildcard at once.
    await o.store.services.put(bearer(big.id, host, "K14"), 5_000_003);
    plans.invalidate(big.id);
    expect((await plans.plan(big, host, 443)).credentialKeys).toEqual(["K14"]);
    await o.store.services.remove(big.id, "*.big.example");
    plans.invalidate(big.id);
  });
});

describe("two instances on one database (A's agent on the first, B's on the second)", () => {
  // The notification's own delay (D22, README "Not covered"): the second instance knows A's new value only from
  // the store, so until the announcement arrives (15-500 ms measured) B's answers there lack it.
  // Not closed, and cannot be by this instance alone: listed in the README's "Not covered" (the notification's delay).
  test.todo("A's new value sent through instance 1 before instance 2 heard of the change: B's answer on instance 2 must hold it", async () => {
    const { one, two, quietPlanOnTwo } = await twoInstances();
    const v = `sk-unannounced-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K300", new Secret(v), 6_000_000);
    one.invalidate(big.id); // the writing instance drops its own caches at once
    const p = await one.plan(big, "svc-3000.big.example", 443);
    await one.responseNeedles(p); // instance 1 is about to send it
    // Instance 2 has not received the announcement yet: B's answer there is scanned without the value.
    const n = await two.responseNeedles(quietPlanOnTwo);
    expect(holds(n, v)).toBe(true);
  });

  // D22: once instance 2 has heard of the change, B's next answer there waits until the vault is read whole,
  // the new value's service on its last pages included.
  test("instance 2 has heard of the change: B's very next answer there must hold A's new value", async () => {
    const { one, two, quietPlanOnTwo } = await twoInstances();
    const v = `sk-announced-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K480", new Secret(v), 7_000_000); // svc-4800…4809: the last pages
    one.invalidate(big.id);
    await one.responseNeedles(await one.plan(big, "svc-4800.big.example", 443));
    two.invalidate(big.id, true); // the announcement arrives (app/freshness.ts: another instance's write)
    o.reset();
    const n = await two.responseNeedles(quietPlanOnTwo);
    const pagesBeforeAnswer = pagesRead(o);
    expect({ pagesBeforeAnswer, holds: holds(n, v) }).toEqual({ pagesBeforeAnswer, holds: true });
  });
});

// ---------------------------------------------------------------------------------------------------------
// The audit journal's file, broken: never a hang, never a dead writer, always said.

describe("the audit journal's file, broken", () => {
  const dirs: string[] = [];
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), "issue35-journal-"));
    dirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of dirs) {
      Bun.spawnSync(["sh", "-c", `chattr -R -a -i '${d}' 2>/dev/null; true`]);
      rmSync(d, { recursive: true, force: true });
    }
  });
  const entry = (n: number): AuditEntry => ({
    at: 1_700_000_000_000 + n,
    principal: "agent:1",
    vaultId: 1,
    vault: "main",
    ingress: "explicit",
    method: "GET",
    host: "api.example.com",
    path: `/things/${n}`,
    service: "api.example.com",
    credentialKeys: "API_KEY",
    status: 200,
    bytesIn: 0,
    bytesOut: 10,
    durationMs: 3,
    error: null,
    contained: false,
    approvedBy: null,
  });

  test("a named pipe or a device in its place is refused at once (it was read for ever: a pipe blocks, /dev/full never ends)", () => {
    const fifo = dataDir();
    Bun.spawnSync(["mkfifo", join(fifo, JOURNAL_FILE)]);
    expect(() => openAuditJournal(fifo, () => {})).toThrow("not a regular file");
    const full = dataDir();
    symlinkSync("/dev/full", join(full, JOURNAL_FILE));
    expect(() => openAuditJournal(full, () => {})).toThrow("not a regular file");
  });

  test("garbage is moved aside, not emptied; a line that is no record is counted, and never replayed into a batch", () => {
    const dir = dataDir();
    const garbage = crypto.getRandomValues(new Uint8Array(512));
    writeFileSync(join(dir, JOURNAL_FILE), garbage);
    const j = openAuditJournal(dir, () => {});
    expect(j.opened.setAside).toBeDefined();
    expect(Buffer.compare(readFileSync(j.opened.setAside!), Buffer.from(garbage))).toBe(0);
    j.append(entry(1));
    j.close();
    const file = join(dir, JOURNAL_FILE);
    writeFileSync(file, `${readFileSync(file, "utf8")}{"seq":2,"entry":{"at":"x"}}\nnot json\n${JSON.stringify({ seq: 3, entry: entry(3) })}\n`);
    const again = openAuditJournal(dir, () => {});
    expect(again.opened).toEqual({ unreadableLines: 2 });
    expect(again.resume(0).map((r) => r.seq)).toEqual([1, 3]);
    again.close();
  });

  test("append-only (emptying it fails): the writer keeps writing to the database, and says so once", async () => {
    const dir = dataDir();
    const store = await openMemoryStore();
    const errors: unknown[] = [];
    const journal = openAuditJournal(dir, (err) => errors.push(err));
    if (Bun.spawnSync(["chattr", "+a", join(dir, JOURNAL_FILE)]).exitCode !== 0) return; // no chattr here
    const log = createMemoryLogger();
    const audit = createAuditLog(store, { now: Date.now, log, journal, flushIntervalMs: 5 });
    await audit.resume();
    for (let i = 0; i < 5; i++) {
      audit.record(entry(i));
      await audit.flush();
    }
    const written = (await store.audit.list({ vaultId: 1, limit: 100 })).length;
    Bun.spawnSync(["chattr", "-a", join(dir, JOURNAL_FILE)]);
    await audit.stop();
    expect(written).toBe(5);
    expect(errors).toHaveLength(1);
  });

  test("an unexpected failure inside a write does not stop every later write", async () => {
    const store = await openMemoryStore();
    const log = createMemoryLogger();
    let fail = true;
    const journal = openAuditJournal(dataDir(), () => {});
    const settled = journal.settled.bind(journal);
    journal.settled = (u) => {
      if (fail) throw new Error("unexpected");
      settled(u);
    };
    const audit = createAuditLog(store, { now: Date.now, log, journal, flushIntervalMs: 5 });
    await audit.resume();
    audit.record(entry(1));
    await audit.flush();
    fail = false;
    audit.record(entry(2));
    await audit.flush();
    expect((await store.audit.list({ vaultId: 1, limit: 100 })).map((r) => r.path).sort()).toEqual(["/things/1", "/things/2"]);
    expect(log.lines.some((l) => l.includes("audit_write_failed"))).toBe(true);
    await audit.stop();
  });
});
