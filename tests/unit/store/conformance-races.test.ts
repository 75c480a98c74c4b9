// Races through the domain layer, on every backend: many approvals (or rejections) of one proposal
// apply it once, many redemptions of one invite succeed once, every loser gets the documented error
// (Conflict, NotFound) rather than a database error, and simultaneous first sign-ups make one owner.
// On PostgreSQL these run on separate pooled connections under READ COMMITTED, so only the
// statements' own guards (conditional updates, a row lock) keep them apart.

import { expect, test } from "bun:test";
import { Conflict, NotFound } from "../../../src/errors.ts";
import { createLoginThrottle } from "../../../src/ratelimit/index.ts";
import { Secret } from "../../../src/secret.ts";
import type { Store } from "../../../src/store/index.ts";
import {
  acceptVaultInvite,
  createAgentInvite,
  createAuthenticator,
  createVaultInvite,
  openVault,
  redeemAgentInvite,
  registerUser,
  type Domain,
  type UserPrincipal,
} from "../../../src/identity/index.ts";
import { approveProposal, createProposal, rejectProposal } from "../../../src/workflows/index.ts";
import { createHashGate, loadCredential, unlockKeyring } from "../../../src/crypto/index.ts";
import { CHEAP_KDF } from "../../helpers/api.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { parseWith, ProposalInput } from "../../../src/contract/index.ts";
import { registerAs } from "../../helpers/principals.ts";

/** Contenders per race: fewer than the PostgreSQL pool (8), so every one holds its own connection. */
const N = 6;
const PASSWORD = "correct horse battery";

async function createDomain(store: Store): Promise<Domain> {
  const now = () => Date.UTC(2026, 0, 1);
  const keyring = await unlockKeyring(store, undefined, { now });
  return {
    store,
    now,
    dataKey: keyring.dataKey,
    auth: createAuthenticator(store, { now, cacheTtlMs: 0 }),
    hashing: createHashGate({ concurrency: N, queue: 64 }),
    publicUrl: "http://broker.test",
    proxyUrl: "http://broker.test:14322",
    passwordKdf: CHEAP_KDF,
    loginThrottle: createLoginThrottle({ now }),
  };
}

/** The instance owner, a vault "v", and an admin agent there that has filed one proposal for slot K. */
async function setUpProposal(d: Domain) {
  const owner = await registerAs(d, "owner@example.com", PASSWORD);
  await d.store.vaults.create("v", d.now());
  const invite = await createAgentInvite(d, owner, await openVault(d, owner, "v", "manage"), { name: "bot", role: "admin" });
  const agent = await d.auth.authenticate((await redeemAgentInvite(d, invite.token)).token);
  const filed = await createProposal(
    d,
    await openVault(d, agent, "v", "read", "v"),
    parseWith(ProposalInput, {
      services: [{ action: "set", host: "api.example.com", auth: { type: "bearer", token: "K" } }],
      credentials: [{ action: "set", key: "K", description: "a key" }],
    }),
  );
  const row = (await d.store.proposals.byId(filed.id))!;
  return { owner, row, open: await openVault(d, owner, "v", "approve") };
}

/** Runs every contender at once; the indexes of those that succeeded, and the errors of the rest. */
async function race<T>(contenders: (() => Promise<T>)[]) {
  const settled = await Promise.allSettled(contenders.map((run) => run()));
  const winners = settled.flatMap((s, i) => (s.status === "fulfilled" ? [i] : []));
  const errors = settled.flatMap((s) => (s.status === "rejected" ? [s.reason as Error] : []));
  return { winners, errors };
}

/** Every loser failed with `type` and `message`: a documented answer (409/404), not a database error. */
function expectLosers(errors: Error[], type: new (...args: never[]) => Error, message: string) {
  expect(errors.map((e) => ({ type: e.constructor.name, message: e.message }))).toEqual(Array.from({ length: N - 1 }, () => ({ type: type.name, message })));
}

forEachBackend((backend) => {
  test(`${N} first registrations at once on a fresh instance: exactly one becomes owner`, async () => {
    const d = await createDomain(await backend.open());
    const { winners } = await race(Array.from({ length: N }, (_, i) => () => registerUser(d, { email: `u${i}@example.com`, password: new Secret(PASSWORD) })));
    expect(winners.length).toBe(N); // everyone gets an account
    const roles = await Promise.all(Array.from({ length: N }, async (_, i) => (await d.store.users.byEmail(`u${i}@example.com`))!.role));
    expect(roles.filter((r) => r === "owner").length).toBe(1);
    expect(roles.filter((r) => r === "member").length).toBe(N - 1);
  });

  test(`${N} concurrent approvals of one proposal: one applies (its value is the one stored), the rest get Conflict`, async () => {
    const d = await createDomain(await backend.open());
    const { owner, row, open } = await setUpProposal(d);
    const { winners, errors } = await race(
      Array.from({ length: N }, (_, i) => () => approveProposal(d, open, row, { K: { value: new Secret(`value-${i}`) } })),
    );
    expect(winners.length).toBe(1);
    expectLosers(errors, Conflict, "this proposal was already decided");
    expect(await d.store.proposals.byId(row.id)).toMatchObject({ status: "applied", decidedBy: owner.userId });
    // Only the winner's writes committed: a loser's value never overwrote it.
    expect((await loadCredential(d.store, d.dataKey, row.vaultId, "K"))?.reveal()).toBe(`value-${winners[0]}`); // reveal: compared, never printed
    expect((await d.store.services.list(row.vaultId)).map((s) => [s.host, s.authKey])).toEqual([["api.example.com", "K"]]);
  });

  test(`${N} concurrent approvals and rejections of one proposal: exactly one decides it, and a rejection stores nothing`, async () => {
    const d = await createDomain(await backend.open());
    const { owner, row, open } = await setUpProposal(d);
    const { winners, errors } = await race(
      Array.from(
        { length: N },
        (_, i) => () => (i % 2 === 0 ? approveProposal(d, open, row, { K: { value: new Secret(`value-${i}`) } }) : rejectProposal(d, open, row)),
      ),
    );
    expect(winners.length).toBe(1);
    expectLosers(errors, Conflict, "this proposal was already decided");
    const approved = winners[0]! % 2 === 0;
    expect((await d.store.proposals.byId(row.id))?.status).toBe(approved ? "applied" : "rejected");
    expect(await d.store.credentials.keys(row.vaultId)).toEqual(approved ? ["K"] : []);
    expect((await d.store.services.list(row.vaultId)).length).toBe(approved ? 1 : 0);
  });

  test(`${N} concurrent redemptions of one agent invite: one agent, one grant, one session; the rest get NotFound`, async () => {
    const d = await createDomain(await backend.open());
    const owner = await registerAs(d, "owner@example.com", PASSWORD);
    const vault = await d.store.vaults.create("v", d.now());
    const invite = await createAgentInvite(d, owner, await openVault(d, owner, "v", "manage"), { name: "bot", role: "member" });
    const { winners, errors } = await race(Array.from({ length: N }, () => () => redeemAgentInvite(d, invite.token)));
    expect(winners.length).toBe(1);
    expectLosers(errors, NotFound, "invite not found, already used or expired");
    const agents = await d.store.agents.page({ kind: "all" }, "", 100);
    expect(agents.map((a) => a.name)).toEqual(["bot"]);
    expect(await d.store.access.allGrants()).toEqual([{ agentId: agents[0]!.id, agentName: "bot", vaultId: vault.id, vaultName: "v", role: "member" }]);
    expect(await d.store.sessions.countActiveForAgent(agents[0]!.id, d.now())).toBe(1);
    expect(await d.store.invites.countPending(vault.id, "agent", d.now())).toBe(0);
  });

  test(`${N} signed-in people accepting one vault invite at once: one joins, the rest get NotFound`, async () => {
    const d = await createDomain(await backend.open());
    const owner = await registerAs(d, "owner@example.com", PASSWORD);
    const vault = await d.store.vaults.create("v", d.now());
    const invite = await createVaultInvite(d, owner, await openVault(d, owner, "v", "invite_people"), { role: "member" });
    const people = [];
    for (let i = 0; i < N; i++) people.push(await registerAs(d, `p${i}@example.com`));
    const { winners, errors } = await race(people.map((p) => () => acceptVaultInvite(d, invite.token, p, undefined)));
    expect(winners.length).toBe(1);
    expectLosers(errors, NotFound, "invite not found, already used or expired");
    expect(await d.store.access.members(vault.id)).toEqual([{ userId: people[winners[0]!]!.userId, email: `p${winners[0]}@example.com`, role: "member" }]);
  });

  test(`${N} new people registering through one vault invite at once: one account is created and joins, the rest leave nothing behind`, async () => {
    const d = await createDomain(await backend.open());
    const owner = await registerAs(d, "owner@example.com", PASSWORD);
    const vault = await d.store.vaults.create("v", d.now());
    const invite = await createVaultInvite(d, owner, await openVault(d, owner, "v", "invite_people"), { role: "proxy" });
    const { winners, errors } = await race(
      Array.from(
        { length: N },
        (_, i) => () => acceptVaultInvite(d, invite.token, undefined, { email: `new${i}@example.com`, password: new Secret(PASSWORD) }),
      ),
    );
    expect(winners.length).toBe(1);
    expectLosers(errors, NotFound, "invite not found, already used or expired");
    expect(await d.store.users.count()).toBe(2); // the owner and the winner: the losers' accounts were rolled back
    const winner = (await d.store.users.byEmail(`new${winners[0]}@example.com`))!;
    expect(await d.store.access.members(vault.id)).toEqual([{ userId: winner.id, email: winner.email, role: "proxy" }]);
  });
});
