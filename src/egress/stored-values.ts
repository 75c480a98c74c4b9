// Reads every vault's services (enabled or not, any auth type that sends a stored value) and
// decrypts what each sends: the store half of the echo needles every answer is scanned for
// (echo-needles.ts). A vault whose values are still known is not read again, so a write to one
// vault costs one vault's decryption, not every vault's.

import type { Secret } from "../secret.ts";
import type { ServiceRow, Store } from "../store/index.ts";
import { DecryptError, decryptCredential } from "../crypto/index.ts";
import { isMintedAuthType, mintedAuthKeyFields } from "../policy/index.ts";
import { viewService } from "../workflows/index.ts";
import { isMultiLine, staticSend } from "./service-values.ts";

/** SECRET: per vault id, the values its services send (search patterns only). */
export type VaultValues = ReadonlyMap<number, readonly string[]>;

export async function loadStoredValues(store: Store, dataKey: CryptoKey, known: VaultValues): Promise<Map<number, readonly string[]>> {
  const byVault = new Map<number, ServiceRow[]>();
  for (const row of await store.services.all()) {
    const rows = byVault.get(row.vaultId);
    if (rows) rows.push(row);
    else byVault.set(row.vaultId, [row]);
  }
  const out = new Map<number, readonly string[]>();
  await Promise.all(
    [...byVault].map(async ([vaultId, rows]) => {
      const values = known.get(vaultId) ?? (await Promise.all(rows.map((r) => rowValues(store, dataKey, r)))).flat();
      out.set(vaultId, values);
    }),
  );
  return out;
}

/** What one service sends: nothing for passthrough, a minted type's inputs, a static value in its sent forms. */
async function rowValues(store: Store, dataKey: CryptoKey, row: ServiceRow): Promise<string[]> {
  const secret = (key: string) => credential(store, dataKey, row.vaultId, key);
  if (isMintedAuthType(row.authType)) {
    let keys: [string, string][];
    try {
      keys = mintedAuthKeyFields(row.authType, viewService(row).auth);
    } catch {
      return []; // unreadable settings: the plan fails closed and nothing is sent
    }
    const inputs = await Promise.all(keys.map(([, key]) => secret(key)));
    return inputs.flatMap((s) => (s ? [s.reveal()] : [])); // reveal: search patterns only
  }
  if (row.authType === "passthrough" || !row.authKey) return [];
  const value = await secret(row.authKey);
  // A value the plan refuses to send (multi-line) never leaves; a row the plan cannot place still has its raw value looked for.
  if (!value || isMultiLine(value)) return [];
  try {
    return [...staticSend(row, value).values];
  } catch {
    return [value.reveal()]; // reveal: search pattern only
  }
}

/** A missing or undecryptable credential sends nothing; a store that cannot answer fails the load. */
async function credential(store: Store, dataKey: CryptoKey, vaultId: number, key: string): Promise<Secret | undefined> {
  const row = await store.credentials.get(vaultId, key);
  if (!row) return undefined;
  try {
    return await decryptCredential(dataKey, row);
  } catch (err) {
    if (err instanceof DecryptError) return undefined;
    throw err;
  }
}
