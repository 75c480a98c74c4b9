// The request-approvals repository on every backend: one pending approval per exact request (the
// partial unique index), state changes guarded by the current state and the expiry (decide once,
// use once, expire once), the list's order (pending oldest first, then the rest newest first), prune.

import { expect, test } from "bun:test";
import type { RequestApprovalRow, Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const row = (vaultId: number, tag: string, over: Partial<RequestApprovalRow> = {}) => ({
  publicId: `apr_${tag.padEnd(16, "x")}`,
  vaultId,
  principal: "agent:1",
  viaSession: false,
  fingerprint: tag.padEnd(64, "0"),
  method: "POST",
  host: "api.example.com",
  target: "/v1/refunds?a=1",
  service: "api.example.com",
  headers: [["content-type", "application/json"]] as const,
  bodyPreview: "{}",
  bodyBytes: 2,
  bodySha256: "e".repeat(64),
  createdAt: 100,
  expiresAt: 1000,
  sealedNonce: null,
  sealedDescription: null,
  ...over,
});

forEachBackend((backend) => {
  let store: Store;

  test("request approvals: one pending per request, decide once, use once, expire once, list order, prune", async () => {
    store = await backend.open();
    const v = await store.vaults.create("v", 1);
    const a = await store.requestApprovals.create(row(v.id, "a"));
    expect(a).toMatchObject({
      state: "pending",
      vaultId: v.id,
      bodyBytes: 2,
      decidedAt: null,
      decidedBy: null,
      usedAt: null,
      sealedNonce: null,
      sealedDescription: null,
    });
    // Sealed descriptions come back as the bytes stored.
    const sealed = await store.requestApprovals.create(
      row(v.id, "s", { sealedNonce: new Uint8Array([1, 2, 3]), sealedDescription: new Uint8Array([0, 255, 7]), viaSession: true }),
    );
    expect(await store.requestApprovals.byPublicId(sealed.publicId)).toMatchObject({
      sealedNonce: new Uint8Array([1, 2, 3]),
      sealedDescription: new Uint8Array([0, 255, 7]),
      viaSession: true,
    });
    expect(a.viaSession).toBe(false);
    expect(await store.requestApprovals.expire(sealed.id, 1000)).toBe(true);
    // A second pending approval of the same request is refused by the index; another principal's is not.
    await expect(store.requestApprovals.create(row(v.id, "a", { publicId: "apr_a2xxxxxxxxxxxxx" }))).rejects.toThrow();
    const other = await store.requestApprovals.create(row(v.id, "a", { publicId: "apr_a3xxxxxxxxxxxxx", principal: "agent:2" }));
    expect((await store.requestApprovals.latest(v.id, "agent:1", a.fingerprint))!.id).toBe(a.id);

    expect(await store.requestApprovals.use(a.id, 200)).toBe(false); // pending: nothing to use
    expect(await store.requestApprovals.decide(a.id, "approved", 7, 1000)).toBe(false); // at expiry: too late
    expect(await store.requestApprovals.decide(a.id, "approved", 7, 200)).toBe(true);
    expect(await store.requestApprovals.decide(a.id, "denied", 7, 201)).toBe(false); // decided once
    expect(await store.requestApprovals.use(a.id, 300)).toBe(true);
    expect(await store.requestApprovals.use(a.id, 301)).toBe(false); // used once
    expect(await store.requestApprovals.byPublicId(a.publicId)).toMatchObject({ state: "used", decidedBy: 7, decidedAt: 200, usedAt: 300 });
    // Once used, the same request may wait for a new approval.
    const again = await store.requestApprovals.create(row(v.id, "a", { publicId: "apr_a4xxxxxxxxxxxxx", createdAt: 400, expiresAt: 1400 }));
    expect((await store.requestApprovals.latest(v.id, "agent:1", a.fingerprint))!.id).toBe(again.id);

    expect(await store.requestApprovals.expire(other.id, 999)).toBe(false); // not yet
    expect(await store.requestApprovals.expire(other.id, 1000)).toBe(true);
    expect(await store.requestApprovals.expire(other.id, 1001)).toBe(false); // once

    const b = await store.requestApprovals.create(row(v.id, "b", { createdAt: 500, expiresAt: 1500 }));
    const c = await store.requestApprovals.create(row(v.id, "c", { principal: "agent:2", createdAt: 500, expiresAt: 1500 }));
    expect(await store.requestApprovals.countPending(v.id, 1100)).toEqual({ vault: 3, principal: 0 });
    expect(await store.requestApprovals.countPending(v.id, 1100, "agent:1")).toEqual({ vault: 3, principal: 2 });
    expect(await store.requestApprovals.countPending(v.id, 1450, "agent:2")).toEqual({ vault: 2, principal: 1 }); // again expired at 1400
    expect((await store.requestApprovals.list(v.id, 1100, 10)).map((r) => r.id)).toEqual([again.id, b.id, c.id, other.id, sealed.id, a.id]);
    expect(await store.requestApprovals.prune(1001)).toBe(3); // a, sealed and other ended at 1000
    expect((await store.requestApprovals.list(v.id, 1100, 10)).map((r) => r.id)).toEqual([again.id, b.id, c.id]);
  });
});
