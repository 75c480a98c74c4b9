// Minted access tokens for the OAuth 2.0 and GitHub App services: one slot per (vault, service)
// keeps the current token in memory only (never on disk), refreshes it shortly before it expires with
// one request at a time (concurrent requests wait for that one), refreshes early when the upstream
// answers 401, stores a refresh token the provider rotated, and remembers a refusal so a dead
// credential is not hammered: until a human changes one of the service's credentials, requests get
// 502 credential_refresh_failed at once.

import { CredentialRefreshFailed } from "../errors.ts";
import type { LiveSecrets, Logger } from "../log.ts";
import { Secret } from "../secret.ts";
import type { Injection } from "./headers.ts";
import { requestInstallationToken, requestOAuthToken, type MintedToken } from "./minted-tokens.ts";
import type { EgressPlan, MintedPlan } from "./plan.ts";
import { Needles } from "./redact.ts";
import type { TokenEndpointDeps } from "./token-endpoint.ts";

/** What one request uses: the header to inject and the echo needles with the token among them. */
export interface Grant {
  readonly injection: Injection;
  /** SECRET: the service's input values and the token, for response redaction. */
  readonly needles: Needles;
  /** Identity of the token, to refresh exactly it after an upstream 401. */
  readonly token: MintedToken;
}

export interface Minter {
  /** The credential for a request to a minted-token service (oauth2_*, github_app). */
  grant(vault: { id: number }, plan: EgressPlan): Promise<Grant>;
  /** After the upstream answered 401 to `stale`: a fresh token (one refresh, shared with concurrent callers). */
  regrant(vault: { id: number }, plan: EgressPlan, stale: Grant): Promise<Grant>;
  /** Minted tokens in memory, for the logger's last-line scrub. */
  readonly secrets: LiveSecrets;
  /** What a person should know of a service's minted credential (the console's services list); never a value. */
  state(vaultId: number, host: string): MintedState | undefined;
}

export type MintedState = { readonly kind: "refused"; readonly reason: string } | { readonly kind: "ready"; readonly expiresAt: number };

export interface MinterDeps extends TokenEndpointDeps {
  readonly now: () => number;
  readonly log: Logger;
  /** Replaces a credential's value in the vault (a refresh token the provider rotated). */
  readonly saveRotated: (vaultId: number, key: string, value: Secret) => Promise<void>;
}

interface Slot {
  readonly fingerprint: string;
  current?: Grant;
  pending?: Promise<Grant>;
  /** A refusal, and the refresh token it happened with: a new one from a human is worth a try. */
  refused?: { error: CredentialRefreshFailed; refreshToken: string | undefined };
  /** The refresh token this slot rotated to, while the vault (and so the plan) may still hold the old one. */
  rotated?: { from: string; to: Secret };
}

/** Refresh this long before expiry: a minute, or a quarter of a short lifetime. */
function refreshMargin(lifetimeMs: number): number {
  return Math.min(60_000, lifetimeMs / 4);
}

export function createMinter(deps: MinterDeps): Minter {
  const slots = new Map<string, Slot>();

  function slotFor(vaultId: number, plan: EgressPlan, m: MintedPlan): Slot {
    const key = `${vaultId}|${plan.service.host}`;
    let slot = slots.get(key);
    if (!slot || slot.fingerprint !== m.fingerprint) slots.set(key, (slot = { fingerprint: m.fingerprint }));
    return slot;
  }

  /** The refresh token to use: the plan's, unless this slot rotated away from exactly that value. */
  function refreshTokenOf(slot: Slot, m: MintedPlan): Secret | undefined {
    const stored = m.inputs.get("refresh_token");
    if (!stored) return undefined;
    // reveal: compared with the value this slot rotated away from, nothing else
    return slot.rotated && slot.rotated.from === stored.reveal() ? slot.rotated.to : stored;
  }

  async function mint(vaultId: number, plan: EgressPlan, m: MintedPlan, slot: Slot): Promise<Grant> {
    const host = plan.service.host;
    const now = deps.now();
    const refreshToken = refreshTokenOf(slot, m);
    let token: MintedToken;
    try {
      token =
        m.type === "github_app"
          ? await requestInstallationToken(deps, host, m.fields, m.inputs.get("private_key")!, now)
          : await requestOAuthToken(deps, host, m.fields, { clientId: m.inputs.get("client_id")!, clientSecret: m.inputs.get("client_secret")!, refreshToken }, now);
    } catch (err) {
      if (err instanceof CredentialRefreshFailed && err.refused) {
        slot.refused = { error: err, refreshToken: refreshToken?.reveal() }; // reveal: kept to notice a human's new value
        slot.current = undefined;
      }
      deps.log.warn("credential_refresh_failed", { host, type: m.type, reason: err instanceof Error ? err.message : "error" });
      throw err;
    }
    if (token.rotatedRefreshToken && refreshToken && token.rotatedRefreshToken.reveal() !== refreshToken.reveal()) {
      const stored = m.inputs.get("refresh_token")!;
      slot.rotated = { from: stored.reveal(), to: token.rotatedRefreshToken }; // reveal: see refreshTokenOf
      const key = m.fields.refresh_token!;
      await deps.saveRotated(vaultId, key, token.rotatedRefreshToken).catch((err) => {
        // The new refresh token stays in this slot; the next rotation tries to store again.
        deps.log.error("refresh_token_not_stored", { host, key, err });
      });
    }
    const grant: Grant = {
      injection: { header: "authorization", value: new Secret(`Bearer ${token.value.reveal()}`) }, // reveal: composing the header
      needles: new Needles([...m.inputs.values(), token.value, ...(token.rotatedRefreshToken ? [token.rotatedRefreshToken] : [])].map((s) => s.reveal())), // reveal: search patterns only
      token,
    };
    slot.current = grant;
    return grant;
  }

  /** One refresh at a time per slot: callers arriving meanwhile wait for the same one. */
  function refresh(vaultId: number, plan: EgressPlan, m: MintedPlan, slot: Slot): Promise<Grant> {
    if (!slot.pending) {
      slot.pending = mint(vaultId, plan, m, slot).finally(() => {
        slot.pending = undefined;
      });
    }
    return slot.pending;
  }

  function usable(slot: Slot, m: MintedPlan): void {
    if (!slot.refused) return;
    const now = refreshTokenOf(slot, m)?.reveal(); // reveal: compared with the refused value only
    if (now !== undefined && now !== slot.refused.refreshToken) slot.refused = undefined;
    else throw slot.refused.error;
  }

  return {
    async grant(vault, plan) {
      const m = plan.minted!;
      const slot = slotFor(vault.id, plan, m);
      usable(slot, m);
      const current = slot.current;
      if (current && deps.now() < current.token.expiresAt - refreshMargin(current.token.expiresAt - current.token.issuedAt)) return current;
      return refresh(vault.id, plan, m, slot);
    },
    async regrant(vault, plan, stale) {
      const m = plan.minted!;
      const slot = slotFor(vault.id, plan, m);
      usable(slot, m);
      // Someone already replaced the stale token: use theirs rather than refreshing again.
      if (slot.current && slot.current !== stale) return slot.current;
      if (slot.current === stale) slot.current = undefined;
      return refresh(vault.id, plan, m, slot);
    },
    state(vaultId, host) {
      const slot = slots.get(`${vaultId}|${host}`);
      if (slot?.refused) return { kind: "refused", reason: slot.refused.error.reason };
      if (slot?.current) return { kind: "ready", expiresAt: slot.current.token.expiresAt };
      return undefined;
    },
    secrets: {
      *values() {
        for (const slot of slots.values()) {
          if (slot.current) yield slot.current.token.value.reveal(); // reveal: the logger's scrub patterns
          if (slot.rotated) yield slot.rotated.to.reveal();
        }
      },
    },
  };

}
