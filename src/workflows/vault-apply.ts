// `broker apply` (issue 39, architecture.md D27): a vault file made true in one transaction. Each section of each
// vault is compared with the store inside the transaction and changed where it differs, every change said in words;
// what the broker cannot do from a file (a value to set, an agent or a person to invite, a receiver whose URL the
// file hides) is said as left for a person, never guessed at. A dry run is the same walk rolled back, so its plan
// is the one an apply would carry out; applying a file twice changes nothing the second time.

import { Conflict, InvalidRequest, PermissionDenied } from "../errors.ts";
import type { Domain, OpenVault, Principal, UserPrincipal } from "../identity/index.ts";
import { createVault, openVault } from "../identity/index.ts";
import { formatReference } from "../policy/index.ts";
import type { Secret } from "../secret.ts";
import type { DeclaredAccess, Repos, Store, VaultRow } from "../store/index.ts";
import { applyBindings } from "./vault-apply-bindings.ts";
import { applyBudgets, applyServices, applyWebhooks } from "./vault-apply-sections.ts";
import type { Applying, ApplyResult, Section, VaultPlan } from "./vault-plan.ts";
import { NOT_A_PERSON, requireFileAdmin, type VaultCodeFile, type VaultCodeSpec } from "./vault-file.ts";
import { requireUsableConnection } from "./secret-stores.ts";

class RolledBack extends Error {}

/**
 * Applies `file` for `p` (a person: an admin of every vault it names that exists; any person may create the rest,
 * as `POST /v1/vaults` allows). One transaction for the whole file: all of it or none.
 */
export async function applyVaultFile(d: Domain, p: Principal, file: VaultCodeFile, opts: { dryRun: boolean }): Promise<ApplyResult> {
  if (p.kind !== "user") throw new PermissionDenied(NOT_A_PERSON);
  // Opened before the transaction (the access cache and role look-ups read outside it).
  const opened = new Map<string, OpenVault>();
  for (const name of Object.keys(file.vaults)) {
    if (!(await d.store.vaults.byName(name))) continue;
    const open = await openVault(d, p, name, "manage");
    requireFileAdmin(open);
    opened.set(name, open);
  }
  const result: ApplyResult = { dry_run: opts.dryRun, changes: 0, vaults: [], webhook_secrets: [] };
  const touched = new Set<number>();
  let principals = false;
  try {
    await d.store.transaction(async (tx) => {
      const txd = domainOver(d, tx);
      for (const [name, spec] of Object.entries(file.vaults)) {
        const plan: VaultPlan = { vault: name, changes: [], pending: [] };
        const vault = await vaultFor(txd, tx, p, name, opened.get(name), plan);
        const a: Applying = {
          d: txd,
          tx,
          open: { vault, role: "admin", principal: p, asCode: true },
          vault,
          spec,
          plan,
          secrets: result.webhook_secrets,
          now: d.now(),
          change: (action, kind, n, said) => plan.changes.push({ action, kind, name: n, said }),
          pend: (kind, n, said) => plan.pending.push({ kind, name: n, said }),
        };
        for (const section of SECTIONS) await section(a);
        await applyManaged(a);
        result.vaults.push(plan);
        if (plan.changes.length) touched.add(vault.id);
        if (plan.changes.some((c) => c.kind === "agent" || c.kind === "member")) principals = true;
      }
      if (opts.dryRun) throw new RolledBack();
    });
  } catch (err) {
    if (!(err instanceof RolledBack)) throw err;
  }
  const changes = result.vaults.reduce((n, v) => n + v.changes.length, 0);
  if (!opts.dryRun) {
    for (const id of touched) d.onVaultChange?.(id);
    if (principals) {
      d.auth.forget();
      d.vaultAccess?.clear();
    }
  }
  return { ...result, changes, webhook_secrets: opts.dryRun ? [] : result.webhook_secrets };
}

/** The domain with its store bound to the transaction, so domain helpers run inside it; caches are dropped after the commit. */
function domainOver(d: Domain, tx: Repos): Domain {
  const store = { ...tx, db: d.store.db, transaction: <T>(fn: (t: Repos) => Promise<T>) => fn(tx), close() {}, [Symbol.dispose]() {} } as Store;
  return { ...d, store, onVaultChange: undefined, webhooks: undefined };
}

async function vaultFor(txd: Domain, tx: Repos, p: UserPrincipal, name: string, open: OpenVault | undefined, plan: VaultPlan): Promise<VaultRow> {
  const found = await tx.vaults.byName(name);
  if (found && open) return found;
  if (found || open) throw new Conflict(`vault ${name} was created or deleted while the file was applied; apply it again`);
  await createVault(txd, p, { name });
  plan.changes.push({ action: "add", kind: "vault", name, said: `create vault ${name} (you are its admin)` });
  return (await tx.vaults.byName(name))!;
}

async function applySettings(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (spec.unmatched_hosts !== undefined && spec.unmatched_hosts !== vault.unmatchedHosts) {
    await tx.vaults.setUnmatchedHosts(vault.id, spec.unmatched_hosts);
    a.change("change", "vault", vault.name, `unmatched hosts: ${vault.unmatchedHosts} → ${spec.unmatched_hosts}`);
  }
  if (spec.policy_mode !== undefined && spec.policy_mode !== vault.policyMode) {
    await tx.policyModes.setVaultMode(vault.id, spec.policy_mode);
    a.change("change", "vault", vault.name, `policy mode: ${vault.policyMode} → ${spec.policy_mode}`);
  }
}

async function applyCredentials(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.credentials) return;
  const current = new Map((await tx.credentials.list(vault.id)).map((c) => [c.key, c]));
  const setIt = (key: string) => `set its value with broker credential set ${key} --vault ${vault.name} (the file holds keys, never values)`;
  for (const c of spec.credentials) {
    const cur = current.get(c.key);
    current.delete(c.key);
    if (!c.reference) {
      if (!cur) a.pend("credential", c.key, `credential ${c.key} has no value here: ${setIt(c.key)}`);
      else if (cur.reference) {
        await tx.credentials.remove(vault.id, c.key);
        a.change(
          "change",
          "credential",
          c.key,
          `credential ${c.key}: the reference ${formatReference(cur.reference)} is removed (the file keeps a value here)`,
        );
        a.pend("credential", c.key, `credential ${c.key}: ${setIt(c.key)}`);
      }
      continue;
    }
    if (cur?.reference && formatReference(cur.reference) === formatReference(c.reference)) continue;
    try {
      await requireUsableConnection(a.d, vault.id, c.reference, `credential ${c.key}`);
    } catch (err) {
      if (!(err instanceof InvalidRequest)) throw err;
      a.pend("credential", c.key, `${err.message}; then apply again`);
      continue;
    }
    await tx.credentials.put({ vaultId: vault.id, key: c.key, reference: c.reference }, a.now);
    const now = `reference ${formatReference(c.reference)}`;
    if (!cur) a.change("add", "credential", c.key, `add credential ${c.key} (${now})`);
    else a.change("change", "credential", c.key, `credential ${c.key}: ${cur.reference ? formatReference(cur.reference) : "a stored value"} → ${now}`);
  }
  for (const [key, cur] of current) {
    await tx.credentials.remove(vault.id, key);
    a.change("remove", "credential", key, `remove credential ${key} (its ${cur.reference ? "reference" : "stored value"} is deleted)`);
  }
}

async function applyAgents(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.agents) return;
  // A binding's agent is the binding's (workload_bindings): never invited, granted or removed as an agent.
  const bindingAgents = new Set((await tx.workload.bindingsOfVault(vault.id)).flatMap((b) => (b.agentId === null ? [] : [b.agentId])));
  const current = new Map((await tx.access.grantsInVault(vault.id)).filter((g) => !bindingAgents.has(g.agentId)).map((g) => [g.agentName, g]));
  const bindingAgentNames = new Set((await tx.access.grantsInVault(vault.id)).filter((g) => bindingAgents.has(g.agentId)).map((g) => g.agentName));
  for (const want of spec.agents) {
    if (bindingAgentNames.has(want.name)) {
      a.pend("agent", want.name, `agent ${want.name} stands for a workload binding: its role is the binding's (workload_bindings), not listed under agents`);
      continue;
    }
    const cur = current.get(want.name);
    current.delete(want.name);
    if (cur) {
      if (cur.role === want.role) continue;
      await tx.access.setGrant(vault.id, cur.agentId, want.role, a.now);
      a.change("change", "agent", want.name, `agent ${want.name}: role ${cur.role} → ${want.role}`);
      continue;
    }
    const agent = await tx.agents.byName(want.name);
    // Only an agent the applier already answers for (it holds a role in a vault they administer; any, for the
    // owner): otherwise a stranger's vault could take in another team's agent (and block its revocation by them),
    // and the plan would tell whether an agent of that name exists.
    if (agent && (await answersFor(a, agent.id))) {
      await tx.access.setGrant(vault.id, agent.id, want.role, a.now);
      a.change("add", "agent", want.name, `give agent ${want.name} the role ${want.role}`);
    } else
      a.pend(
        "agent",
        want.name,
        `agent ${want.name} is not on this instance: an agent joins by invite, which gives it its token (broker agent invite --name ${want.name} --role ${want.role} --vault ${vault.name}; allowed in a managed vault because the file names it)`,
      );
  }
  for (const [name, cur] of current) {
    await tx.access.removeGrant(vault.id, cur.agentId);
    a.change("remove", "agent", name, `remove agent ${name}'s role ${cur.role} (the agent itself stays)`);
  }
}

/** Whether the applier is the owner, or an admin of a vault where the agent already holds a role. */
async function answersFor(a: Applying, agentId: number): Promise<boolean> {
  const p = a.open.principal as UserPrincipal;
  if (p.instanceRole === "owner") return true;
  for (const g of await a.tx.access.grantsOfAgent(agentId)) if ((await a.tx.access.memberRole(g.vaultId, p.userId)) === "admin") return true;
  return false;
}

async function applyMembers(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.members) return;
  const p = a.open.principal as UserPrincipal;
  const current = new Map((await tx.access.members(vault.id)).map((m) => [m.email, m]));
  const yourself = (role: string | undefined) => {
    if (p.instanceRole === "owner" || role === "admin") return;
    throw new InvalidRequest(`the file takes your own admin role in vault ${vault.name} away; keep ${p.email} an admin there, or have the owner apply it`);
  };
  for (const want of spec.members) {
    const cur = current.get(want.email);
    current.delete(want.email);
    if (cur) {
      if (cur.role === want.role) continue;
      if (cur.userId === p.userId) yourself(want.role);
      await tx.access.setMember(vault.id, cur.userId, want.role, a.now);
      a.change("change", "member", want.email, `member ${want.email}: role ${cur.role} → ${want.role}`);
      continue;
    }
    const user = await tx.users.byEmail(want.email);
    // Only a person the applier already works with (a member of a vault they administer; anyone, for the owner) is
    // added without an invite: otherwise a file would grant a stranger's account a role they never accepted, and the
    // plan would tell whether an account exists for an email. Every other person is invited, in the same words.
    if (user && (await knowsPerson(a, user.id))) {
      await tx.access.setMember(vault.id, user.id, want.role, a.now);
      a.change("add", "member", want.email, `add member ${want.email} (${want.role})`);
    } else
      a.pend(
        "member",
        want.email,
        `${want.email} is not a member of vault ${vault.name}: invite them (broker vault invite --email ${want.email} --role ${want.role} --vault ${vault.name}; allowed in a managed vault because the file names them; the broker sends no email)`,
      );
  }
  for (const [email, cur] of current) {
    if (cur.userId === p.userId) yourself(undefined);
    await tx.access.removeMember(vault.id, cur.userId);
    a.change("remove", "member", email, `remove member ${email} (${cur.role})`);
  }
}

/** Whether the applier is the owner, or an admin of a vault where the person is already a member. */
async function knowsPerson(a: Applying, userId: number): Promise<boolean> {
  const p = a.open.principal as UserPrincipal;
  if (p.instanceRole === "owner") return true;
  for (const m of await a.tx.access.vaultsOfUser(userId)) if ((await a.tx.access.memberRole(m.vaultId, p.userId)) === "admin") return true;
  return false;
}

/** Managed or not, last: what the file declares for the writes a managed vault still takes from people. */
async function applyManaged(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  const state = await tx.vaultCode.state(vault.id);
  const managed = spec.managed ?? state.managed;
  const declared: DeclaredAccess | null = managed
    ? {
        values: (spec.credentials ?? []).filter((c) => !c.reference).map((c) => c.key),
        agents: Object.fromEntries((spec.agents ?? []).map((x) => [x.name, x.role])),
        members: Object.fromEntries((spec.members ?? []).map((x) => [x.email, x.role])),
      }
    : null;
  if (managed !== state.managed)
    a.change(
      "change",
      "vault",
      vault.name,
      managed ? `manage vault ${vault.name} as code: from now on it changes only through broker apply` : `stop managing vault ${vault.name} as code`,
    );
  if (managed !== state.managed || JSON.stringify(declared) !== JSON.stringify(state.declared)) await tx.vaultCode.set(vault.id, { managed, declared });
}

// Bindings before budgets: a budget may name a binding's agent, which the binding makes.
const SECTIONS: readonly Section[] = [applySettings, applyServices, applyCredentials, applyAgents, applyMembers, applyBindings, applyWebhooks, applyBudgets];
