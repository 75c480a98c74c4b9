// Minted access tokens for the OAuth 2.0 and GitHub App services: one slot per (vault, service)
// keeps the current token in memory only (never on disk), refreshes it shortly before it expires with
// one request at a time (concurrent requests wait for that one), refreshes early when the upstream
// answers 401 (at most REGRANT_BURST times in a row, then once per REGRANT_COOLDOWN_MS: an API path
// that refuses every token, say for a missing scope, gets its 401 passed on rather than a new token
// per request, each a needle for a day), stores a refresh token the provider rotated, and remembers
// a refusal so a dead credential is not hammered: until a human changes one of the service's
// credentials, requests get 502 credential_refresh_failed at once.

import { CredentialRefreshFailed } from "../errors.ts";
import type { LiveSecrets, Logger } from "../log.ts";
import { Secret } from "../secret.ts";
import { requestInstallationToken, requestOAuthToken } from "./minted-tokens.ts";
import type { EgressPlan, Grant, MintedPlan, MintedState, MintedToken, Minter } from "../egress/index.ts";
import { Needles } from "../egress/index.ts";
import type { TokenEndpointDeps } from "./token-endpoint.ts";

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
  /** Refreshes after a 401 still allowed (a token bucket: REGRANT_BURST, one back per REGRANT_COOLDOWN_MS), as of `at`. */
  regrants?: { left: number; at: number };
}

/**
 * Refreshes after an upstream 401, per vault and service: this many at once, then one per cooldown.
 * A 401 to a token that works elsewhere (an API path needing a scope the token lacks) would
 * otherwise mint a token per request, as fast as an agent can send them, each kept as an echo needle
 * for 24 h (echo-needles.ts). A revoked token is still replaced at once, and twice in a row too.
 */
export const REGRANT_BURST = 3;
export const REGRANT_COOLDOWN_MS = 30_000;

/** Whether a refresh after a 401 is allowed now; takes one from the slot's bucket when it is. */
function takeRegrant(slot: Slot, now: number): boolean {
  const b = slot.regrants ?? { left: REGRANT_BURST, at: now };
  const back = Math.floor(Math.max(0, now - b.at) / REGRANT_COOLDOWN_MS);
  const left = Math.min(REGRANT_BURST, b.left + back);
  // A full bucket starts counting afresh; otherwise the time not yet worth a refresh carries over.
  const at = left === REGRANT_BURST ? now : b.at + back * REGRANT_COOLDOWN_MS;
  if (left === 0) {
    slot.regrants = { left, at };
    return false;
  }
  slot.regrants = { left: left - 1, at };
  return true;
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
          : await requestOAuthToken(
              deps,
              host,
              m.fields,
              { clientId: m.inputs.get("client_id")!, clientSecret: m.inputs.get("client_secret")!, refreshToken },
              now,
            );
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
    // What went out for it, and a rotated refresh token, which goes out next time.
    const sent = [...token.sent, ...(token.rotatedRefreshToken && refreshToken ? [token.rotatedRefreshToken] : [])];
    const grant: Grant = {
      injection: { header: "authorization", value: new Secret(`Bearer ${token.value.reveal()}`) }, // reveal: composing the header
      needles: new Needles(
        [...m.inputs.values(), token.value, ...token.sent, ...(token.rotatedRefreshToken ? [token.rotatedRefreshToken] : [])].map((s) => s.reveal()),
      ), // reveal: search patterns only
      token,
      sent,
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
    regrant(vault, plan, stale) {
      const m = plan.minted!;
      const slot = slotFor(vault.id, plan, m);
      try {
        usable(slot, m);
      } catch (err) {
        return Promise.reject(err);
      }
      // Someone already replaced the stale token (or is replacing it): use theirs rather than refreshing again.
      if (slot.current && slot.current !== stale) return Promise.resolve(slot.current);
      if (slot.pending) return slot.pending;
      // The current token refused once more: refreshed only while the bucket allows, else the 401 stands.
      if (!takeRegrant(slot, deps.now())) return undefined;
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
