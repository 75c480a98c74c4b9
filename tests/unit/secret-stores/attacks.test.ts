// Attacks on the parts under credentials by reference (issue 36), at unit level: the resolver's promise that
// a value stops once its grace is over (announced, so plans built on it are dropped), and the wire's promise
// that a value from a store can never break a header line. Tests whose comment says "Was a hole" pin what an
// attack found, fixed since; tests/e2e/secret-store-attacks*.test.ts show the same end to end.

import { expect, test } from "bun:test";
import { serializeHead } from "../../../src/http/http1.ts";
import { isMultiLine } from "../../../src/egress/service-values.ts";
import type { SecretReference } from "../../../src/policy/index.ts";
import { Secret } from "../../../src/secret.ts";
import { createReferenceResolver } from "../../../src/secret-stores/resolver.ts";
import { SecretStoreError, type SecretStoreClient } from "../../../src/secret-stores/types.ts";

const REF: SecretReference = { connection: "prod-vault", path: "apps/db", field: "password" };

/** A store whose reads the test holds open and then fails or answers. */
function heldStore() {
  const s = { reads: 0, value: "db-password-Xy7Zq2Lm9Pt", release: undefined as ((fail: boolean) => void) | undefined, holding: false };
  const client: SecretStoreClient = {
    async read() {
      s.reads++;
      if (s.holding) {
        const fail = await new Promise<boolean>((r) => (s.release = r));
        if (fail) throw new SecretStoreError("vault vault.internal:8200: secret/apps/db failed with HTTP 503 (unavailable or sealed)", "unreachable", 503);
      }
      return { value: new Secret(s.value), version: "1" };
    },
    sentValues: () => [],
  };
  return { s, client };
}

function setup(refreshMs: number, graceMs: number) {
  const { s, client } = heldStore();
  let now = 5_000_000;
  const changed: number[] = [];
  const resolver = createReferenceResolver(() => client, {
    now: () => now,
    timing: () => ({ refreshMs, graceMs }),
    sweepMs: 1_000,
    onChange: () => changed.push(now),
  });
  return { s, resolver, changed, advance: (ms: number) => void (now += ms) };
}

// Was a hole (high), now closed: secret-stores/resolver.ts. The value running out is announced only by sweep(), which skips
// an entry while a read is in flight, and read() overwrites `wasUsable` after a failure without announcing
// the change it just saw. A read that starts within the value's life and fails after it (a store slow to
// fail: a 10 s connect timeout to a blackholed address) leaves the value "not usable" in the resolver
// but never announced, so the plan cache (egress/plan.ts, egress/plan-lookup.ts), which holds the resolved
// Secret until onChange invalidates the vault, keeps sending it forever. Fix: in read(), `const was =
// e.wasUsable; e.wasUsable = usable(...) !== undefined; if (changed || (was && !e.wasUsable)) onChange`;
// and in sweep() compute the run-out before `if (e.reading) continue`.
test("a value that runs out while a read is in flight is announced, whether the read fails during or after the grace", async () => {
  const { s, resolver, changed, advance } = setup(10_000, 0);
  await resolver.resolve(REF);
  changed.length = 0; // the first value's announcement (for the echo needles)
  s.holding = true;
  advance(9_500);
  resolver.sweep(); // reads again before the interval ends: the store takes its time
  expect(s.reads).toBe(2);
  advance(5_000); // the value is past refresh + grace
  resolver.sweep(); // a read is in flight: skipped
  expect(resolver.peek(REF)).toBeUndefined(); // the resolver itself knows the value is gone...
  s.release!(true);
  await Bun.sleep(0);
  await Bun.sleep(0);
  advance(1_000);
  resolver.sweep();
  advance(10_000);
  resolver.sweep();
  await Bun.sleep(0);
  // ...but nobody was told, so plans built on it stand.
  expect(changed.length).toBeGreaterThan(0);
});

test("a value that runs out between sweeps is announced once (the store fails fast)", async () => {
  const { s, resolver, changed, advance } = setup(10_000, 0);
  await resolver.resolve(REF);
  changed.length = 0; // the first value's announcement (for the echo needles)
  s.holding = true;
  advance(9_500);
  resolver.sweep();
  s.release!(true);
  await Bun.sleep(0);
  await Bun.sleep(0);
  expect(changed).toEqual([]); // still within its life
  advance(1_000);
  resolver.sweep();
  expect(changed.length).toBe(1);
  advance(6_000);
  resolver.sweep();
  expect(changed.length).toBe(1);
});

test("a store that says the secret is gone stops the value at once and says so", async () => {
  let failure: SecretStoreError | undefined;
  const client: SecretStoreClient = {
    async read() {
      if (failure) throw failure;
      return { value: new Secret("gone-soon-Vb8Nm3Qw6Er"), version: "3" };
    },
    sentValues: () => [],
  };
  let now = 1_000;
  const changed: string[] = [];
  const resolver = createReferenceResolver(() => client, {
    now: () => now,
    timing: () => ({ refreshMs: 10_000, graceMs: 600_000 }),
    sweepMs: 1_000,
    onChange: (r) => changed.push(r.path),
  });
  await resolver.resolve(REF);
  changed.length = 0; // the first value's announcement (for the echo needles)
  failure = new SecretStoreError("vault vault.internal:8200: secret/apps/db was not found", "not_found", 404);
  now += 10_000;
  await resolver.refreshNow(REF);
  expect(changed).toEqual(["apps/db"]);
  expect(resolver.peek(REF)).toBeUndefined();
  const err = await resolver.resolve(REF).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  expect(err?.message).not.toContain("gone-soon");
});

// Was a hole (high), now closed: http/http1.ts serializeHead checks a header value for CR, LF and NUL as a JavaScript string
// and then encodes the head as latin1, which keeps the low byte of every character: U+010D U+010A become
// CR LF on the wire, U+0100 becomes NUL. egress/service-values.ts isMultiLine has the same blind spot, and a
// value read from a secret store is not checked anywhere else. Fix: refuse any character above U+00FF in
// serializeHead (and in isMultiLine / the contract's credentialValue, so the refusal names the key).
test("no header value can put CR LF on the wire through characters above U+00FF", () => {
  const value = "Bearer tok-\u010d\u010aX-Injected: yes";
  let wire: string | undefined;
  try {
    wire = Buffer.from(serializeHead("GET / HTTP/1.1", [["authorization", value]])).toString("latin1");
  } catch {
    wire = undefined; // refused: as it should be
  }
  expect(wire ?? "").not.toContain("\r\nX-Injected");
  expect(isMultiLine(new Secret("tok-\u010d\u010aX"))).toBe(true);
});

test("CR, LF and NUL themselves never reach the wire", () => {
  for (const v of ["a\r\nX-Injected: 1", "a\nb", "a\u0000b"]) {
    expect(() => serializeHead("GET / HTTP/1.1", [["authorization", v]])).toThrow();
    expect(isMultiLine(new Secret(v))).toBe(true);
  }
});
