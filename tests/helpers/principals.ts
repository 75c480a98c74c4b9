// A person signed up and signed in through the domain itself, as a principal the domain's functions
// take: the tests that call the domain directly (permissions, races) start from one.

import { registerUser, type Domain, type UserPrincipal } from "../../src/identity/index.ts";
import { Secret } from "../../src/secret.ts";
import { createTestApi } from "./api.ts";

export async function registerAs(d: Domain, email: string, password = "correct horse battery"): Promise<UserPrincipal> {
  const { token } = await registerUser(d, { email, password: new Secret(password) });
  const p = await d.auth.authenticate(token.reveal()); // reveal: handed straight back to the authenticator
  if (p.kind !== "user") throw new Error(`a user session authenticated as ${p.kind}`);
  return p;
}

/** A fresh API's domain with its owner, and a vault "v" where a second person is a member. */
export async function vaultWithMember() {
  const { domain: d } = await createTestApi();
  const owner = await registerAs(d, "owner@example.com");
  const member = await registerAs(d, "member@example.com");
  const v = await d.store.vaults.create("v", d.now());
  await d.store.access.setMember(v.id, member.userId, "member", d.now());
  return { d, owner, member, v };
}
