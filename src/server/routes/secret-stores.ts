// /v1/secret-stores: connections to external secret stores (issue 36). The owner manages the owner's
// connections and shares them with vaults; a human admin of a vault manages that vault's own. Agents and
// scoped sessions get 403 throughout. Secret fields of a connection's auth go in, never come out.

import { Hono } from "hono";
import {
  checkSecretStore,
  createSecretStore,
  deleteSecretStore,
  getSecretStore,
  listSecretStores,
  shareSecretStore,
  storedSettings,
  unshareSecretStore,
  updateSecretStore,
} from "../../workflows/index.ts";
import {
  parseWith,
  readKindFields,
  SecretStoreCheck,
  SecretStoreConnectionList,
  SecretStoreConnectionView,
  SecretStoreCreateInput,
  SecretStorePatchInput,
  SecretStoreShareInput,
  VaultName,
} from "../../contract/index.ts";
import type { Domain } from "../../identity/index.ts";
import { jsonBody, requirePrincipal, type ApiEnv } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";

const tags = ["secret-stores"];
const who = "the owner; for a vault's own connection also its human admins; agents and scoped sessions get 403";

export function secretStoreRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  const name = (raw: string | undefined) => parseWith(VaultName, raw ?? "", "name");

  r.post(
    "/",
    describe({
      summary: "Add a connection to a secret store (its auth's secrets are sealed and never shown again)",
      tags,
      auth: "bearer",
      who,
      success: { status: 201, schema: SecretStoreConnectionView },
      errors: [409],
    }),
    jsonBody(SecretStoreCreateInput),
    async (c) => {
      const b = c.req.valid("json");
      const { settings, secrets } = readKindFields(b.kind, b.fields, true);
      const view = await createSecretStore(d, c.get("principal"), { ...b, settings, secrets: secrets ?? {} });
      return c.json(view, 201);
    },
  );
  r.get(
    "/",
    describe({ summary: "The secret store connections you may see", tags, auth: "bearer", who, success: { status: 200, schema: SecretStoreConnectionList } }),
    async (c) => c.json({ connections: await listSecretStores(d, c.get("principal")) }),
  );
  r.get(
    "/:name",
    describe({
      summary: "One connection, with every reference that reads through it and how its last read went",
      tags,
      auth: "bearer",
      who,
      success: { status: 200, schema: SecretStoreConnectionView },
    }),
    async (c) => c.json(await getSecretStore(d, c.get("principal"), name(c.req.param("name")))),
  );
  r.patch(
    "/:name",
    describe({
      summary: "Change a connection's settings or auth (a new auth replaces the old one whole)",
      tags,
      auth: "bearer",
      who,
      success: { status: 200, schema: SecretStoreConnectionView },
    }),
    jsonBody(SecretStorePatchInput),
    async (c) => {
      const p = c.get("principal");
      const connection = name(c.req.param("name"));
      const b = c.req.valid("json");
      const { kind, settings: stored } = await storedSettings(d, p, connection);
      const { kind: _kind, auth: storedAuth, ...kept } = stored as typeof stored & Record<string, unknown>;
      // A field given as null is removed; the rest of the stored settings are kept.
      const merged = Object.fromEntries(Object.entries({ ...kept, ...b.fields }).filter(([, v]) => v !== null));
      const read = readKindFields(kind, merged, false);
      const settings = read.secrets ? read.settings : ({ ...read.settings, auth: storedAuth } as typeof read.settings);
      return c.json(
        await updateSecretStore(d, p, connection, { refreshSeconds: b.refreshSeconds, graceSeconds: b.graceSeconds, settings, secrets: read.secrets }),
      );
    },
  );
  r.delete(
    "/:name",
    describe({ summary: "Remove a connection (409 while a credential refers to it)", tags, auth: "bearer", who, success: { status: 204 }, errors: [409] }),
    async (c) => {
      await deleteSecretStore(d, c.get("principal"), name(c.req.param("name")));
      return c.body(null, 204);
    },
  );
  r.put(
    "/:name/vaults/:vault",
    describe({
      summary: "Share an owner's connection with a vault, for every path or for some (its admins and members may then point references at it)",
      tags,
      auth: "bearer",
      who: "the owner",
      success: { status: 200, schema: SecretStoreConnectionView },
    }),
    jsonBody(SecretStoreShareInput),
    async (c) =>
      c.json(
        await shareSecretStore(d, c.get("principal"), name(c.req.param("name")), parseWith(VaultName, c.req.param("vault"), "vault"), c.req.valid("json")),
      ),
  );
  r.delete(
    "/:name/vaults/:vault",
    describe({
      summary: "Stop sharing a connection with a vault (409 while its credentials refer to it)",
      tags,
      auth: "bearer",
      who: "the owner",
      success: { status: 204 },
      errors: [409],
    }),
    async (c) => {
      await unshareSecretStore(d, c.get("principal"), name(c.req.param("name")), parseWith(VaultName, c.req.param("vault"), "vault"));
      return c.body(null, 204);
    },
  );
  r.post(
    "/:name/check",
    describe({
      summary: "Read every reference through the connection again now and report each",
      tags,
      auth: "bearer",
      who,
      success: { status: 200, schema: SecretStoreCheck },
    }),
    async (c) => c.json(await checkSecretStore(d, c.get("principal"), name(c.req.param("name")))),
  );
  return r;
}
