// The writes whose permission used to be decided only by their callers now decide it themselves
// (architecture.md §2): a vault's settings, linking an identity at the provider and rotating the root
// CA. Each is called here the way a careless caller would, with a vault opened for
// reading or a principal that must be refused, and each refuses and writes nothing.

import { expect, test } from "bun:test";
import { PermissionDenied } from "../../../src/errors.ts";
import type { CaHolder, RootCa } from "../../../src/crypto/index.ts";
import {
  beginOidc,
  createAgentInvite,
  openVault,
  redeemAgentInvite,
  registerUser,
  rotateCa,
  updateVault,
  type Domain,
  type OidcClient,
  type UserPrincipal,
} from "../../../src/identity/index.ts";
import { vaultWithMember } from "../../helpers/principals.ts";

test("a member's opened vault changes none of the vault's settings; an admin's does", async () => {
  const { d, owner, member, v } = await vaultWithMember();
  await expect(updateVault(d, await openVault(d, member, "v", "read"), { unmatched_hosts: "deny" })).rejects.toBeInstanceOf(PermissionDenied);
  expect((await d.store.vaults.byId(v.id))?.unmatchedHosts).toBe("tunnel");
  await updateVault(d, await openVault(d, owner, "v", "manage"), { unmatched_hosts: "deny" });
  expect((await d.store.vaults.byId(v.id))?.unmatchedHosts).toBe("deny");
});

test("the root CA is rotated for the instance owner only", async () => {
  const { d, owner, member } = await vaultWithMember();
  let rotations = 0;
  const ca = { rotate: async () => (rotations++, { certPem: "pem", notAfter: 0 }) as unknown as RootCa } as unknown as CaHolder;
  await expect(rotateCa(member, ca)).rejects.toBeInstanceOf(PermissionDenied);
  expect(rotations).toBe(0);
  await rotateCa(owner, ca);
  expect(rotations).toBe(1);
});

test("linking an identity starts only from a person's own session, never an agent's", async () => {
  const { d, owner } = await vaultWithMember();
  const client = { buildAuthorizationUrl: () => "https://idp.example/authorize" } as unknown as OidcClient;
  const invite = await createAgentInvite(d, owner, await openVault(d, owner, "v", "manage"), { name: "bot", role: "admin", token_ttl_seconds: null });
  const agent = await d.auth.authenticate((await redeemAgentInvite(d, invite.token)).token);
  await expect(beginOidc(d, client, { purpose: "link", principal: agent })).rejects.toBeInstanceOf(PermissionDenied);
  expect(await beginOidc(d, client, { purpose: "link", principal: owner })).toBe("https://idp.example/authorize");
});
