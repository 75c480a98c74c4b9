// An agent's proposal as the domain takes it (the contract's ProposalInput reads the body: hosts
// without IP literals, https `obtain` links, text limits, no credential values), and the one check
// that needs the vault: every key a proposed service names resolves.

import { InvalidRequest } from "../errors.ts";
import type { Rules } from "../policy/index.ts";
import { authKeyFields, type ServiceAuth } from "./services.ts";
import type { ProposedAuth, ProposedRule, ProposedService, ProposedSlot } from "../store/index.ts";

// The shapes a proposal is stored in are the store's (it checks them when it reads a row).
export type { ProposedService, ProposedSlot } from "../store/index.ts";

/**
 * The store keeps its own copy of a service's auth and rules (it imports no module above it); these
 * fail to compile when ServiceAuth or Rules gain, lose or change a field the store's copy does not.
 */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type SameShape<A, B> = [Same<A, B>, Same<keyof A, keyof B>] extends [true, true] ? true : never;
const _storedShapesMatch: [SameShape<ServiceAuth, ProposedAuth>, SameShape<Rules[number], ProposedRule>] = [true, true];

export interface ProposalInput {
  services: ProposedService[];
  credentials: ProposedSlot[];
  message: string;
  user_message: string;
}

/** Contract rule 1: each key a service names resolves to a slot here or an existing credential. */
export function assertKeysResolve(p: ProposalInput, existing: readonly string[]): void {
  const available = new Set([...p.credentials.map((c) => c.key), ...existing]);
  p.services.forEach((s, i) => {
    // Static types name one key (auth.token); the minted ones several (client_id, refresh_token, private_key…).
    for (const [field, key] of authKeyFields(s.auth)) {
      if (available.has(key)) continue;
      throw new InvalidRequest(
        `services[${i}].auth.${field} names ${key}, which is neither a credential slot in this proposal nor an existing credential`,
        `services[${i}].auth.${field}`,
      );
    }
  });
}
