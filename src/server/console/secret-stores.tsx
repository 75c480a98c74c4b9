/** @jsxImportSource hono/jsx */
// Secret store connections in the console (issue 36): `/settings/secret-stores` for the instance owner
// (every connection; add, change, share with vaults, check, remove) and `/vaults/:vault/settings/
// secret-stores` for a vault (the connections it may use; its human admins add and manage its own).
// Every form is read by the API's schemas (SecretStoreCreateInput, SecretStorePatchInput, readKindFields)
// and goes to the API's domain functions, which decide who may do what; a PATCH is merged over the
// stored settings as PATCH /v1/secret-stores/{name} does. A refused form is shown again as typed, its
// secret fields empty. The vault settings page's "Secret stores" section is here too.

import { Hono } from "hono";
import { BrokerError, InvalidRequest, NotFound } from "../../errors.ts";
import { parseWith, readKindFields, SecretStoreCreateInput, SecretStorePatchInput, SecretStoreShareInput, VaultName } from "../../contract/index.ts";
import { mayInVault, requireOwner, type OpenVault } from "../../identity/index.ts";
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
  type SecretStoreView,
} from "../../workflows/index.ts";
import { LinkButton, Section } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  redirectWithFlash,
  renderPage,
  requireConfirmation,
  requireSignedIn,
  runAction,
  signedIn,
  type ConsoleContext,
  type ConsoleEnv,
  type PageOptions,
} from "./context.tsx";
import { AddSection, type AddChoice } from "./secret-store-add.tsx";
import { ConnectionDetail } from "./secret-store-detail.tsx";
import { changeBody, createBody, inputOf, keepTyped, labelled, type TypedForm } from "./secret-store-form.ts";
import { kindSpec, methodSpec, methodsFor, type KindSpec, type MethodSpec } from "./secret-store-kinds.ts";
import { connectionPath, ConnectionsTable, EmptyConnections, OWNER_BASE, vaultStoresBase, type StoreScope } from "./secret-store-pages.tsx";

interface Scoped extends StoreScope {
  /** The page frame: the owner's navigation, or the vault's header on its Settings tab. */
  readonly page: Pick<PageOptions, "nav" | "vault">;
  /** Whether a connection is one of this page's (the vault may use it). */
  readonly shows: (c: SecretStoreView) => boolean;
  /** Refuses, before anything typed is read, a person who may not add a connection here. */
  readonly requireAdd: () => Promise<unknown>;
}

/** The owner's pages: anyone else is refused before anything is read. */
async function ownerScope(c: ConsoleContext): Promise<Scoped> {
  requireOwner(signedIn(c));
  return {
    base: OWNER_BASE,
    mayAdd: true,
    owner: true,
    tokenFiles: c.get("kit").d.secretStoreTokenFiles ?? [],
    mayManage: () => true,
    page: { nav: "secret-stores" },
    shows: () => true,
    requireAdd: async () => requireOwner(signedIn(c)),
  };
}

/** A vault's pages: the connections it may use, for those who set its credentials; its human admins add and manage its own. */
async function vaultScope(c: ConsoleContext): Promise<Scoped> {
  const open = await openConsoleVault(c, "write_secrets");
  return scopeOfVault(c, open);
}

function scopeOfVault(c: ConsoleContext, open: OpenVault): Scoped {
  const user = signedIn(c);
  const name = open.vault.name;
  const owner = user.instanceRole === "owner";
  const admin = mayInVault(user, open.role, "manage");
  return {
    base: vaultStoresBase(name),
    vault: name,
    mayAdd: admin,
    owner,
    tokenFiles: c.get("kit").d.secretStoreTokenFiles ?? [],
    mayManage: (s) => owner || (s.vault === name && admin),
    page: { nav: "vaults", vault: { name, role: open.role, section: "settings" } },
    shows: (s) => s.vault === name || s.shared_with.includes(name),
    requireAdd: () => openConsoleVault(c, "manage"),
  };
}

/** The connections of the page's scope, by name. */
async function connectionsOf(c: ConsoleContext, scope: Scoped): Promise<SecretStoreView[]> {
  const all = await listSecretStores(c.get("kit").d, signedIn(c));
  return all.filter(scope.shows).sort((a, b) => a.name.localeCompare(b.name, "en"));
}

/** The add form's store and method from the query (`?kind=vault&method=token`); none: the kind picker. A vault's own never signs in as the broker. */
function choiceOf(c: ConsoleContext, scope: StoreScope): { kind: KindSpec; method: MethodSpec } | undefined {
  const kind = kindSpec(c.req.query("kind"));
  if (!kind) return undefined;
  const methods = methodsFor(kind, scope.vault === undefined);
  return { kind, method: methods.find((m) => m.method === c.req.query("method")) ?? methods[0]! };
}

async function renderList(c: ConsoleContext, scope: Scoped, choice: AddChoice | undefined = choiceOf(c, scope), status: PageOptions["status"] = 200) {
  const rows = await connectionsOf(c, scope);
  const body = (
    <>
      <Section
        title="Connections"
        id="connections"
        description={
          scope.vault === undefined
            ? "Where credentials by reference read their values. A value stays in its store; the broker reads it again every refresh interval."
            : `The connections credentials of ${scope.vault} may read from: the owner's shared with it, and its own.`
        }
      >
        <ConnectionsTable scope={scope} rows={rows} empty={<EmptyConnections scope={scope} />} />
      </Section>
      {scope.mayAdd ? <AddSection scope={scope} choice={choice} /> : null}
    </>
  );
  const lead =
    scope.vault === undefined
      ? "Connections to HashiCorp Vault or OpenBao, AWS Secrets Manager, Google Secret Manager and Azure Key Vault. Only you, the owner, see this page."
      : "Secret stores this vault's credentials may read from.";
  return renderPage(c, { title: "Secret stores", ...scope.page, lead, status }, body);
}

const nameOf = (c: ConsoleContext) => parseWith(VaultName, c.req.param("name") ?? "", "name");

/** One connection of the scope (a vault's page shows only those it may use, and only its own references). */
async function findConnection(c: ConsoleContext, scope: Scoped) {
  const found = await getSecretStore(c.get("kit").d, signedIn(c), nameOf(c));
  if (!scope.shows(found)) throw new NotFound(`no secret store connection named ${found.name} for this vault`);
  const references = scope.vault === undefined ? found.references : found.references.filter((r) => r.vault === scope.vault);
  return { c: found as SecretStoreView, references };
}

async function renderDetail(c: ConsoleContext, scope: Scoped, typed?: TypedForm, status: PageOptions["status"] = 200) {
  const { c: conn, references } = await findConnection(c, scope);
  const vaults = scope.owner && scope.vault === undefined && conn.vault === null ? (await c.get("kit").d.store.vaults.list()).map((v) => v.name).sort() : [];
  const body = (
    <>
      <ConnectionDetail scope={scope} c={conn} references={references} vaults={vaults} method={c.req.query("method")} typed={typed} />
      <p>
        <a href={scope.base}>All secret stores</a>
      </p>
    </>
  );
  return renderPage(c, { title: `Connection ${conn.name}`, ...scope.page, lead: `${kindSpec(conn.kind)?.label ?? conn.kind} connection.`, status }, body);
}

const refusedStatus = (err: BrokerError): 400 | 403 | 404 | 409 => (err.status === 403 || err.status === 404 || err.status === 409 ? err.status : 400);

/** A refusal of a connection's form as the flash, the field it names marked, the non-secret fields kept. */
function refusal(c: ConsoleContext, err: BrokerError, kind: KindSpec | undefined, method: MethodSpec | undefined): TypedForm {
  const field = err instanceof InvalidRequest ? err.field : undefined;
  const text = labelled(kind, describeError(err), field);
  c.set("flash", { kind: "error", text });
  return { values: keepTyped(formOf(c), kind, method), invalid: inputOf(field), error: text };
}

/** The stored settings with a PATCH's fields over them (null removes one), as PATCH /v1/secret-stores/{name} merges. */
async function patched(c: ConsoleContext, name: string, body: Record<string, unknown>) {
  const d = c.get("kit").d;
  const { kind, settings: stored } = await storedSettings(d, signedIn(c), name); // the permission check comes first
  const b = parseWith(SecretStorePatchInput, body);
  const { kind: _kind, auth: storedAuth, ...kept } = stored as typeof stored & Record<string, unknown>;
  const merged = Object.fromEntries(Object.entries({ ...kept, ...b.fields }).filter(([, v]) => v !== null));
  const read = readKindFields(kind, merged, false);
  const settings = read.secrets ? read.settings : ({ ...read.settings, auth: storedAuth } as typeof read.settings);
  return updateSecretStore(d, signedIn(c), name, { refreshSeconds: b.refreshSeconds, graceSeconds: b.graceSeconds, settings, secrets: read.secrets });
}

/** What a check found, in one sentence: every reference read, or which failed and why. */
function checkWords(name: string, result: Awaited<ReturnType<typeof checkSecretStore>>): { kind: "success" | "error"; text: string } {
  const n = result.references.length;
  if (n === 0) return { kind: "success", text: `Nothing to check: no credential reads through ${name} yet.` };
  const failed = result.references.filter((r) => r.reference.last_error !== null || r.reference.last_refresh === null);
  if (failed.length === 0) return { kind: "success", text: `Checked ${name}: ${n === 1 ? "the reference reads" : `all ${n} references read`} fine.` };
  const which = failed.map((r) => `${r.vault}/${r.key}: ${r.reference.last_error ?? "no answer yet"}`).join("; ");
  return { kind: "error", text: `Checked ${name}: ${failed.length} of ${n} failed. ${which}` };
}

/** The routes of one scope under `base` (a Hono path, `:vault` for a vault's). */
function scopeRoutes(r: Hono<ConsoleEnv>, base: string, scopeOf: (c: ConsoleContext) => Promise<Scoped>) {
  r.use(base, requireSignedIn);
  r.use(`${base}/*`, requireSignedIn);

  r.get(base, async (c) => renderList(c, await scopeOf(c)));

  r.post(base, async (c) => {
    const scope = await scopeOf(c);
    const kind = kindSpec(c.req.query("kind"));
    const method = kind && methodSpec(kind, c.req.query("method"));
    if (!kind || !method) return redirectWithFlash(c, `${scope.base}#add`, "error", "Choose a store and how the broker signs in to it first.");
    try {
      await scope.requireAdd();
      const b = parseWith(SecretStoreCreateInput, createBody(kind, method, formOf(c), scope.vault));
      const { settings, secrets } = readKindFields(b.kind, b.fields, true);
      const view = await createSecretStore(c.get("kit").d, signedIn(c), { ...b, settings, secrets: secrets ?? {} });
      const next = view.vault === null ? " Share it with the vaults whose credentials may read from it." : "";
      return redirectWithFlash(c, connectionPath(scope, view.name), "success", `Connection ${view.name} added.${next}`);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      const typed = refusal(c, err, kind, method);
      return renderList(c, scope, { kind, method, typed }, refusedStatus(err));
    }
  });

  r.get(`${base}/:name`, async (c) => renderDetail(c, await scopeOf(c)));

  r.post(`${base}/:name/settings`, async (c) => {
    const scope = await scopeOf(c);
    const { c: conn } = await findConnection(c, scope);
    const kind = kindSpec(conn.kind)!;
    const current = typeof conn.auth.method === "string" ? conn.auth.method : undefined;
    const method = methodSpec(kind, c.req.query("method")) ?? methodSpec(kind, current) ?? kind.methods[0]!;
    try {
      const view = await patched(c, conn.name, changeBody(kind, method, current, formOf(c)));
      return redirectWithFlash(c, connectionPath(scope, view.name), "success", `Saved: the changes to ${view.name}. Its values are read again.`);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return renderDetail(c, scope, refusal(c, err, kind, method), refusedStatus(err));
    }
  });

  r.post(`${base}/:name/check`, async (c) => {
    const scope = await scopeOf(c);
    const back = connectionPath(scope, c.req.param("name") ?? "");
    try {
      const { c: conn } = await findConnection(c, scope);
      const words = checkWords(conn.name, await checkSecretStore(c.get("kit").d, signedIn(c), conn.name));
      return redirectWithFlash(c, `${back}#references-section`, words.kind, words.text);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return redirectWithFlash(c, back, "error", describeError(err));
    }
  });

  r.post(`${base}/:name/share`, async (c) => {
    const scope = await scopeOf(c);
    const vault = (formOf(c).vault ?? "").trim();
    const paths = (formOf(c).paths ?? "")
      .split(/\r?\n/)
      .map((p) => p.trim())
      .filter(Boolean);
    return runAction(c, {
      run: async () => {
        requireOwner(signedIn(c));
        const prefixes = parseWith(SecretStoreShareInput, paths.length ? { paths } : {});
        return shareSecretStore(c.get("kit").d, signedIn(c), nameOf(c), parseWith(VaultName, vault, "vault"), prefixes);
      },
      success: (v) => `Shared: credentials of ${vault} may now read through ${v.name}${paths.length ? `, at paths starting with ${paths.join(", ")}` : ""}.`,
      redirect: `${connectionPath(scope, c.req.param("name") ?? "")}#sharing`,
    });
  });

  r.post(`${base}/:name/unshare`, async (c) => {
    const scope = await scopeOf(c);
    const vault = (formOf(c).vault ?? "").trim();
    return runAction(c, {
      run: async () => {
        requireOwner(signedIn(c));
        await unshareSecretStore(c.get("kit").d, signedIn(c), nameOf(c), parseWith(VaultName, vault, "vault"));
      },
      success: `Stopped sharing with ${vault}.`,
      redirect: `${connectionPath(scope, c.req.param("name") ?? "")}#sharing`,
    });
  });

  r.post(`${base}/:name/delete`, async (c) => {
    const scope = await scopeOf(c);
    const name = c.req.param("name") ?? "";
    return runAction(c, {
      run: async () => {
        const { c: conn } = await findConnection(c, scope);
        await storedSettings(c.get("kit").d, signedIn(c), conn.name); // who may remove it: before the typed phrase is read
        requireConfirmation(c, conn.name);
        await deleteSecretStore(c.get("kit").d, signedIn(c), conn.name);
        return conn;
      },
      success: (conn) => `Connection ${conn.name} removed.`,
      redirect: scope.base,
      failure: `${connectionPath(scope, name)}#remove`,
    });
  });
}

export function secretStoreRoutes() {
  const r = new Hono<ConsoleEnv>();
  scopeRoutes(r, OWNER_BASE, ownerScope);
  scopeRoutes(r, "/vaults/:vault/settings/secret-stores", vaultScope);
  return r;
}

/** The "Secret stores" section of a vault's settings page: the connections it may use, and where to add one. */
export async function renderVaultStores(props: { c: ConsoleContext; open: OpenVault }) {
  // Where credentials come from is for those who set them: a proxy-role person uses them and sees none of this.
  if (!mayInVault(props.open.principal, props.open.role, "write_secrets")) return null;
  const scope = scopeOfVault(props.c, props.open);
  const rows = await connectionsOf(props.c, scope);
  return (
    <Section
      title="Secret stores"
      id="secret-stores-section"
      description="Credentials of this vault may read their values from these stores by reference, instead of holding a copy."
    >
      <ConnectionsTable scope={scope} rows={rows} empty={<EmptyConnections scope={{ ...scope, mayAdd: false }} />} />
      <div class="actions">
        <LinkButton href={scope.mayAdd ? `${scope.base}#add` : scope.base} variant={scope.mayAdd ? "primary" : "secondary"}>
          {scope.mayAdd ? "Add a connection for this vault" : "Open secret stores"}
        </LinkButton>
      </div>
    </Section>
  );
}
