// Credential operations with their permission rules (identity/principal.ts): key names are visible to
// every role; setting, deleting and revealing values is for human user sessions of admins and
// members only. Agents and scoped sessions never, whatever their role: each operation checks itself.

import { InvalidRequest, NotFound } from "../errors.ts";
import { Secret } from "../secret.ts";
import type { Domain } from "../identity/index.ts";
import { decryptCredential, encryptCredential } from "../crypto/index.ts";
import { LIMITS } from "../policy/index.ts";
import { readKey } from "./services.ts";
import { iso } from "../identity/index.ts";
import { requireInVault, type OpenVault } from "../identity/index.ts";

/** A credential value as every path must check it (API, CLI, console, approval page); `field` names it in errors. */
export function readValue(v: unknown, field = "value"): Secret {
  if (typeof v !== "string" || v.length === 0) throw new InvalidRequest(`${field} must be a non-empty string`, field);
  if (Buffer.byteLength(v) > LIMITS.credentialValueMaxBytes)
    throw new InvalidRequest(`${field} must be at most ${LIMITS.credentialValueMaxBytes} bytes`, field);
  if (/[\r\n\0]/.test(v) && !PEM_BLOCK.test(v))
    throw new InvalidRequest(`${field} must not contain line breaks or NUL (it is sent in an HTTP header); only a PEM key may span lines`, field);
  return new Secret(v);
}

/**
 * One PEM block (a GitHub App's private key): the only multi-line value. It is only ever read as a
 * key (minting/minted-tokens.ts); the header and URL injections refuse a value with line breaks.
 */
const PEM_BLOCK = /^-----BEGIN [A-Z0-9 ]{1,40}-----\r?\n(?:[A-Za-z0-9+/=]{1,128}\r?\n){1,200}-----END [A-Z0-9 ]{1,40}-----\r?\n?$/;

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
