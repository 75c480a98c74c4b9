// What the egress core needs of token minting (minting/ implements it; the composition hands it in):
// a grant per request to a minted-token service, and one fresh grant after an upstream 401. Declared
// here so the core depends on no minting code, and minting depends on the core one way.

import type { LiveSecrets } from "../log.ts";
import type { Secret } from "../secret.ts";
import type { Injection } from "./headers.ts";
import type { EgressPlan } from "./plan.ts";
import type { Needles } from "./redact.ts";

export interface MintedToken {
  /** SECRET: the access or installation token. */
  readonly value: Secret;
  /** When it was obtained and when it stops working (ms since the epoch). */
  readonly issuedAt: number;
  readonly expiresAt: number;
  /** SECRET: a refresh token the provider rotated to, to be stored in place of the old one. */
  readonly rotatedRefreshToken?: Secret;
  /**
   * SECRET: what the token request carried that its endpoint could keep and replay, in the forms it
   * went out in (the app JWT; the refresh token; the client authentication as encoded): search
   * patterns for echo redaction, like the values a service sends (plan.ts responseNeedles).
   */
  readonly sent: readonly Secret[];
}

/** What one request uses: the header to inject and the echo needles with the token among them. */
export interface Grant {
  readonly injection: Injection;
  /** SECRET: the service's input values and the token, for response redaction. */
  readonly needles: Needles;
  /** Identity of the token, to refresh exactly it after an upstream 401. */
  readonly token: MintedToken;
  /**
   * SECRET: what was sent to obtain it that an endpoint could keep (the app JWT, the refresh token,
   * the client authentication as encoded) and the rotated refresh token to be sent next: search
   * patterns only, noted with the token as values sent (plan.ts responseNeedles).
   */
  readonly sent: readonly Secret[];
}

export interface Minter {
  /** The credential for a request to a minted-token service (oauth2_*, github_app). */
  grant(vault: { id: number }, plan: EgressPlan): Promise<Grant>;
  /**
   * After the upstream answered 401 to `stale`: a fresh token (one refresh, shared with concurrent
   * callers), or undefined when this service has been refreshed for 401s too often lately (see
   * REGRANT_BURST): the 401 stands and the current token is kept.
   */
  regrant(vault: { id: number }, plan: EgressPlan, stale: Grant): Promise<Grant> | undefined;
  /** Minted tokens in memory, for the logger's last-line scrub. */
  readonly secrets: LiveSecrets;
  /** What a person should know of a service's minted credential (the console's services list); never a value. */
  state(vaultId: number, host: string): MintedState | undefined;
}

export type MintedState = { readonly kind: "refused"; readonly reason: string } | { readonly kind: "ready"; readonly expiresAt: number };
