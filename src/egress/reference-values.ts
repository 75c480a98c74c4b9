// What the egress side asks of credentials by reference (issue 36): the value of a vault's reference, held
// in memory and read again in the background by the secret stores' runtime (app/secret-store-registry.ts),
// so a plan built on a reference costs a request what one built on a stored value does.

import type { Secret } from "../secret.ts";
import type { CredentialReference } from "../store/index.ts";

export interface ReferenceValues {
  /**
   * SECRET: the value; waits only for a reference never read. Rejects with 502 `credential_unavailable`
   * when the vault may not use the connection, the store refused, or the grace ran out.
   */
  resolve(vaultId: number, reference: CredentialReference): Promise<Secret>;
  /** SECRET: the value held now, without reading (the echo needles' store half); a read starts when none is. */
  held(vaultId: number, reference: CredentialReference): Secret | undefined;
  /** An upstream answered 401 or 403 to a request that sent these: each is read again once, in the background. */
  refused(vaultId: number, references: readonly CredentialReference[]): void;
}
