// The echo needles' store half after an edit (issue 35, architecture.md D22): the edited vault is
// read again in the background, a page per turn of the event loop, and its new values join the set
// in place (a set an answer already holds finds them) once read; what a request sends is in the set
// before it goes, so an answer never waits for a vault-wide read to be safe. The first read of all
// is still awaited whole and fails closed. Reads are counted with an observed store, never timed.

import { beforeAll, describe, expect, test } from "bun:test";
import { createPlanCache } from "../../../src/egress/index.ts";
import { FIRST_PAGE_ROWS, PAGE_ROWS, pagesToRead } from "../../../src/egress/stored-values.ts";
import type { Needles } from "../../../src/egress/redact.ts";
import { redactText } from "../../../src/egress/redact-headers.ts";
import { storeCredential } from "../../../src/crypto/index.ts";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { bigValue, observedStore, pagesRead, seedVaults, turnsUntil, type ObservedStore } from "../../helpers/big-vault.ts";

const SERVICES = 10_000;
const QUIET = `sk-quiet-${crypto.randomUUID()}`;
let o: ObservedStore;
let big: { id: number; name: string };
let quiet: { id: number; name: string };

beforeAll(async () => {
  o = await observedStore();
  ({ big, quiet } = await seedVaults(o, SERVICES, QUIET));
});

/** The set redacts `value` whole (and the redacted text no longer carries it). */
function holds(n: Needles, value: string): boolean {
  const out = redactText(`<${value}>`, n);
  return out === "<[redacted]>" && !out.includes(value);
}

const pages = () => pagesRead(o);
/** A read of the whole large vault, page after page (10,000 is not a multiple of the page: no empty last page). */
const VAULT_PAGES = pagesToRead(SERVICES);

describe("after an edit of a 10,000-service vault", () => {
  const plans = () => createPlanCache(o.store, o.dataKey, () => ({}));

  test("the first read of every vault is awaited whole: every stored value is in the first answer's set", async () => {
    const cache = plans();
    const n = await cache.responseNeedles(await cache.plan(quiet, "api.quiet.example", 443));
    expect([bigValue(0), bigValue(500), bigValue(999), QUIET].map((v) => holds(n, v))).toEqual([true, true, true, true]);
    expect(pages()).toBeGreaterThanOrEqual(VAULT_PAGES);
  });

  test("another vault's answer holds the new value once read, in place; the old one stays; a page per turn of the loop", async () => {
    const cache = plans();
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    const n = await cache.responseNeedles(quietPlan);
    // K777 is sent by svc-7770…7779: far past the first page in host order.
    const rotated = `sk-rotated-777-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K777", new Secret(rotated), 2_000_000);
    o.reset();
    cache.invalidate(big.id);
    expect(o.calls).toEqual([]); // an invalidation reads nothing
    expect(await cache.responseNeedles(quietPlan)).toBe(n); // served at once (one page read at most)
    expect(pages()).toBe(1);
    expect(holds(n, bigValue(777))).toBe(true);
    const most = await turnsUntil(o, () => pages() === VAULT_PAGES && holds(n, rotated));
    expect(most).toBe(1); // the loop was let go after every page
    expect([rotated, bigValue(777)].map((v) => holds(n, v))).toEqual([true, true]);
    expect(o.calls.filter((c) => c === "credentials.get")).toEqual([]); // one statement a page, no read per service
  });

  test("a value sent is in every answer's set at once, before the read reaches it", async () => {
    const cache = plans();
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    const n = await cache.responseNeedles(quietPlan);
    const rotated = `sk-rotated-888-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K888", new Secret(rotated), 2_000_001);
    o.reset();
    cache.invalidate(big.id);
    const bigPlan = await cache.plan(big, "svc-8885.big.example", 443);
    // The request that sends it notes it before it goes: its own answer's set and every other's hold it.
    expect(holds(await cache.responseNeedles(bigPlan), rotated)).toBe(true);
    expect(pages()).toBeLessThanOrEqual(1);
    expect(holds(await cache.responseNeedles(quietPlan), rotated)).toBe(true);
    expect(holds(n, rotated)).toBe(true);
    await turnsUntil(o, () => pages() === VAULT_PAGES);
    expect([rotated, bigValue(888), QUIET].map((v) => holds(n, v))).toEqual([true, true, true]);
  });

  test("a change another instance announced: the next answer waits until the vault is read whole (its agent may have sent the value)", async () => {
    const cache = plans();
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    await cache.responseNeedles(quietPlan);
    // Another instance stored it and its agent sent it there: this instance has never seen it.
    const rotated = `sk-rotated-999-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K999", new Secret(rotated), 2_000_003);
    o.reset();
    cache.invalidate(big.id, true);
    const n = await cache.responseNeedles(quietPlan);
    expect(pages()).toBe(VAULT_PAGES);
    expect(holds(n, rotated)).toBe(true);
    // Afterwards answers are served at once again.
    o.reset();
    await cache.responseNeedles(quietPlan);
    expect(pages()).toBe(0);
  });

  test("edits of the large vault in quick succession: it is read whole at most once a second, and what is sent meanwhile is held at once", async () => {
    const cache = plans();
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    const n = await cache.responseNeedles(quietPlan);
    const first = `sk-rotated-111-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K111", new Secret(first), 2_000_010);
    o.reset();
    cache.invalidate(big.id);
    await cache.responseNeedles(quietPlan);
    await turnsUntil(o, () => pages() === VAULT_PAGES && holds(n, first)); // read whole
    await turnsUntil(o, () => true, 3);
    o.reset();
    const second = `sk-rotated-222-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K222", new Secret(second), 2_000_011);
    cache.invalidate(big.id);
    await cache.responseNeedles(quietPlan);
    expect(pages()).toBe(0); // held back: read whole less than a second ago
    // Sent meanwhile: noted before it goes, held in every answer at once.
    const bigPlan = await cache.plan(big, "svc-2225.big.example", 443);
    await cache.responseNeedles(bigPlan);
    expect(holds(await cache.responseNeedles(quietPlan), second)).toBe(true);
    // Unsent values of the held-back edit join without any answer asking, once the second has passed.
    const third = `sk-rotated-333-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K333", new Secret(third), 2_000_012);
    cache.invalidate(big.id);
    await Bun.sleep(1_100);
    await turnsUntil(o, () => pages() >= VAULT_PAGES && holds(n, third));
    expect(holds(n, third)).toBe(true);
  });

  test("an edit that changes no value keeps the compiled set", async () => {
    const cache = plans();
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    const n = await cache.responseNeedles(quietPlan);
    await o.store.services.put({ ...(await o.store.services.get(big.id, "svc-5.big.example"))!, description: "edited" }, 2_000_002);
    o.reset();
    cache.invalidate(big.id);
    expect(await cache.responseNeedles(quietPlan)).toBe(n);
    await turnsUntil(o, () => pages() === VAULT_PAGES);
    expect(await cache.responseNeedles(quietPlan)).toBe(n);
  });
});

describe("the store half during an outage", () => {
  test("never read: the answer fails closed; read before: a failed re-read leaves the last values serving", async () => {
    const cache = createPlanCache(o.store, o.dataKey, () => ({}));
    const quietPlan = await cache.plan(quiet, "api.quiet.example", 443);
    o.down(true);
    try {
      await expect(cache.responseNeedles(quietPlan)).rejects.toBeInstanceOf(DatabaseUnavailable);
    } finally {
      o.down(false);
    }
    const n = await cache.responseNeedles(quietPlan);
    const rotated = `sk-rotated-1-${crypto.randomUUID()}`;
    await storeCredential(o.store, o.dataKey, big.id, "K1", new Secret(rotated), 2_000_003);
    cache.invalidate(big.id);
    o.down(true);
    try {
      const during = await cache.responseNeedles(quietPlan);
      expect(during).toBe(n);
      expect(holds(during, bigValue(1))).toBe(true);
    } finally {
      o.down(false);
    }
    // Read again once the retry interval has passed (a write since lets it try at once).
    cache.invalidate(big.id);
    await cache.responseNeedles(quietPlan);
    await turnsUntil(o, () => holds(n, rotated));
    expect([rotated, bigValue(1)].map((v) => holds(n, v))).toEqual([true, true]);
  });
});
