// References resolved off the request path (secret-stores/resolver.ts): a request waits only for a reference
// never read; a value past its refresh interval keeps serving while it is read again; an unreachable store's
// last value serves for the grace, then 502 credential_unavailable; a store that says "gone" or "denied" stops
// the value at once; a 401 upstream asks for one read; nothing shown ever holds a value.

import { expect, test } from "bun:test";
import { CredentialUnavailable } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import type { SecretReference } from "../../../src/policy/index.ts";
import { createReferenceResolver } from "../../../src/secret-stores/resolver.ts";
import { SecretStoreError, type SecretAddress, type SecretStoreClient } from "../../../src/secret-stores/types.ts";

const REF: SecretReference = { connection: "prod-vault", path: "apps/github", field: "token" };

/** A store whose answer the test sets: a value and version, or a failure of a kind. */
function fakeStore() {
  const s = {
    value: "ghp-first-value-0123456789",
    version: "1",
    failure: undefined as SecretStoreError | undefined,
    reads: 0,
    gate: undefined as Promise<void> | undefined,
  };
  const client: SecretStoreClient = {
    async read(_a: SecretAddress) {
      s.reads++;
      if (s.gate) await s.gate;
      if (s.failure) throw s.failure;
      return { value: new Secret(s.value), version: s.version };
    },
    sentValues: () => [],
  };
  return { s, client };
}

function setup(graceMs = 60_000) {
  const { s, client } = fakeStore();
  let now = 1_000_000;
  const clock = { advance: (ms: number) => (now += ms) };
  const changed: string[] = [];
  const noted: string[] = [];
  const resolver = createReferenceResolver(() => client, {
    now: () => now,
    timing: () => ({ refreshMs: 30_000, graceMs }),
    sweepMs: 1_000,
    onChange: (r) => changed.push(r.path),
    onValues: (vs) => noted.push(...vs.map((v) => v.reveal())),
  });
  return { s, clock, resolver, changed, noted };
}

const reveal = async (p: Promise<Secret>) => (await p).reveal();

test("read once, then served from memory within the refresh interval", async () => {
  const { s, resolver } = setup();
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-first-value-0123456789");
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-first-value-0123456789");
  expect(s.reads).toBe(1);
  expect(resolver.state(REF)).toEqual({ reference: "prod-vault:apps/github#token", lastRefresh: 1_000_000, version: "1" });
});

test("past the interval the old value serves at once while the store is read again; the rotated value follows", async () => {
  const { s, clock, resolver } = setup();
  await resolver.resolve(REF);
  s.value = "ghp-rotated-value-9876543210";
  s.version = "2";
  let open!: () => void;
  s.gate = new Promise((r) => (open = r));
  clock.advance(31_000);
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-first-value-0123456789"); // never waits on the store
  open();
  s.gate = undefined;
  await Bun.sleep(0);
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-rotated-value-9876543210");
  expect(resolver.state(REF).version).toBe("2");
});

test("store unreachable: the last value serves for the grace past its interval, then 502 credential_unavailable", async () => {
  const { s, clock, resolver } = setup(60_000);
  await resolver.resolve(REF);
  s.failure = new SecretStoreError("vault.example.com could not be reached", "unreachable");
  clock.advance(80_000); // within interval + grace
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-first-value-0123456789");
  await Bun.sleep(0);
  expect(resolver.state(REF).lastError).toBe("vault.example.com could not be reached");
  clock.advance(20_000); // 100 s: past 30 s + 60 s
  const err = await resolver.resolve(REF).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CredentialUnavailable);
  expect((err as CredentialUnavailable).status).toBe(502);
  expect((err as Error).message).toBe("the credential at prod-vault:apps/github#token cannot be read: vault.example.com could not be reached");
  expect((err as Error).message).not.toContain("ghp-");
  // Within 5 s of a failed read a request is answered at once, without asking the store again.
  const reads = s.reads;
  await expect(resolver.resolve(REF)).rejects.toBeInstanceOf(CredentialUnavailable);
  expect(s.reads).toBe(reads);
  // The store back: the next request after that reads it and is served.
  s.failure = undefined;
  clock.advance(5_000);
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-first-value-0123456789");
});

test("the sweep reads a value again before it is one interval old: a rotation reaches the next request, and is announced", async () => {
  const { s, clock, resolver, changed, noted } = setup();
  const first = await resolver.resolve(REF);
  clock.advance(28_000);
  resolver.sweep(); // 28 s + one 1 s sweep < 30 s: not yet
  expect(s.reads).toBe(1);
  clock.advance(1_000);
  resolver.sweep(); // 29 s + 1 s: due
  await Bun.sleep(0);
  expect(s.reads).toBe(2);
  // The first value was announced (the echo needles' store half reads it); an unchanged one keeps its very
  // Secret (plans built on it stand) and announces nothing.
  expect(await resolver.resolve(REF)).toBe(first);
  expect(changed).toEqual(["apps/github"]);
  changed.length = 0;
  s.value = "ghp-rotated-value-9876543210";
  clock.advance(29_000);
  resolver.sweep();
  await Bun.sleep(0);
  expect(changed).toEqual(["apps/github"]);
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-rotated-value-9876543210");
  expect(noted).toContain("ghp-rotated-value-9876543210");
});

test("a value that runs out while the store is down is announced once by the sweep; forget drops a connection's entries", async () => {
  const { s, clock, resolver, changed } = setup(10_000);
  await resolver.resolve(REF);
  changed.length = 0; // the first value's announcement
  s.failure = new SecretStoreError("vault.example.com could not be reached", "unreachable");
  for (let t = 0; t < 45; t++) {
    clock.advance(1_000);
    resolver.sweep();
    await Bun.sleep(0);
  }
  expect(changed).toEqual(["apps/github"]);
  await expect(resolver.resolve(REF)).rejects.toBeInstanceOf(CredentialUnavailable);
  resolver.forget("other-connection");
  expect(changed).toEqual(["apps/github"]);
  resolver.forget("prod-vault");
  expect(changed).toEqual(["apps/github", "apps/github"]);
  expect(resolver.state(REF).lastError).toBeUndefined();
});

test("grace 0 fails closed as soon as the interval has passed and the store cannot be read", async () => {
  const { s, clock, resolver } = setup(0);
  await resolver.resolve(REF);
  s.failure = new SecretStoreError("vault.example.com could not be reached", "unreachable");
  clock.advance(30_000);
  expect(
    await resolver.resolve(REF).then(
      () => "served",
      (e: unknown) => (e as Error).constructor.name,
    ),
  ).toBe("CredentialUnavailable");
});

test("the store says the secret is gone or denied: the value stops at once, whatever the grace", async () => {
  for (const kind of ["not_found", "denied"] as const) {
    const { s, clock, resolver } = setup(3_600_000);
    await resolver.resolve(REF);
    s.failure = new SecretStoreError(`vault.example.com: apps/github ${kind}`, kind);
    clock.advance(31_000);
    await resolver.resolve(REF); // the last value, while the background read finds out
    await Bun.sleep(0);
    expect(
      await resolver.resolve(REF).then(
        () => "served",
        (e: unknown) => (e as Error).constructor.name,
      ),
    ).toBe("CredentialUnavailable");
  }
});

test("an upstream's 401 asks for one read at once: concurrent askers share it, and the rotated value serves next", async () => {
  const { s, resolver } = setup();
  await resolver.resolve(REF);
  s.value = "ghp-rotated-after-401-000000";
  await Promise.all([resolver.refreshNow(REF), resolver.refreshNow(REF), resolver.refreshNow(REF)]);
  expect(s.reads).toBe(2);
  expect(await reveal(resolver.resolve(REF))).toBe("ghp-rotated-after-401-000000");
});

test("a reference never read waits for its read; several requests share it; nothing shown holds a value", async () => {
  const { s, resolver } = setup();
  const all = await Promise.all([resolver.resolve(REF), resolver.resolve(REF), resolver.resolve(REF)]);
  expect(s.reads).toBe(1);
  expect(all.map((v) => v.reveal())).toEqual(Array(3).fill("ghp-first-value-0123456789"));
  for (const text of [JSON.stringify(resolver.state(REF)), Bun.inspect(resolver.state(REF)), Bun.inspect(all[0]), Bun.inspect(resolver)])
    expect(text).not.toContain("ghp-first");
  expect([...resolver.values()].map((v) => v.reveal())).toEqual(["ghp-first-value-0123456789"]);
});
