// `broker apply`'s workload bindings (issue 39 point 4): the bindings to a vault that its file lists, compared with the
// store by issuer and name and made to match. A binding is instance configuration the owner alone changes (it admits
// a platform's tokens), so a file whose bindings differ from the instance's is refused for anyone else, while a file
// that matches them applies for any admin of the vault. An issuer the instance does not trust is left for the owner.

import { PermissionDenied } from "../errors.ts";
import { createBinding, createBindingAgent, workloadAgentName, type UserPrincipal } from "../identity/index.ts";
import type { WorkloadBindingRow } from "../store/index.ts";
import type { FileBinding } from "./vault-file.ts";
import type { Applying } from "./vault-plan.ts";

/** Conditions compared whatever order their claims were written in. */
function sameConditions(a: WorkloadBindingRow["conditions"], b: FileBinding["conditions"]): boolean {
  const canonical = (c: Record<string, unknown>) =>
    JSON.stringify(
      Object.keys(c)
        .sort()
        .map((k) => [k, c[k]]),
    );
  return canonical(a) === canonical(b);
}

function describe(b: FileBinding): string {
  const conditions = Object.entries(b.conditions)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : v.join("|")}`)
    .join(", ");
  return `${conditions} → ${b.role}, sessions up to ${b.max_session_seconds}s`;
}

export async function applyBindings(a: Applying): Promise<void> {
  const { spec, vault, tx } = a;
  if (!spec.workload_bindings) return;
  const p = a.open.principal as UserPrincipal;
  const owner = () => {
    if (p.instanceRole === "owner") return;
    throw new PermissionDenied(
      `the file changes vault ${vault.name}'s workload bindings, which only the instance owner changes: have the owner apply it, or make workload_bindings match the instance's (broker export)`,
    );
  };
  const current = new Map((await tx.workload.bindingsOfVault(vault.id)).map((b) => [`${b.issuerName}/${b.name}`, b]));
  for (const want of spec.workload_bindings) {
    const label = `${want.issuer}/${want.name}`;
    const cur = current.get(label);
    current.delete(label);
    if (cur) {
      const same = sameConditions(cur.conditions, want.conditions) && cur.role === want.role && cur.maxSessionSeconds === want.max_session_seconds;
      if (same && cur.agentId !== null) continue;
      owner();
      let agentId = cur.agentId;
      const issuer = (await tx.workload.issuerByName(want.issuer))!;
      if (agentId === null) agentId = (await createBindingAgent(tx, issuer, want.name, vault.id, want.role, p.userId, a.now)).id;
      else if (cur.role !== want.role) await tx.access.setGrant(vault.id, agentId, want.role, a.now);
      await tx.workload.updateBinding(cur.id, { conditions: want.conditions, role: want.role, maxSessionSeconds: want.max_session_seconds, agentId });
      a.change("change", "binding", label, `workload binding ${label}: ${same ? "its revoked agent made again" : describe(want)}`);
      continue;
    }
    const issuer = await tx.workload.issuerByName(want.issuer);
    if (!issuer) {
      a.pend(
        "binding",
        label,
        `workload issuer ${want.issuer} is not trusted on this instance: the owner adds it (broker workload-issuer add ${want.issuer} --issuer https://… --audience …), then apply again`,
      );
      continue;
    }
    if ((await tx.workload.bindings(issuer.id)).some((b) => b.name === want.name)) {
      a.pend("binding", label, `issuer ${want.issuer}'s binding ${want.name} admits tokens to another vault: rename one of them`);
      continue;
    }
    owner();
    await createBinding(tx, issuer, vault.id, want, p.userId, a.now);
    a.change(
      "add",
      "binding",
      label,
      `add workload binding ${label}: ${describe(want)} (its workloads act as agent ${workloadAgentName(want.issuer, want.name)})`,
    );
  }
  for (const [label, cur] of current) {
    owner();
    await tx.workload.removeBinding(cur.issuerId, cur.name);
    if (cur.agentId !== null) await tx.agents.remove(cur.agentId);
    a.change("remove", "binding", label, `remove workload binding ${label} (its agent and every session exchanged under it end)`);
  }
}
