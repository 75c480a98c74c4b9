// /v1/vaults and everything addressed inside one vault: members, invites, agent invites,
// credentials and services. Each handler opens the vault for the action it needs; the rules live in
// vault/principal.ts (agents and scoped sessions never read or write credentials and services).

import { Hono } from "hono";
import { revealCredential, deleteCredential, listCredentials, setCredential } from "../../vault/index.ts";
import type { Domain } from "../../vault/index.ts";
import { createAgentInvite, createVaultInvite, listInvites, revokeInvite } from "../../vault/index.ts";
import { addService, listServices, removeService, updateService } from "../../vault/index.ts";
import { createVault, deleteVault, describeVault, listMembers, listVaults, updateVault } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { openVaultFor, readJson } from "../request.ts";

export function vaultRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));

  r.post("/", async (c) => c.json(await createVault(d, c.get("principal"), await readJson(c)), 201));
  r.get("/", async (c) => c.json({ vaults: await listVaults(d, c.get("principal")) }));
  r.get("/:vault", async (c) => c.json(describeVault(await openVaultFor(d, c, "read"))));
  r.patch("/:vault", async (c) => c.json(await updateVault(d, await openVaultFor(d, c, "manage"), await readJson(c))));
  r.delete("/:vault", async (c) => {
    await deleteVault(d, await openVaultFor(d, c, "delete_vault"));
    return c.body(null, 204);
  });
  r.get("/:vault/members", async (c) => c.json({ members: await listMembers(d, await openVaultFor(d, c, "manage")) }));

  r.post("/:vault/invites", async (c) => c.json(await createVaultInvite(d, c.get("principal"), await openVaultFor(d, c, "invite_people"), await readJson(c)), 201));
  r.get("/:vault/invites", async (c) => c.json({ invites: await listInvites(d, await openVaultFor(d, c, "manage"), "vault") }));
  r.delete("/:vault/invites/:id", async (c) => {
    await revokeInvite(d, await openVaultFor(d, c, "manage"), "vault", c.req.param("id"));
    return c.body(null, 204);
  });

  r.post("/:vault/agent-invites", async (c) => c.json(await createAgentInvite(d, c.get("principal"), await openVaultFor(d, c, "manage"), await readJson(c)), 201));
  r.get("/:vault/agent-invites", async (c) => c.json({ invites: await listInvites(d, await openVaultFor(d, c, "manage"), "agent") }));
  r.delete("/:vault/agent-invites/:id", async (c) => {
    await revokeInvite(d, await openVaultFor(d, c, "manage"), "agent", c.req.param("id"));
    return c.body(null, 204);
  });

  r.get("/:vault/credentials", async (c) => {
    const reveal = c.req.query("reveal") === "true" || c.req.query("reveal") === "1";
    const open = await openVaultFor(d, c, reveal ? "reveal" : "read");
    const rows = await listCredentials(d, open, reveal);
    // reveal: values go only to human admins/members who asked for them (checked by openVaultFor "reveal")
    return c.json({ credentials: rows.map((r) => (r.value ? { ...r, value: r.value.reveal() } : r)) });
  });
  r.get("/:vault/credentials/:key", async (c) => {
    const cred = await revealCredential(d, await openVaultFor(d, c, "reveal"), c.req.param("key"));
    return c.json({ ...cred, value: cred.value.reveal() }); // reveal: as above, a human admin/member asked for it
  });
  r.put("/:vault/credentials/:key", async (c) => c.json(await setCredential(d, await openVaultFor(d, c, "write_secrets"), c.req.param("key"), await readJson(c))));
  r.delete("/:vault/credentials/:key", async (c) => {
    await deleteCredential(d, await openVaultFor(d, c, "write_secrets"), c.req.param("key"));
    return c.body(null, 204);
  });

  r.get("/:vault/services", async (c) => c.json({ services: await listServices(d, await openVaultFor(d, c, "read")) }));
  r.post("/:vault/services", async (c) => c.json(await addService(d, await openVaultFor(d, c, "write_secrets"), await readJson(c)), 201));
  r.patch("/:vault/services/:host", async (c) => c.json(await updateService(d, await openVaultFor(d, c, "write_secrets"), c.req.param("host"), await readJson(c))));
  r.delete("/:vault/services/:host", async (c) => {
    await removeService(d, await openVaultFor(d, c, "write_secrets"), c.req.param("host"));
    return c.body(null, 204);
  });

  return r;
}
