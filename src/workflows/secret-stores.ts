// Secret store connections, the domain side (issue 36, architecture.md D24): who may create, change, share
// and remove one, and which vaults may point references at it. The owner's connections are shared with
// vaults one by one; a human admin of a vault may create one that only that vault uses. Agents and scoped
// sessions never manage connections or set references, whatever their role. The auth's secrets are sealed
// here and never come back out in a view; a connection's address is checked by the network guard when it
// is dialled, like any upstream.

import { Conflict, InvalidRequest, NotFound, PermissionDenied } from "../errors.ts";
import type { Secret } from "../secret.ts";
import type { SecretStoreConnectionRow, SecretStoreKind, SecretStoreSettings, Store, VaultRow } from "../store/index.ts";
import { formatReference, pathAllowed, type SecretReference } from "../policy/index.ts";
import { sealStoreSecrets } from "../crypto/index.ts";
import { iso, openVault, requireOwner, type Domain, type Principal, type ReferenceStatus } from "../identity/index.ts";

/** An operator's stores are few; the bound keeps a careless script from filling the table. */
export const MAX_SECRET_STORES = 100;

export interface SecretStoreInput {
  readonly name: string;
  readonly kind: SecretStoreKind;
  /** A vault's own connection (its name), or undefined for the owner's. */
  readonly vault?: string;
  readonly refreshSeconds: number;
  readonly graceSeconds: number;
  readonly settings: SecretStoreSettings;
  /** SECRET: the auth's secret fields. */
  readonly secrets: Readonly<Record<string, Secret>>;
}

export interface SecretStoreChange {
  readonly refreshSeconds?: number;
  readonly graceSeconds?: number;
  /** The kind's settings with the change applied (the caller merged them over `storedSettings`). */
  readonly settings: SecretStoreSettings;
  /** SECRET: a new auth's secret fields; undefined keeps the sealed ones. */
  readonly secrets?: Readonly<Record<string, Secret>>;
}

export interface ReferenceView {
  text: string;
  connection: string;
  path: string;
  field: string | null;
  version: string | null;
  last_refresh: string | null;
  version_seen: string | null;
  last_error: string | null;
}

/** A reference and how its last read went: names, times and words, never a value. */
export function viewReference(reference: SecretReference, status: ReferenceStatus | undefined): ReferenceView {
  return {
    text: formatReference(reference),
    connection: reference.connection,
    path: reference.path,
    field: reference.field ?? null,
    version: reference.version ?? null,
    last_refresh: status?.lastRefresh === undefined ? null : iso(status.lastRefresh),
    version_seen: status?.version ?? null,
    last_error: status?.lastError ?? null,
  };
}

/** Whether `vaultId` may point a reference at `path` through the connection: its own, or an owner's shared with it (within the share's paths). */
export async function connectionUsableBy(store: Store, row: SecretStoreConnectionRow, vaultId: number, path?: string): Promise<boolean> {
  if (row.vaultId !== null) return row.vaultId === vaultId;
  const share = (await store.secretStores.shares()).find((s) => s.connectionId === row.id && s.vaultId === vaultId);
  return share !== undefined && (path === undefined || pathAllowed(share.pathPrefixes, path));
}

/** The connection a reference set in `vaultId` names, when the vault may use it for that path; else a 400 naming `field`. */
export async function requireUsableConnection(d: Domain, vaultId: number, reference: SecretReference, field = "ref"): Promise<void> {
  const row = await d.store.secretStores.byName(reference.connection);
  if (!row || !(await connectionUsableBy(d.store, row, vaultId)))
    throw new InvalidRequest(
      `${field}: this vault has no secret store connection named ${reference.connection} (its own, or one the owner shared with it); see broker secret-store list`,
      field,
    );
  if (!(await connectionUsableBy(d.store, row, vaultId, reference.path)))
    throw new InvalidRequest(
      `${field}: ${reference.connection} is shared with this vault for some paths only, and ${reference.path} is not one of them`,
      field,
    );
}

/** The vaults `p` may see connections for, by id: the owner every vault; a person their admin and member vaults. */
async function visibleVaults(d: Domain, p: Principal): Promise<Map<number, VaultRow> | "all"> {
  if (p.kind !== "user") throw new PermissionDenied("agents and scoped sessions never see or manage secret store connections; a person does");
  if (p.instanceRole === "owner") return "all";
  const out = new Map<number, VaultRow>();
  for (const a of await d.store.access.vaultsOfUser(p.userId)) {
    if (a.role === "proxy") continue;
    const v = await d.store.vaults.byId(a.vaultId);
    if (v) out.set(v.id, v);
  }
  return out;
}

async function findConnection(d: Domain, name: string): Promise<SecretStoreConnectionRow> {
  const row = await d.store.secretStores.byName(name);
  if (!row) throw new NotFound(`no secret store connection named ${name}`);
  return row;
}

/** Who changes a connection: the owner; for a vault's own, also a human admin of that vault. */
async function requireManager(d: Domain, p: Principal, row: SecretStoreConnectionRow): Promise<void> {
  if (p.kind !== "user") throw new PermissionDenied("agents and scoped sessions never manage secret store connections; a person does");
  if (p.instanceRole === "owner") return;
  if (row.vaultId === null) throw new PermissionDenied("only the instance owner manages the owner's secret store connections");
  const vault = await d.store.vaults.byId(row.vaultId);
  if (!vault) throw new NotFound(`no secret store connection named ${row.name}`);
  await openVault(d, p, vault.name, "manage");
}

/** A connection `p` may see (one of a vault they use, or shared with one), else 404 as if there were none. */
async function requireVisible(d: Domain, p: Principal, row: SecretStoreConnectionRow): Promise<Map<number, VaultRow> | "all"> {
  const vaults = await visibleVaults(d, p);
  if (vaults === "all") return vaults;
  if (row.vaultId !== null && vaults.has(row.vaultId)) return vaults;
  const shares = await d.store.secretStores.shares();
  if (shares.some((s) => s.connectionId === row.id && vaults.has(s.vaultId))) return vaults;
  throw new NotFound(`no secret store connection named ${row.name}`);
}

/**
 * Sign-ins that act as the broker itself, not as what a person typed: a platform token file (Vault JWT or
 * Kubernetes) and the broker's own AWS identity (environment, web identity). Only the owner's connections
 * may use them, and a token file only when the operator listed it (BROKER_SECRET_STORE_TOKEN_FILES): a
 * vault's admin must never make the broker read one of its files, or lend its cloud identity, to a host
 * the admin chose.
 */
function requireAllowedSignIn(d: Domain, settings: SecretStoreSettings, ownersConnection: boolean): void {
  const auth = settings.auth as { method: string; token_file?: string };
  const actsAsBroker = auth.method === "jwt" || auth.method === "kubernetes" || auth.method === "environment";
  if (!actsAsBroker) return;
  if (!ownersConnection)
    throw new PermissionDenied(
      `auth method ${auth.method} signs in as the broker itself: only the owner's connections may use it; type the store's own credentials instead`,
    );
  if (auth.token_file !== undefined && !(d.secretStoreTokenFiles ?? []).includes(auth.token_file))
    throw new InvalidRequest(
      "auth.token_file: the broker reads only the token files its operator listed in BROKER_SECRET_STORE_TOKEN_FILES; add this path there and restart",
      "auth.token_file",
    );
}

/** Where a connection reaches its store: changing any of these without a new auth would send the stored auth to the new place. */
const LOCATION_FIELDS = ["address", "namespace", "ca_pem", "endpoint", "sts_endpoint", "vault_url", "authority"] as const;

export async function createSecretStore(d: Domain, p: Principal, input: SecretStoreInput): Promise<SecretStoreView> {
  let vaultId: number | null = null;
  if (input.vault !== undefined) {
    if (p.kind !== "user") throw new PermissionDenied("agents and scoped sessions never create secret store connections; a person does");
    vaultId = (await openVault(d, p, input.vault, "manage")).vault.id;
  } else requireOwner(p);
  requireAllowedSignIn(d, input.settings, vaultId === null);
  const existing = await d.store.secretStores.list();
  if (existing.some((c) => c.name === input.name)) throw new Conflict(`a secret store connection named ${input.name} already exists`);
  if (existing.length >= MAX_SECRET_STORES) throw new Conflict(`at most ${MAX_SECRET_STORES} secret store connections; remove one first`);
  const sealed = await sealStoreSecrets(d.dataKey, input.name, input.kind, input.secrets);
  const row = await d.store.secretStores.create({
    name: input.name,
    kind: input.kind,
    vaultId,
    settings: JSON.stringify(input.settings),
    secretsNonce: sealed.nonce,
    secretsCiphertext: sealed.ciphertext,
    refreshSeconds: input.refreshSeconds,
    graceSeconds: input.graceSeconds,
    createdBy: p.kind === "user" ? p.userId : null,
    createdAt: d.now(),
  });
  d.secretStores?.connectionChanged();
  return (await viewConnections(d, [row], "all"))[0]!;
}

export async function listSecretStores(d: Domain, p: Principal): Promise<SecretStoreView[]> {
  const vaults = await visibleVaults(d, p);
  const rows = await d.store.secretStores.list();
  if (vaults === "all") return viewConnections(d, rows, vaults);
  const shares = await d.store.secretStores.shares();
  const visible = rows.filter((r) => (r.vaultId !== null && vaults.has(r.vaultId)) || shares.some((s) => s.connectionId === r.id && vaults.has(s.vaultId)));
  return viewConnections(d, visible, vaults);
}

export async function getSecretStore(d: Domain, p: Principal, name: string): Promise<SecretStoreView & { references: ConnectionReference[] }> {
  const row = await findConnection(d, name);
  const vaults = await requireVisible(d, p, row);
  const [view] = await viewConnections(d, [row], vaults);
  return { ...view!, references: await referencesOf(d, row, vaults) };
}

/** The stored settings a PATCH is merged over (the kind's fields as shown, auth included). */
export async function storedSettings(d: Domain, p: Principal, name: string): Promise<{ kind: SecretStoreKind; settings: SecretStoreSettings }> {
  const row = await findConnection(d, name);
  await requireManager(d, p, row);
  return { kind: row.kind, settings: JSON.parse(row.settings) as SecretStoreSettings };
}

export async function updateSecretStore(d: Domain, p: Principal, name: string, change: SecretStoreChange): Promise<SecretStoreView> {
  const row = await findConnection(d, name);
  await requireManager(d, p, row);
  if (change.settings.kind !== row.kind) throw new InvalidRequest("kind cannot be changed: delete the connection and create another", "kind");
  requireAllowedSignIn(d, change.settings, row.vaultId === null);
  if (!change.secrets) {
    // The sealed auth was given for the old place: it goes to a new one only when a person types it again.
    const before = JSON.parse(row.settings) as Record<string, unknown>;
    const after = change.settings as unknown as Record<string, unknown>;
    const moved = LOCATION_FIELDS.find((f) => before[f] !== after[f]);
    if (moved) throw new InvalidRequest(`auth: changing ${moved} needs the auth again (the stored one was given for the old place)`, "auth");
  }
  const sealed = change.secrets
    ? await sealStoreSecrets(d.dataKey, row.name, row.kind, change.secrets)
    : { nonce: row.secretsNonce, ciphertext: row.secretsCiphertext };
  await d.store.secretStores.update(
    row.id,
    {
      settings: JSON.stringify(change.settings),
      secretsNonce: sealed.nonce,
      secretsCiphertext: sealed.ciphertext,
      refreshSeconds: change.refreshSeconds ?? row.refreshSeconds,
      graceSeconds: change.graceSeconds ?? row.graceSeconds,
    },
    d.now(),
  );
  d.secretStores?.connectionChanged();
  const [view] = await viewConnections(d, [(await d.store.secretStores.byName(name))!], "all");
  return view!;
}

export async function deleteSecretStore(d: Domain, p: Principal, name: string): Promise<void> {
  const row = await findConnection(d, name);
  await requireManager(d, p, row);
  const users = await referringCredentials(d, row);
  if (users.length) throw new Conflict(`credentials still refer to ${name}: ${users.join(", ")}; point them elsewhere or delete them first`);
  await d.store.secretStores.remove(row.id);
  d.secretStores?.connectionChanged();
}

/** `pathPrefixes`: references from the vault may read only paths starting with one of them (null: any path). */
export async function shareSecretStore(
  d: Domain,
  p: Principal,
  name: string,
  vaultName: string,
  pathPrefixes: readonly string[] | null = null,
): Promise<SecretStoreView> {
  requireOwner(p);
  const row = await findConnection(d, name);
  if (row.vaultId !== null) throw new InvalidRequest(`${name} is a vault's own connection; only the owner's connections are shared`, "name");
  const vault = await d.store.vaults.byName(vaultName);
  if (!vault) throw new NotFound(`no vault named ${vaultName}`);
  await d.store.secretStores.share(row.id, vault.id, pathPrefixes, d.now());
  d.secretStores?.connectionChanged();
  const [view] = await viewConnections(d, [row], "all");
  return view!;
}

export async function unshareSecretStore(d: Domain, p: Principal, name: string, vaultName: string): Promise<void> {
  requireOwner(p);
  const row = await findConnection(d, name);
  const vault = await d.store.vaults.byName(vaultName);
  if (!vault) throw new NotFound(`no vault named ${vaultName}`);
  const users = (await referringCredentials(d, row)).filter((u) => u.startsWith(`${vault.name}/`));
  if (users.length) throw new Conflict(`credentials of ${vault.name} still refer to ${name}: ${users.join(", ")}; point them elsewhere or delete them first`);
  if (!(await d.store.secretStores.unshare(row.id, vault.id))) throw new NotFound(`${name} is not shared with ${vault.name}`);
  d.secretStores?.connectionChanged();
}

/** Reads every reference through the connection again now (those of vaults `p` sees) and reports each. */
export async function checkSecretStore(d: Domain, p: Principal, name: string): Promise<{ ok: boolean; references: ConnectionReference[] }> {
  const row = await findConnection(d, name);
  await requireManager(d, p, row); // a read of the store on demand: for those who manage the connection
  const vaults = await requireVisible(d, p, row);
  const refs = await d.store.credentials.references();
  const runtime = d.secretStores;
  if (runtime)
    await Promise.all(refs.filter((r) => r.reference!.connection === row.name && seen(vaults, r.vaultId)).map((r) => runtime.readNow(r.vaultId, r.reference!)));
  const references = await referencesOf(d, row, vaults);
  return { ok: references.every((r) => r.reference.last_error === null && r.reference.last_refresh !== null), references };
}

export interface ConnectionReference {
  vault: string;
  key: string;
  reference: ReferenceView;
}

export interface SecretStoreView {
  name: string;
  kind: SecretStoreKind;
  vault: string | null;
  shared_with: string[];
  /** Per vault it is shared with: the path prefixes its references may read (null: any). */
  share_paths: Record<string, readonly string[] | null>;
  settings: Record<string, unknown>;
  auth: Record<string, unknown>;
  refresh_seconds: number;
  grace_seconds: number;
  created_at: string;
  updated_at: string;
  status: { references: number; last_refresh: string | null; last_error: string | null };
}

const seen = (vaults: Map<number, VaultRow> | "all", vaultId: number) => vaults === "all" || vaults.has(vaultId);

async function referencesOf(d: Domain, row: SecretStoreConnectionRow, vaults: Map<number, VaultRow> | "all"): Promise<ConnectionReference[]> {
  const out: ConnectionReference[] = [];
  for (const r of await d.store.credentials.references()) {
    if (r.reference!.connection !== row.name || !seen(vaults, r.vaultId)) continue;
    const vault = vaults === "all" ? await d.store.vaults.byId(r.vaultId) : vaults.get(r.vaultId);
    if (vault) out.push({ vault: vault.name, key: r.key, reference: viewReference(r.reference!, d.secretStores?.status(r.vaultId, r.reference!)) });
  }
  return out;
}

/** `vault/KEY` of every credential that refers to the connection. */
async function referringCredentials(d: Domain, row: SecretStoreConnectionRow): Promise<string[]> {
  const out: string[] = [];
  for (const r of await d.store.credentials.references()) {
    if (r.reference!.connection !== row.name) continue;
    out.push(`${(await d.store.vaults.byId(r.vaultId))?.name ?? r.vaultId}/${r.key}`);
  }
  return out;
}

async function viewConnections(d: Domain, rows: readonly SecretStoreConnectionRow[], vaults: Map<number, VaultRow> | "all"): Promise<SecretStoreView[]> {
  const shares = await d.store.secretStores.shares();
  const refs = await d.store.credentials.references();
  const names = new Map((await d.store.vaults.list()).map((v) => [v.id, v.name]));
  return rows.map((row) => {
    const { kind: _kind, auth, ...settings } = JSON.parse(row.settings) as SecretStoreSettings & Record<string, unknown>;
    const mine = refs.filter((r) => r.reference!.connection === row.name && seen(vaults, r.vaultId));
    const statuses = mine.map((r) => d.secretStores?.status(r.vaultId, r.reference!) ?? {});
    const lastRefresh = Math.max(0, ...statuses.map((s) => s.lastRefresh ?? 0));
    return {
      name: row.name,
      kind: row.kind,
      vault: row.vaultId === null ? null : (names.get(row.vaultId) ?? null),
      shared_with: shares.filter((s) => s.connectionId === row.id && seen(vaults, s.vaultId)).map((s) => names.get(s.vaultId) ?? String(s.vaultId)),
      share_paths: Object.fromEntries(
        shares.filter((s) => s.connectionId === row.id && seen(vaults, s.vaultId)).map((s) => [names.get(s.vaultId) ?? String(s.vaultId), s.pathPrefixes]),
      ),
      settings,
      auth: auth as Record<string, unknown>,
      refresh_seconds: row.refreshSeconds,
      grace_seconds: row.graceSeconds,
      created_at: iso(row.createdAt),
      updated_at: iso(row.updatedAt),
      status: {
        references: mine.length,
        last_refresh: lastRefresh ? iso(lastRefresh) : null,
        last_error: statuses.find((s) => s.lastError !== undefined)?.lastError ?? null,
      },
    };
  });
}
