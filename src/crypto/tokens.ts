// Every bearer token the broker issues: a kind prefix plus 256 bits of randomness (base64url).
// The raw token is returned once, inside a Secret; only its SHA-256 (hex) is ever stored.

import { Secret } from "../secret.ts";
import { randomBytes } from "./aead.ts";

export const TOKEN_PREFIXES = {
  session: "av_sess_",
  agent: "av_agt_",
  agentInvite: "av_inv_",
  approval: "av_appr_",
  vaultInvite: "av_uinv_",
} as const;

export type TokenKind = keyof typeof TOKEN_PREFIXES;
export const TOKEN_RANDOM_BYTES = 32;

export interface MintedToken {
  /** SECRET: returned to the caller once, never logged or stored. */
  readonly token: Secret;
  readonly hash: string;
}

export function mintToken(kind: TokenKind, random: (n: number) => Uint8Array = randomBytes): MintedToken {
  const bytes = random(TOKEN_RANDOM_BYTES);
  const raw = TOKEN_PREFIXES[kind] + Buffer.from(bytes).toString("base64url");
  return { token: new Secret(raw), hash: hashToken(raw) };
}

export function hashToken(raw: string): string {
  return new Bun.CryptoHasher("sha256").update(raw).digest("hex");
}

/** The kind a token claims by its prefix, if any; says nothing about whether it is valid. */
export function tokenKindOf(raw: string): TokenKind | undefined {
  for (const [kind, prefix] of Object.entries(TOKEN_PREFIXES)) if (raw.startsWith(prefix)) return kind as TokenKind;
  return undefined;
}

/** A short random public id (for listing and revoking sessions without showing their tokens). */
export function mintPublicId(prefix: string): string {
  return prefix + Buffer.from(randomBytes(12)).toString("base64url");
}
