// Vaults as code (issue 39), the document: what `broker export` writes and `broker apply` reads, as the domain sees
// it. A vault in the file is its settings, services, credential keys (a reference's address, never a value), the
// agents and people who hold a role in it, its webhooks (a receiver's URL hidden unless the file writes it), its
// budgets and the workload bindings that admit platform tokens to it. contract/vault-file.ts reads a file into `VaultCodeFile` with the schemas every body is read with; the
// export is the same document before reading, as a person keeps it in a repository.

import { PermissionDenied } from "../errors.ts";
import type { Domain, OpenVault, Principal } from "../identity/index.ts";
import { listVaults, openVault } from "../identity/index.ts";
import type { Rules, SecretReference } from "../policy/index.ts";
import type { BudgetRow, ClaimCondition, PolicyMode, ServiceRow, UnmatchedHosts, VaultRole, WebhookFormat } from "../store/index.ts";
import { templateById, templateKeyFields, templateSettings } from "../templates/index.ts";
import type { BudgetRequest } from "./budgets.ts";
import { viewService, type ServiceAuth, type ServiceSpec } from "./services.ts";
import { maskWebhookReceiver } from "./webhook-url.ts";

/** A webhook as a file gives it: its URL in full, or hidden as the export writes it (matched, never created). */
export type FileWebhook = { readonly url: string; readonly format: WebhookFormat } | { readonly hidden: string; readonly format: WebhookFormat };

/** One vault as a file declares it (read): a section left out is left as it is. */
export interface VaultCodeSpec {
  readonly managed?: boolean | undefined;
  readonly unmatched_hosts?: UnmatchedHosts | undefined;
  readonly policy_mode?: PolicyMode | undefined;
  readonly services?: readonly ServiceSpec[] | undefined;
  readonly credentials?: readonly { readonly key: string; readonly reference?: SecretReference | undefined }[] | undefined;
  readonly agents?: readonly { readonly name: string; readonly role: VaultRole }[] | undefined;
  readonly members?: readonly { readonly email: string; readonly role: VaultRole }[] | undefined;
  readonly webhooks?: readonly FileWebhook[] | undefined;
  readonly budgets?: Readonly<Record<string, BudgetRequest>> | undefined;
  readonly workload_bindings?: readonly FileBinding[] | undefined;
}

/** A workload binding to the vault as a file gives it (read): its issuer by name, the rest as the API takes it. */
export interface FileBinding {
  readonly issuer: string;
  readonly name: string;
  readonly conditions: Readonly<Record<string, ClaimCondition>>;
  readonly role: VaultRole;
  readonly max_session_seconds: number;
}

/** A vault file as read: version 1, one or more vaults by name. */
export interface VaultCodeFile {
  readonly vaults: Readonly<Record<string, VaultCodeSpec>>;
}

/** A service as the file writes it: by template (its choice, keys and own settings) or by its auth and rules. */
export interface ExportedService {
  host: string;
  description?: string;
  enabled?: boolean;
  template?: string;
  operations?: readonly string[];
  keys?: Record<string, string>;
  settings?: Record<string, string>;
  auth?: ServiceAuth;
  rules?: Rules;
  rules_mode?: PolicyMode;
}

export interface ExportedBudget {
  scope: BudgetRow["scope"];
  agent?: string;
  service?: string;
  hosts?: string[];
  period: BudgetRow["period"];
  limits: Record<string, number>;
  soft_percent?: number;
  soft_action?: BudgetRow["softAction"];
}

export interface ExportedVault {
  managed: boolean;
  unmatched_hosts: UnmatchedHosts;
  policy_mode: PolicyMode;
  services: ExportedService[];
  credentials: { key: string; ref?: string; version?: string }[];
  agents: { name: string; role: VaultRole }[];
  members: { email: string; role: VaultRole }[];
  webhooks: { url: string; format: WebhookFormat }[];
  budgets: Record<string, ExportedBudget>;
  workload_bindings: FileBinding[];
}

/** What `broker export` writes (as YAML) and `broker apply` reads back. */
export interface ExportedFile {
  version: 1;
  vaults: Record<string, ExportedVault>;
}

/** `<connection>:<path>#<field>`, as a person writes a reference (its version apart). */
export function referenceText(r: SecretReference): string {
  return `${r.connection}:${r.path}${r.field !== undefined ? `#${r.field}` : ""}`;
}

/** Only a person who administers a vault exports or applies it (a file names its members and webhooks). */
export function requireFileAdmin(open: OpenVault): void {
  if (open.principal.kind !== "user") throw new PermissionDenied(NOT_A_PERSON);
  if (open.role !== "admin") throw new PermissionDenied(`vault ${open.vault.name} as a file is for its admins (your role: ${open.role})`);
}

export const NOT_A_PERSON = "only a person exports or applies vault files; agents and scoped sessions never do, whatever their role";

/**
 * The vaults `p` administers as a file: `vault` alone, or every vault where `p` is a human admin. Never a value, a
 * token or a signing secret; a receiver's URL is masked as lists show it (a Slack URL is itself a secret).
 */
export async function exportVaults(d: Domain, p: Principal, vault?: string): Promise<ExportedFile> {
  if (p.kind !== "user") throw new PermissionDenied(NOT_A_PERSON);
  const names = vault !== undefined ? [vault] : (await listVaults(d, p)).filter((v) => v.role === "admin").map((v) => v.name);
  const vaults: Record<string, ExportedVault> = {};
  for (const name of names) {
    const open = await openVault(d, p, name, "manage");
    requireFileAdmin(open);
    vaults[name] = await exportVault(d, open);
  }
  return { version: 1, vaults };
}

async function exportVault(d: Domain, open: OpenVault): Promise<ExportedVault> {
  const id = open.vault.id;
  const vault = (await d.store.vaults.byId(id)) ?? open.vault;
  const state = await d.store.vaultCode.state(id);
  const bindings = await d.store.workload.bindingsOfVault(id);
  const bindingAgents = new Set(bindings.flatMap((b) => (b.agentId === null ? [] : [b.agentId])));
  const budgets: Record<string, ExportedBudget> = {};
  for (const b of await d.store.budgets.list(id)) {
    const exported = await exportBudget(d, b);
    if (exported) budgets[b.name] = exported;
  }
  return {
    managed: state.managed,
    unmatched_hosts: vault.unmatchedHosts,
    policy_mode: vault.policyMode,
    services: (await d.store.services.allOfVault(id)).map(exportService),
    credentials: (await d.store.credentials.list(id)).map((c) =>
      c.reference
        ? { key: c.key, ref: referenceText(c.reference), ...(c.reference.version !== undefined && { version: c.reference.version }) }
        : { key: c.key },
    ),
    // A binding's agent is written as its binding (it is made with it, never invited).
    agents: (await d.store.access.grantsInVault(id)).filter((g) => !bindingAgents.has(g.agentId)).map((g) => ({ name: g.agentName, role: g.role })),
    members: (await d.store.access.members(id)).map((m) => ({ email: m.email, role: m.role })),
    webhooks: (await d.store.webhooks.list(id)).map((w) => ({ url: maskWebhookReceiver(w.url), format: w.format })),
    budgets,
    workload_bindings: bindings.map((b) => ({
      issuer: b.issuerName,
      name: b.name,
      conditions: b.conditions,
      role: b.role as VaultRole,
      max_session_seconds: b.maxSessionSeconds,
    })),
  };
}

/**
 * A service as the file writes it. One made from a template is written as that choice (the keys and settings that
 * differ from the template's), so an apply expands it the way the API does; one whose auth is no longer the
 * template's (an account connected at the provider) is written by its auth and rules, as is a custom one.
 */
export function exportService(r: ServiceRow): ExportedService {
  const view = viewService(r);
  const common = {
    host: view.host,
    ...(view.description !== "" && { description: view.description }),
    ...(!view.enabled && { enabled: false }),
  };
  const mode = r.rulesMode ? { rules_mode: r.rulesMode } : {};
  const t = view.template && templateById(view.template.id);
  if (t && view.template) {
    const auth = view.auth as unknown as Record<string, unknown>;
    const keys = Object.fromEntries(
      templateKeyFields(t)
        .filter(([field, suggested]) => auth[field] !== suggested)
        .map(([field]) => [field, String(auth[field])]),
    );
    const settings = Object.fromEntries(templateSettings(t).map(([field]) => [field, String(auth[field] ?? "")]));
    const expanded: Record<string, unknown> = { ...t.auth, ...keys, ...settings };
    if (sameAuth(expanded, auth))
      return {
        ...common,
        template: t.id,
        operations: view.template.operations,
        ...(Object.keys(keys).length && { keys }),
        ...(Object.keys(settings).length && { settings }),
        ...mode,
      };
  }
  return { ...common, auth: view.auth, ...(view.rules && { rules: view.rules }), ...mode };
}

/** Whether a template's expansion is the auth a service has (fields that are empty or absent alike). */
function sameAuth(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const present = (o: Record<string, unknown>) =>
    Object.entries(o)
      .filter(([, v]) => v !== undefined && v !== null && v !== "" && !(Array.isArray(v) && v.length === 0))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .sort()
      .join("\n");
  return present(a) === present(b);
}

async function exportBudget(d: Domain, b: BudgetRow): Promise<ExportedBudget | undefined> {
  let scoped: Partial<ExportedBudget> = {};
  if (b.scope === "agent") {
    const agent = b.scopeRef === null ? undefined : await d.store.agents.byId(Number(b.scopeRef));
    if (!agent) return undefined; // its agent was removed: nothing a file could name
    scoped = { agent: agent.name };
  } else if (b.scope === "service") scoped = { service: b.scopeRef ?? "" };
  else if (b.scope === "hosts") scoped = { hosts: JSON.parse(b.scopeRef ?? "[]") as string[] };
  const l = b.limits;
  const money = l.costMicros === null ? null : l.costMicros / 1_000_000;
  const measures: [string, number | null][] = [
    ["requests", l.requests],
    ["input_tokens", l.inputTokens],
    ["output_tokens", l.outputTokens],
    ["total_tokens", l.totalTokens],
    ["cost", money],
  ];
  const limits = Object.fromEntries(measures.filter((e): e is [string, number] => e[1] !== null));
  return {
    scope: b.scope,
    ...scoped,
    period: b.period,
    limits,
    ...(b.softPercent !== null && { soft_percent: b.softPercent, soft_action: b.softAction }),
  };
}
