// Credential operations with their permission rules (identity/principal.ts): key names are visible to
// every role; setting, deleting and revealing values is for human user sessions of admins and
// members only. Agents and scoped sessions never, whatever their role: each operation checks itself.
// A credential holds a value or a reference into a secret store the vault may use (issue 36); a
// reference's value stays in its store: it is never revealed here.

import { Conflict, NotFound } from "../errors.ts";
import type { Secret } from "../secret.ts";
import type { CredentialRow } from "../store/index.ts";
import { formatReference, type CredentialSource, type SecretReference } from "../policy/index.ts";
import type { Domain } from "../identity/index.ts";
import { decryptCredential, encryptCredential } from "../crypto/index.ts";
import { iso } from "../identity/index.ts";
import { requireInVault, requireUnmanaged, type OpenVault } from "../identity/index.ts";
import { requireUsableConnection, viewReference, type ReferenceView } from "./secret-stores.ts";

const MANAGED_VALUES = " (a value for a key its file lists can still be set)";

/** A first read of a reference just set is waited for at most this long: the answer then says how it went. */
const FIRST_READ_WAIT_MS = 5_000;

/** What a credential row is stored as: a sealed value, or a reference the vault may use. */
export async function storedForm(d: Domain, vaultId: number, key: string, source: CredentialSource, field = "ref") {
  if ("reference" in source) {
    await requireUsableConnection(d, vaultId, source.reference, field);
    return { vaultId, key, reference: source.reference };
  }
  return { vaultId, key, ...(await encryptCredential(d.dataKey, vaultId, key, source.value)) };
}

/** `key` and the source arrive read by the contract (a key name; a value of at most 64 KiB in its Secret, or a parsed reference). */
export async function setCredential(d: Domain, open: OpenVault, key: string, source: CredentialSource) {
  requireInVault(open, "write_secrets");
  // A vault kept as code: its file lists keys, never values, so a value for a key it lists is set here still.
  await requireUnmanaged(d, open, "value" in source ? { value: key } : undefined, MANAGED_VALUES);
  const row = await storedForm(d, open.vault.id, key, source);
  const now = d.now();
  await d.store.credentials.put(row, now);
  d.onVaultChange?.(open.vault.id);
  if (!("reference" in source)) return { key, updated_at: iso(now) };
  return { key, updated_at: iso(now), reference: await firstRead(d, open.vault.id, source.reference) };
}

/** Reads a reference once (bounded) so the person who set it learns at once whether it resolves. */
async function firstRead(d: Domain, vaultId: number, reference: SecretReference): Promise<ReferenceView> {
  const runtime = d.secretStores;
  if (runtime) {
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([runtime.readNow(vaultId, reference), new Promise((r) => (timer = setTimeout(r, FIRST_READ_WAIT_MS)))]);
    clearTimeout(timer);
  }
  return viewReference(reference, runtime?.status(vaultId, reference));
}

/**
 * The broker itself replaces a credential's value: a refresh token the OAuth provider rotated (the old
 * one stops working). No principal: the service a human configured asked for it. Caches are dropped
 * as after any write, so the next plan reads the new value.
 */
export async function replaceRotatedCredential(d: Domain, vaultId: number, key: string, value: Secret): Promise<void> {
  // A reference's value lives in its store, which the broker only reads: it is never replaced by a copy here.
  const current = await d.store.credentials.get(vaultId, key);
  if (current?.reference)
    throw new Conflict(
      `${key} is a reference (${formatReference(current.reference)}); the broker keeps the rotated refresh token in memory but cannot write it to the store: rotate it there`,
    );
  const sealed = await encryptCredential(d.dataKey, vaultId, key, value);
  await d.store.credentials.put({ vaultId, key, ...sealed }, d.now());
  d.onVaultChange?.(vaultId);
}

export interface CredentialView {
  key: string;
  value?: Secret;
  reference?: ReferenceView;
  updated_at: string;
}

function viewCredential(d: Domain, r: CredentialRow): CredentialView {
  return {
    key: r.key,
    ...(r.reference && { reference: viewReference(r.reference, d.secretStores?.status(r.vaultId, r.reference)) }),
    updated_at: iso(r.updatedAt),
  };
}

export async function listCredentials(d: Domain, open: OpenVault, reveal: boolean): Promise<CredentialView[]> {
  if (reveal) requireInVault(open, "reveal");
  const rows = await d.store.credentials.list(open.vault.id);
  const out: CredentialView[] = [];
  for (const r of rows) out.push(reveal && !r.reference ? { ...viewCredential(d, r), value: await decryptCredential(d.dataKey, r) } : viewCredential(d, r));
  return out;
}

export async function revealCredential(d: Domain, open: OpenVault, key: string): Promise<CredentialView> {
  requireInVault(open, "reveal");
  const row = await d.store.credentials.get(open.vault.id, key);
  if (!row) throw new NotFound(`no credential ${key} in this vault`);
  if (row.reference) return viewCredential(d, row);
  return { ...viewCredential(d, row), value: await decryptCredential(d.dataKey, row) };
}

export async function deleteCredential(d: Domain, open: OpenVault, key: string): Promise<void> {
  requireInVault(open, "write_secrets");
  await requireUnmanaged(d, open, undefined, MANAGED_VALUES);
  if (!(await d.store.credentials.remove(open.vault.id, key))) throw new NotFound(`no credential ${key} in this vault`);
  d.onVaultChange?.(open.vault.id);
}
