// Credential operations with their permission rules (vault/principal.ts): key names are visible to
// every role; setting, deleting and revealing values is for human user sessions of admins and
// members only. Agents and scoped sessions never, whatever their role: each operation checks itself.

import { InvalidRequest, NotFound } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { Domain } from "./context.ts";
import { decryptCredential, encryptCredential } from "./credentials.ts";
import { LIMITS } from "./limits.ts";
import { readKey } from "./services.ts";
import { iso } from "./users.ts";
import { requireInVault, type OpenVault } from "./vaults.ts";

/** A credential value as every path must check it (API, CLI, console, approval page); `field` names it in errors. */
export function readValue(v: unknown, field = "value"): Secret {
  if (typeof v !== "string" || v.length === 0) throw new InvalidRequest(`${field} must be a non-empty string`, field);
  if (Buffer.byteLength(v) > LIMITS.credentialValueMaxBytes) throw new InvalidRequest(`${field} must be at most ${LIMITS.credentialValueMaxBytes} bytes`, field);
  if (/[\r\n\0]/.test(v)) throw new InvalidRequest(`${field} must not contain line breaks or NUL (it is sent in an HTTP header)`, field);
  return new Secret(v);
}

export async function setCredential(d: Domain, open: OpenVault, rawKey: string, input: unknown) {
  requireInVault(open, "write_secrets");
  const key = readKey(rawKey, "key");
  const value = readValue((input as { value?: unknown } | null)?.value);
  const sealed = await encryptCredential(d.dataKey, open.vault.id, key, value);
  const now = d.now();
  await d.store.credentials.put({ vaultId: open.vault.id, key, ...sealed }, now);
  d.onVaultChange?.(open.vault.id);
  return { key, updated_at: iso(now) };
}

export async function listCredentials(d: Domain, open: OpenVault, reveal: boolean): Promise<{ key: string; value?: Secret; updated_at: string }[]> {
  if (reveal) requireInVault(open, "reveal");
  const rows = await d.store.credentials.list(open.vault.id);
  if (!reveal) return rows.map((r) => ({ key: r.key, updated_at: iso(r.updatedAt) }));
  const out = [];
  for (const r of rows) out.push({ key: r.key, value: await decryptCredential(d.dataKey, r), updated_at: iso(r.updatedAt) });
  return out;
}

export async function revealCredential(d: Domain, open: OpenVault, rawKey: string) {
  requireInVault(open, "reveal");
  const key = readKey(rawKey, "key");
  const row = await d.store.credentials.get(open.vault.id, key);
  if (!row) throw new NotFound(`no credential ${key} in this vault`);
  return { key, value: await decryptCredential(d.dataKey, row), updated_at: iso(row.updatedAt) };
}

export async function deleteCredential(d: Domain, open: OpenVault, rawKey: string): Promise<void> {
  requireInVault(open, "write_secrets");
  const key = readKey(rawKey, "key");
  if (!(await d.store.credentials.remove(open.vault.id, key))) throw new NotFound(`no credential ${key} in this vault`);
  d.onVaultChange?.(open.vault.id);
}
