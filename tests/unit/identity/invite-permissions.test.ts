// Agent invites are created and invites revoked only by a vault admin, and the domain checks that
// itself (architecture.md §2): a vault opened by a member for reading, or by an admin agent's scoped
// session, invites and revokes nothing, whatever the caller passes.

import { expect, test } from "bun:test";
import { PermissionDenied } from "../../../src/errors.ts";
import { createAgentInvite, createVaultInvite, openVault, revokeInvite } from "../../../src/identity/index.ts";
import { vaultWithMember } from "../../helpers/principals.ts";

test("a member's opened vault creates no agent invite", async () => {
  const { d, member, v } = await vaultWithMember();
  const open = await openVault(d, member, "v", "read");
  await expect(createAgentInvite(d, member, open, { name: "bot" })).rejects.toBeInstanceOf(PermissionDenied);
  expect(await d.store.invites.countPending(v.id, "agent", d.now())).toBe(0);
});

test("a member's opened vault revokes no invite; an admin's does", async () => {
  const { d, owner, member, v } = await vaultWithMember();
  const invite = await createVaultInvite(d, owner, await openVault(d, owner, "v", "manage"), { role: "member" });
  const asMember = await openVault(d, member, "v", "read");
  await expect(revokeInvite(d, asMember, "vault", invite.id)).rejects.toBeInstanceOf(PermissionDenied);
  expect(await d.store.invites.countPending(v.id, "vault", d.now())).toBe(1);
  await revokeInvite(d, await openVault(d, owner, "v", "manage"), "vault", invite.id);
  expect(await d.store.invites.countPending(v.id, "vault", d.now())).toBe(0);
});
