// Credential operations with their permission rules (identity/principal.ts): key names are visible to
// every role; setting, deleting and revealing values is for human user sessions of admins and
// members only. Agents and scoped sessions never, whatever their role: each operation checks itself.

import { NotFound } from "../errors.ts";
import type { Secret } from "../secret.ts";
import type { Domain } from "../identity/index.ts";
import { decryptCredential, encryptCredential } from "../crypto/index.ts";
import { iso } from "../identity/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";

/** `key` and `value` arrive read by the contract (a key name; a value of at most 64 KiB, in its Secret). */
export async function setCredential(d: Domain, open: OpenVault, key: string, value: Secret) {
  requireInVault(open, "write_secrets");
  const sealed = await encryptCredential(d.dataKey, open.vault.id, key, value);
  const now = d.now();
  await d.store.credentials.put({ vaultId: open.vault.id, key, ...sealed }, now);
  d.onVaultChange?.(open.vault.id);
  return { key, updated_at: iso(now) };
}

/**
 * The broker itself replaces a credential's value: a refresh token the OAuth provider rotated (the old
 * one stops working). No principal: the service a human configured asked for it. Caches are dropped
 * as after any write, so the next plan reads the new value.
 */
export async function replaceRotatedCredential(d: Domain, vaultId: number, key: string, value: Secret): Promise<void> {
  const sealed = await encryptCredential(d.dataKey, vaultId, key, value);
  await d.store.credentials.put({ vaultId, key, ...sealed }, d.now());
  d.onVaultChange?.(vaultId);
}

export async function listCredentials(d: Domain, open: OpenVault, reveal: boolean): Promise<{ key: string; value?: Secret; updated_at: string }[]> {
  if (reveal) requireInVault(open, "reveal");
  const rows = await d.store.credentials.list(open.vault.id);
  if (!reveal) return rows.map((r) => ({ key: r.key, updated_at: iso(r.updatedAt) }));
  const out = [];
  for (const r of rows) out.push({ key: r.key, value: await decryptCredential(d.dataKey, r), updated_at: iso(r.updatedAt) });
  return out;
}

export async function revealCredential(d: Domain, open: OpenVault, key: string) {
  requireInVault(open, "reveal");
  const row = await d.store.credentials.get(open.vault.id, key);
  if (!row) throw new NotFound(`no credential ${key} in this vault`);
  return { key, value: await decryptCredential(d.dataKey, row), updated_at: iso(row.updatedAt) };
}

export async function deleteCredential(d: Domain, open: OpenVault, key: string): Promise<void> {
  requireInVault(open, "write_secrets");
  if (!(await d.store.credentials.remove(open.vault.id, key))) throw new NotFound(`no credential ${key} in this vault`);
  d.onVaultChange?.(open.vault.id);
}
