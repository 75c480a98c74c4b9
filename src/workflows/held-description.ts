// What a person reads of a held request beyond its method and host (the query, the header values,
// the body's start) is sealed with the data key before it is stored, as the audit log keeps none of
// it in the clear: a copy of the database shows a refund's path, not the customer in its body. The
// additional data binds each sealed description to its vault and approval, so one moved to another
// row does not open.

import type { RequestApprovalRow } from "../store/index.ts";
import { encodeAad, open, seal } from "../crypto/index.ts";
import type { Domain } from "../identity/index.ts";

export interface HeldDescription {
  /** Path and query as forwarded (redacted). */
  readonly target: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly bodyPreview: string | null;
}

const aad = (vaultId: number, publicId: string) => encodeAad("broker", "held-request", 1, vaultId, publicId);

/** The columns a new row stores: the path alone in the clear (for webhooks), the rest sealed. */
export async function sealDescription(d: Domain, vaultId: number, publicId: string, description: HeldDescription) {
  const sealed = await seal(d.dataKey, new TextEncoder().encode(JSON.stringify(description)), aad(vaultId, publicId));
  const q = description.target.indexOf("?");
  return {
    target: q < 0 ? description.target : description.target.slice(0, q),
    headers: [],
    bodyPreview: null,
    sealedNonce: sealed.nonce,
    sealedDescription: sealed.ciphertext,
  };
}

/** A row's description: opened when sealed, else (rows from before sealing) as stored. */
export async function openDescription(d: Domain, row: RequestApprovalRow): Promise<HeldDescription> {
  if (row.sealedNonce === null || row.sealedDescription === null) {
    return { target: row.target, headers: row.headers, bodyPreview: row.bodyPreview };
  }
  const plain = await open(d.dataKey, { nonce: row.sealedNonce, ciphertext: row.sealedDescription }, aad(row.vaultId, row.publicId));
  return JSON.parse(new TextDecoder().decode(plain)) as HeldDescription;
}
