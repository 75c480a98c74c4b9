// /v1/vaults and everything addressed inside one vault: members, invites, agent invites,
// credentials and services. Each handler opens the vault for the action it needs; the rules live in
// identity/principal.ts (agents and scoped sessions never read or write credentials and services).
// Bodies are read by their schemas (jsonBody); a credential's key in the URL by the contract's KeyName,
// once the vault is open, so a refused principal learns nothing about the key it named.

import { Hono } from "hono";
import { revealCredential, deleteCredential, listCredentials, setCredential } from "../../workflows/index.ts";
import type { Domain } from "../../identity/index.ts";
import { createAgentInvite, createVaultInvite, listInvites, revokeInvite } from "../../identity/index.ts";
import { addService, listServices, removeService, updateService } from "../../workflows/index.ts";
import { createVault, deleteVault, describeVault, listMembers, listVaults, updateVault } from "../../identity/index.ts";
import * as S from "../../contract/index.ts";
import { parseWith } from "../../contract/index.ts";
import { requirePrincipal } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { openVaultFor, pageQueryDoc, readPageQuery } from "../kit/index.ts";

const HUMANS_WRITE = "human admins and members; never agents or scoped sessions, whatever their role";

export function vaultRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  const tags = ["vaults"];

  r.post(
    "/",
    describe({
      summary: "Create a vault (you become its admin)",
      tags,
      auth: "bearer",
      who: "user sessions and agent tokens",
      success: { status: 201, schema: S.VaultAnswer },
      errors: [409],
    }),
    jsonBody(S.VaultInput),
    async (c) => c.json(await createVault(d, c.get("principal"), c.req.valid("json")), 201),
  );
  r.get("/", describe({ summary: "The vaults you hold a role in", tags, auth: "bearer", success: { status: 200, schema: S.VaultList } }), async (c) =>
    c.json({ vaults: await listVaults(d, c.get("principal")) }),
  );
  r.get("/:vault", describe({ summary: "One vault and your role in it", tags, auth: "bearer", success: { status: 200, schema: S.VaultAnswer } }), async (c) =>
    c.json(describeVault(await openVaultFor(d, c, "read"))),
  );
  r.patch(
    "/:vault",
    describe({
      summary: "Change a vault's settings (unmatched_hosts, policy_mode)",
      tags,
      auth: "bearer",
      who: "admins (agent tokens too; not scoped sessions); policy_mode: human admins only",
      success: { status: 200, schema: S.VaultAnswer },
    }),
    jsonBody(S.VaultUpdateInput),
    async (c) => c.json(await updateVault(d, await openVaultFor(d, c, "manage"), c.req.valid("json"))),
  );
  r.delete(
    "/:vault",
    describe({ summary: "Delete a vault with its credentials and services", tags, auth: "bearer", who: "human admins", success: { status: 204 } }),
    async (c) => {
      await deleteVault(d, await openVaultFor(d, c, "delete_vault"));
      return c.body(null, 204);
    },
  );
  r.get(
    "/:vault/members",
    describe({
      summary: "The vault's members and their roles",
      tags: ["members"],
      auth: "bearer",
      who: "admins",
      success: { status: 200, schema: S.MemberList },
    }),
    async (c) => c.json({ members: await listMembers(d, await openVaultFor(d, c, "manage")) }),
  );

  const invites = ["invites"];
  r.post(
    "/:vault/invites",
    describe({
      summary: "Invite a person (48 hours, single use)",
      tags: invites,
      auth: "bearer",
      who: "human admins",
      success: { status: 201, schema: S.InviteCreated },
      errors: [409],
    }),
    jsonBody(S.VaultInviteInput),
    async (c) => c.json(await createVaultInvite(d, c.get("principal"), await openVaultFor(d, c, "invite_people"), c.req.valid("json")), 201),
  );
  r.get(
    "/:vault/invites",
    describe({ summary: "Pending invites for people", tags: invites, auth: "bearer", who: "admins", success: { status: 200, schema: S.InviteList } }),
    async (c) => c.json({ invites: await listInvites(d, await openVaultFor(d, c, "manage"), "vault") }),
  );
  r.delete(
    "/:vault/invites/:id",
    describe({ summary: "Revoke a pending invite", tags: invites, auth: "bearer", who: "admins", success: { status: 204 } }),
    async (c) => {
      await revokeInvite(d, await openVaultFor(d, c, "manage"), "vault", c.req.param("id"));
      return c.body(null, 204);
    },
  );

  r.post(
    "/:vault/agent-invites",
    describe({
      summary: "Invite an agent (15 minutes, single use; redeemed for an agent token)",
      tags: invites,
      auth: "bearer",
      who: "admins (agent tokens too)",
      success: { status: 201, schema: S.InviteCreated },
      errors: [409],
    }),
    jsonBody(S.AgentInviteInput),
    async (c) => c.json(await createAgentInvite(d, c.get("principal"), await openVaultFor(d, c, "manage"), c.req.valid("json")), 201),
  );
  r.get(
    "/:vault/agent-invites",
    describe({ summary: "Pending agent invites", tags: invites, auth: "bearer", who: "admins", success: { status: 200, schema: S.InviteList } }),
    async (c) => c.json({ invites: await listInvites(d, await openVaultFor(d, c, "manage"), "agent") }),
  );
  r.delete(
    "/:vault/agent-invites/:id",
    describe({ summary: "Revoke a pending agent invite", tags: invites, auth: "bearer", who: "admins", success: { status: 204 } }),
    async (c) => {
      await revokeInvite(d, await openVaultFor(d, c, "manage"), "agent", c.req.param("id"));
      return c.body(null, 204);
    },
  );

  const creds = ["credentials"];
  r.get(
    "/:vault/credentials",
    describe({
      summary: "Credential key names (values only with reveal, for people)",
      tags: creds,
      auth: "bearer",
      who: "any role for names; values: human admins and members",
      query: { reveal: "true: include the values" },
      success: { status: 200, schema: S.CredentialList },
    }),
    async (c) => {
      const reveal = c.req.query("reveal") === "true" || c.req.query("reveal") === "1";
      const open = await openVaultFor(d, c, reveal ? "reveal" : "read");
      const rows = await listCredentials(d, open, reveal);
      // reveal: values go only to human admins/members who asked for them (checked by openVaultFor "reveal")
      return c.json({ credentials: rows.map((r) => (r.value ? { ...r, value: r.value.reveal() } : r)) });
    },
  );
  r.get(
    "/:vault/credentials/:key",
    describe({
      summary: "Read one credential's value",
      tags: creds,
      auth: "bearer",
      who: HUMANS_WRITE,
      success: { status: 200, schema: S.CredentialRevealed },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "reveal");
      const cred = await revealCredential(d, open, parseWith(S.KeyName, c.req.param("key"), "key"));
      return c.json({ ...cred, ...(cred.value && { value: cred.value.reveal() }) }); // reveal: as above, a human admin/member asked for it
    },
  );
  r.put(
    "/:vault/credentials/:key",
    describe({
      summary: "Set a credential's value (encrypted at rest), or a reference into a secret store",
      tags: creds,
      auth: "bearer",
      who: HUMANS_WRITE,
      success: { status: 200, schema: S.CredentialSet },
      errors: [413],
    }),
    jsonBody(S.CredentialInput),
    async (c) => {
      const open = await openVaultFor(d, c, "write_secrets");
      return c.json(await setCredential(d, open, parseWith(S.KeyName, c.req.param("key"), "key"), c.req.valid("json")));
    },
  );
  r.delete(
    "/:vault/credentials/:key",
    describe({ summary: "Delete a credential", tags: creds, auth: "bearer", who: HUMANS_WRITE, success: { status: 204 } }),
    async (c) => {
      const open = await openVaultFor(d, c, "write_secrets");
      await deleteCredential(d, open, parseWith(S.KeyName, c.req.param("key"), "key"));
      return c.body(null, 204);
    },
  );

  const services = ["services"];
  r.get(
    "/:vault/services",
    describe({
      summary: "The vault's services: hosts, how the credential is added, rules",
      tags: services,
      auth: "bearer",
      who: "any role",
      query: pageQueryDoc("after"),
      success: { status: 200, schema: S.ServiceList },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read");
      return c.json(await listServices(d, open, readPageQuery(c, S.PageAfterName)));
    },
  );
  r.post(
    "/:vault/services",
    describe({ summary: "Add a service", tags: services, auth: "bearer", who: HUMANS_WRITE, success: { status: 201, schema: S.ServiceAnswer }, errors: [409] }),
    jsonBody(S.ServiceInput),
    async (c) => c.json(await addService(d, await openVaultFor(d, c, "write_secrets"), c.req.valid("json")), 201),
  );
  r.patch(
    "/:vault/services/:host",
    describe({
      summary: "Change a service (fields left out keep their value; rules: null removes them; rules_mode: human admins only)",
      tags: services,
      auth: "bearer",
      who: HUMANS_WRITE,
      success: { status: 200, schema: S.ServiceAnswer },
    }),
    jsonBody(S.ServiceUpdateInput),
    async (c) => c.json(await updateService(d, await openVaultFor(d, c, "write_secrets"), c.req.param("host"), c.req.valid("json"))),
  );
  r.delete(
    "/:vault/services/:host",
    describe({ summary: "Remove a service", tags: services, auth: "bearer", who: HUMANS_WRITE, success: { status: 204 } }),
    async (c) => {
      await removeService(d, await openVaultFor(d, c, "write_secrets"), c.req.param("host"));
      return c.body(null, 204);
    },
  );

  return r;
}
