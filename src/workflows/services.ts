// Services of a vault: which hosts it serves and how the credential is injected (bearer, basic,
// a named header with optional prefix, a query parameter, a path template, or passthrough with no
// credential). A service decides where a stored value is sent, so every change is a secret write:
// human admins and members only.

import { Conflict, InvalidRequest, NotFound } from "../errors.ts";
import type { AuthType, PolicyMode, ServiceRow } from "../store/index.ts";
import type { Domain } from "../identity/index.ts";
import { parseHostPattern } from "../policy/index.ts";
import { checkPageLimit, cutPage, requireInVault, requireUnmanaged, type OpenVault } from "../identity/index.ts";
import { RulesList, type Rules } from "../policy/index.ts";
import { isMintedAuthType, mintedAuthConfig, mintedAuthKeyFields, parseMintedAuthConfig, type MintedAuthFields } from "../policy/index.ts";
import { OPERATION_NAMES, rulesFor, servesHost, templateById, type TemplateChoice } from "../templates/index.ts";
import { describeTemplateChoice } from "../words/index.ts";

export interface ServiceAuth extends MintedAuthFields {
  type: AuthType;
  token?: string;
  header?: string;
  prefix?: string;
  username?: string;
  /** 'query': the parameter name, e.g. "key" for ?key=<value>. */
  param?: string;
  /** 'path': e.g. "/bot{value}", placed before the agent's path. */
  template?: string;
}

/** A new service as the contract's ServiceInput reads it. */
export interface ServiceSpec {
  host: string;
  description: string;
  auth: ServiceAuth;
  enabled: boolean;
  rules?: Rules;
  /** Made from a catalogue template: which one and the operations chosen (auth and rules are their expansion). */
  from?: TemplateChoice;
  /** The service's own rules mode (architecture.md D33); absent: its vault's policy mode. Human admins only. */
  rules_mode?: PolicyMode;
}

/**
 * A change to a service (ServiceUpdateInput): absent keeps the current value; `rules: null` removes the
 * rules. `from` sets auth and rules from a template again; a change of auth or rules without it makes
 * the service a custom one (its words would no longer be the template's).
 */
export interface ServicePatch {
  description?: string;
  auth?: ServiceAuth;
  enabled?: boolean;
  rules?: Rules | null;
  from?: TemplateChoice;
  /** The service's own rules mode; null: its vault's again. Human admins only. */
  rules_mode?: PolicyMode | null;
}

/** A template-made service as shown: its template and operations, and what today's catalogue would change. */
export interface ServiceTemplateView {
  id: string;
  name: string;
  operations: readonly string[];
  /** "GitHub (api.github.com), read only". */
  said: string;
  /** Present when this release's catalogue gives the chosen operations other rules than the service has. */
  catalogue_rules?: Rules;
}

export interface ServiceView {
  host: string;
  description: string;
  auth: ServiceAuth;
  enabled: boolean;
  /** Allowed methods and paths; absent: everything on the host. */
  rules?: Rules;
  template?: ServiceTemplateView;
  /** The service's own rules mode (architecture.md D33); absent: its vault's policy mode. */
  rules_mode?: PolicyMode;
}

/** Every credential key a service's auth uses (none for passthrough). */
export function authKeys(auth: ServiceAuth): string[] {
  return authKeyFields(auth).map(([, key]) => key);
}

/** The same as [field, key] pairs, for error messages that name the field. */
export function authKeyFields(auth: ServiceAuth): [string, string][] {
  if (isMintedAuthType(auth.type)) return mintedAuthKeyFields(auth.type, auth);
  return auth.token ? [["token", auth.token]] : [];
}

export function viewService(r: ServiceRow): ServiceView {
  const auth: ServiceAuth = isMintedAuthType(r.authType) ? { type: r.authType, ...parseMintedAuthConfig(r.authConfig) } : { type: r.authType };
  if (r.authKey) auth.token = r.authKey;
  if (r.authHeader) auth.header = r.authHeader;
  if (r.authPrefix) auth.prefix = r.authPrefix;
  if (r.authUsername) auth.username = r.authUsername;
  if (r.authParam) auth.param = r.authParam;
  if (r.authTemplate) auth.template = r.authTemplate;
  const rules = storedRules(r);
  const template = templateView(r, rules);
  return {
    host: r.host,
    description: r.description,
    auth,
    enabled: r.enabled,
    ...(rules && { rules }),
    ...(template && { template }),
    ...(r.rulesMode && { rules_mode: r.rulesMode }),
  };
}

/** The template a row was made from, and the catalogue's rules for its operations when they differ (a person applies them). */
function templateView(r: ServiceRow, rules: Rules | undefined): ServiceTemplateView | undefined {
  if (r.template === null) return undefined;
  const t = templateById(r.template);
  const operations = r.operations ?? [];
  // A template this release no longer has: still named, its rules as they are.
  if (!t) return { id: r.template, name: r.template, operations, said: describeTemplateChoice(r.template, r.host, operations) };
  const today = rulesFor(
    t,
    OPERATION_NAMES.filter((op) => operations.includes(op)),
  );
  const same = JSON.stringify(today) === JSON.stringify(rules ?? []);
  return { id: t.id, name: t.name, operations, said: describeTemplateChoice(t.name, r.host, operations), ...(!same && { catalogue_rules: today }) };
}

/** The rules kept with a service row; a row that no longer parses allows nothing rather than everything. */
export function storedRules(r: Pick<ServiceRow, "rules">): Rules | undefined {
  if (r.rules === null) return undefined;
  try {
    const read = RulesList.safeParse(JSON.parse(r.rules));
    return read.success ? read.data : [];
  } catch {
    return [];
  }
}

export function toRow(
  vaultId: number,
  host: string,
  description: string,
  auth: ServiceAuth,
  enabled: boolean,
  rules?: Rules,
  from?: TemplateChoice,
): Omit<ServiceRow, "updatedAt"> {
  return {
    template: from?.template ?? null,
    operations: from?.operations ?? null,
    rules: rules ? JSON.stringify(rules) : null,
    vaultId,
    host,
    description,
    authType: auth.type,
    authKey: auth.token ?? null,
    authHeader: auth.header ?? null,
    authPrefix: auth.prefix ?? null,
    authUsername: auth.username ?? null,
    authParam: auth.param ?? null,
    authTemplate: auth.template ?? null,
    authConfig: isMintedAuthType(auth.type) ? mintedAuthConfig(mintedFields(auth)) : null,
    enabled,
  };
}

function mintedFields(auth: ServiceAuth): MintedAuthFields {
  const { type: _type, token: _t, header: _h, prefix: _p, username: _u, param: _q, template: _tpl, ...fields } = auth;
  return fields;
}

/** A page of the vault's services in host order, after the host `after`. */
export async function listServices(
  d: Domain,
  open: OpenVault,
  q: { limit: number; after?: string },
): Promise<{ services: ServiceView[]; next_cursor: string | null }> {
  checkPageLimit(q.limit);
  const page = cutPage(await d.store.services.page(open.vault.id, q.after ?? "", q.limit + 1), q.limit, (s) => s.host);
  return { services: page.rows.map(viewService), next_cursor: page.next_cursor };
}

/**
 * Every service of the vault, unbounded: for a reader that must look at all of them (which services send
 * a credential today). A list shown as it is is read by pages (listServices).
 */
export async function listEveryService(d: Domain, open: OpenVault): Promise<ServiceView[]> {
  return (await d.store.services.allOfVault(open.vault.id)).map(viewService);
}

/** The vault's service for `host` (a stored host pattern, as the service list names it), if there is one. */
export async function serviceOfHost(d: Domain, vaultId: number, host: string): Promise<ServiceView | undefined> {
  const row = await d.store.services.get(vaultId, host);
  return row && viewService(row);
}

/** The vault's services for these hosts (a proposal's, say), by host: one lookup each, never the whole vault. */
export async function servicesOfHosts(d: Domain, vaultId: number, hosts: Iterable<string>): Promise<Map<string, ServiceView>> {
  const out = new Map<string, ServiceView>();
  for (const host of new Set(hosts)) {
    const found = await serviceOfHost(d, vaultId, host);
    if (found) out.set(host, found);
  }
  return out;
}

export async function addService(d: Domain, open: OpenVault, spec: ServiceSpec): Promise<ServiceView> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open);
  if (spec.rules_mode !== undefined) requireInVault(open, "policy_mode");
  const host = spec.host;
  const row = toRow(open.vault.id, host, spec.description, spec.auth, spec.enabled, spec.rules, spec.from);
  await d.store.transaction(async (tx) => {
    if (await tx.services.get(open.vault.id, host)) throw new Conflict(`a service for ${host} already exists; update it instead`);
    await tx.services.put(row, d.now());
    if (spec.rules_mode !== undefined) await tx.policyModes.setServiceMode(open.vault.id, host, spec.rules_mode);
  });
  d.onVaultChange?.(open.vault.id);
  return viewService({ ...row, rulesMode: spec.rules_mode ?? null, updatedAt: d.now() });
}

export async function updateService(d: Domain, open: OpenVault, rawHost: string, patch: ServicePatch): Promise<ServiceView> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open);
  if (patch.rules_mode !== undefined) requireInVault(open, "policy_mode");
  const host = parseHostPattern(rawHost, { allowIp: true }).text;
  const updated = await d.store.transaction(async (tx) => {
    const current = await tx.services.get(open.vault.id, host);
    if (!current) throw new NotFound(`no service for ${host} in this vault`);
    const view = viewService(current);
    const t = patch.from && templateById(patch.from.template);
    if (t && !servesHost(t, host)) throw new InvalidRequest(`template: ${t.name} serves ${t.hosts.join(", ")}, not ${host}`, "template");
    // Changing the auth or the rules by hand makes the service a custom one; naming the template again keeps it one.
    const handEdited = patch.auth !== undefined || patch.rules !== undefined;
    const kept = current.template === null ? undefined : { template: current.template, operations: current.operations ?? [] };
    const row = toRow(
      open.vault.id,
      host,
      patch.description ?? view.description,
      patchedAuth(view, patch),
      patch.enabled ?? view.enabled,
      // Absent keeps the current rules; null removes them (everything allowed again).
      patch.rules === undefined ? view.rules : (patch.rules ?? undefined),
      patch.from ?? (handEdited ? undefined : (kept as TemplateChoice | undefined)),
    );
    await tx.services.put(row, d.now());
    // The put keeps the rules mode; only a change that names it sets it (null: the vault's again).
    if (patch.rules_mode !== undefined) await tx.policyModes.setServiceMode(open.vault.id, host, patch.rules_mode);
    return { ...row, rulesMode: patch.rules_mode === undefined ? (current.rulesMode ?? null) : patch.rules_mode };
  });
  d.onVaultChange?.(open.vault.id);
  return viewService({ ...updated, updatedAt: d.now() });
}

/**
 * The auth a change leaves a service with: the patch's, or the current one when it has none. Naming the
 * service's own template again (a catalogue update, the template's edit form) sets the template's auth,
 * except where the service's auth is of another type than the template's: an account connected at the
 * provider (oauth2_refresh, connect-complete.ts) from a template whose own auth is a stored token. Its
 * auth stays as it is, and only the rules and the operations follow the template.
 */
export function patchedAuth(current: ServiceView, patch: Pick<ServicePatch, "auth" | "from">): ServiceAuth {
  if (!patch.auth) return current.auth;
  const ownTemplate = patch.from !== undefined && current.template?.id === patch.from.template;
  return ownTemplate && patch.auth.type !== current.auth.type ? current.auth : patch.auth;
}

export async function removeService(d: Domain, open: OpenVault, rawHost: string): Promise<void> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open);
  // A wildcard over a public suffix stored before that rule existed must stay removable.
  const host = parseHostPattern(rawHost, { allowIp: true, acceptPublicSuffixWildcard: true }).text;
  if (!(await d.store.services.remove(open.vault.id, host))) throw new NotFound(`no service for ${host} in this vault`);
  d.onVaultChange?.(open.vault.id);
}
