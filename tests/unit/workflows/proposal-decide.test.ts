// A proposal is decided by a person who may approve in its vault, and the domain checks that itself
// (architecture.md D9): whatever a caller passes, an agent, a proxy-role member or a vault opened
// for another proposal's vault decides nothing, and the proposal stays pending.

import { expect, test } from "bun:test";
import { NotFound, PermissionDenied } from "../../../src/errors.ts";
import { Secret } from "../../../src/secret.ts";
import { createAgentInvite, openVault, redeemAgentInvite } from "../../../src/identity/index.ts";
import { approveProposal, createProposal, rejectProposal } from "../../../src/workflows/index.ts";
import { createTestApi } from "../../helpers/api.ts";
import { parseWith, ProposalInput } from "../../../src/contract/index.ts";
import { registerAs } from "../../helpers/principals.ts";

async function world() {
  const { domain: d } = await createTestApi();
  const owner = await registerAs(d, "owner@example.com");
  const member = await registerAs(d, "proxy@example.com");
  const v = await d.store.vaults.create("v", d.now());
  await d.store.vaults.create("w", d.now());
  await d.store.access.setMember(v.id, member.userId, "proxy", d.now());
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
  return { d, owner, member, agent, row };
}

test("an agent's own admin access to the vault decides nothing", async () => {
  const { d, agent, row } = await world();
  const open = await openVault(d, agent, "v", "read", "v");
  await expect(approveProposal(d, open, row, { K: { value: new Secret("value") } })).rejects.toBeInstanceOf(PermissionDenied);
  await expect(rejectProposal(d, open, row)).rejects.toBeInstanceOf(PermissionDenied);
  expect((await d.store.proposals.byId(row.id))?.status).toBe("pending");
});

test("a person whose role in the vault is proxy decides nothing", async () => {
  const { d, member, row } = await world();
  const open = await openVault(d, member, "v", "read");
  await expect(approveProposal(d, open, row, { K: { value: new Secret("value") } })).rejects.toBeInstanceOf(PermissionDenied);
  await expect(rejectProposal(d, open, row)).rejects.toBeInstanceOf(PermissionDenied);
  expect((await d.store.proposals.byId(row.id))?.status).toBe("pending");
  expect(await d.store.credentials.keys(row.vaultId)).toEqual([]);
});

test("a vault opened for another vault cannot decide this vault's proposal", async () => {
  const { d, owner, row } = await world();
  const other = await openVault(d, owner, "w", "approve");
  await expect(approveProposal(d, other, row, { K: { value: new Secret("value") } })).rejects.toBeInstanceOf(NotFound);
  await expect(rejectProposal(d, other, row)).rejects.toBeInstanceOf(NotFound);
  expect((await d.store.proposals.byId(row.id))?.status).toBe("pending");
});

test("an admin of the vault decides it", async () => {
  const { d, owner, row } = await world();
  await approveProposal(d, await openVault(d, owner, "v", "approve"), row, { K: { value: new Secret("value") } });
  expect((await d.store.proposals.byId(row.id))?.status).toBe("applied");
});
