// Reads what each vault's services send (enabled or not, any auth type that sends a stored value):
// the store half of the echo needles every answer is scanned for (echo-needles.ts). A vault is read
// a page at a time, each page one statement joining the services with the credentials they name, so
// no read holds the event loop for a whole vault. Decrypted values are kept per credential and its
// ciphertext: a vault read again after an edit decrypts only what the edit changed.

import type { Secret } from "../secret.ts";
import type { CredentialReference, ServiceWithCredential, Store } from "../store/index.ts";
import type { ReferenceValues } from "./reference-values.ts";
import { DecryptError, decryptCredential } from "../crypto/index.ts";
import { isMintedAuthType, mintedAuthKeyFields, parseMintedAuthConfig } from "../policy/index.ts";
import { isMultiLine, staticSend } from "./service-values.ts";

/** Services read per statement: a page costs a few milliseconds at most, whatever the vault's size. */
export const PAGE_ROWS = 256;
/**
 * The first page of a vault's read is smaller: answers after a write wait for it (echo-store-half.ts), so it
 * costs them a fraction of a millisecond; a small vault is still read whole in it.
 */
export const FIRST_PAGE_ROWS = 32;

/** How many pages a read of a vault of `services` services takes. */
export function pagesToRead(services: number): number {
  return services < FIRST_PAGE_ROWS ? 1 : 1 + Math.ceil((services - FIRST_PAGE_ROWS + 1) / PAGE_ROWS);
}

export interface StoredPage {
  /** SECRET: search patterns only. */
  readonly values: readonly string[];
  /** Where the next page starts (the last host read); absent after the last page. */
  readonly next?: string;
}

export interface StoredValues {
  /** The vaults that have a service. */
  vaults(): Promise<number[]>;
  /** SECRET: what the services of `vaultId` after host `after` ("" first) send, a page of them. */
  page(vaultId: number, after: string): Promise<StoredPage>;
}

type Sealed = { readonly nonce: Uint8Array; readonly ciphertext: Uint8Array };
/** SECRET: a credential's value as last decrypted, with the ciphertext it came from. */
type Opened = Sealed & { readonly value: Secret | undefined };

export function createStoredValues(store: Store, dataKey: CryptoKey, references?: ReferenceValues): StoredValues {
  // Per vault and key; a vault's map is replaced by what its latest full read used, so a deleted
  // credential (or vault) is not kept beyond the next read.
  const opened = new Map<number, Map<string, Opened>>();
  const reading = new Map<number, Map<string, Opened>>();

  /** A missing or undecryptable credential sends nothing; the same ciphertext is not decrypted twice. */
  async function open(vaultId: number, key: string, sealed: Sealed | undefined): Promise<Secret | undefined> {
    if (!sealed) return undefined;
    const used = reading.get(vaultId);
    const known = used?.get(key) ?? opened.get(vaultId)?.get(key);
    if (known && sameBytes(known.nonce, sealed.nonce) && sameBytes(known.ciphertext, sealed.ciphertext)) {
      used?.set(key, known);
      return known.value;
    }
    let value: Secret | undefined;
    try {
      value = await decryptCredential(dataKey, { vaultId, key, ...sealed });
    } catch (err) {
      if (!(err instanceof DecryptError)) throw err;
    }
    used?.set(key, { ...sealed, value });
    return value;
  }

  /** A reference's value as held now (a read starts when none is: its value joins the needles through the recent half). */
  function referenced(vaultId: number, text: string | null | undefined, parsed?: CredentialReference | null): Secret | undefined {
    let reference = parsed ?? undefined;
    if (!reference && text) {
      try {
        reference = JSON.parse(text) as CredentialReference;
      } catch {
        return undefined;
      }
    }
    return reference && references?.held(vaultId, reference);
  }

  async function rowValues(row: ServiceWithCredential): Promise<string[]> {
    const joined = row.credentialNonce && row.credentialCiphertext ? { nonce: row.credentialNonce, ciphertext: row.credentialCiphertext } : undefined;
    const secret = async (key: string) => {
      if (key === row.authKey) return row.credentialReference ? referenced(row.vaultId, row.credentialReference) : open(row.vaultId, key, joined);
      const other = await store.credentials.get(row.vaultId, key);
      return other?.reference ? referenced(row.vaultId, null, other.reference) : open(row.vaultId, key, other);
    };
    if (isMintedAuthType(row.authType)) {
      // Settings that do not parse name no key: the plan fails closed and nothing is sent.
      const keys = mintedAuthKeyFields(row.authType, parseMintedAuthConfig(row.authConfig));
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

  return {
    vaults: () => store.services.vaultIds(),
    async page(vaultId, after) {
      if (after === "") reading.set(vaultId, new Map());
      const size = after === "" ? FIRST_PAGE_ROWS : PAGE_ROWS;
      const rows = await store.services.pageWithCredentials(vaultId, after, size);
      const values: string[] = [];
      for (const row of rows) values.push(...(await rowValues(row)));
      if (rows.length === size) return { values, next: rows[rows.length - 1]!.host };
      const used = reading.get(vaultId);
      reading.delete(vaultId);
      if (used?.size) opened.set(vaultId, used);
      else opened.delete(vaultId);
      return { values };
    },
  };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
