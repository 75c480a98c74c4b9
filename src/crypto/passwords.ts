// User password hashing: Argon2id with the contract's parameters and a per-user salt; the
// parameters are stored with each hash. Verification is constant-time, and unknown users pay
// the same hashing cost (verifyAgainstNothing) so timing does not reveal who is registered.

import { timingSafeEqual } from "node:crypto";
import { Secret } from "../secret.ts";
import { randomBytes } from "./aead.ts";
import { decodeParams, deriveKey, encodeParams, KDF_DEFAULTS, type KdfParams, SALT_BYTES } from "./kdf.ts";

export interface PasswordHash {
  readonly hash: Uint8Array;
  readonly salt: Uint8Array;
  readonly params: string;
}

export const MIN_PASSWORD_LENGTH = 8;
/** password_params of a user without a password (signed up through an identity provider). */
export const PASSWORDLESS_PARAMS = '{"alg":"none"}';

/** Such a user's stored hash is random and unusable; password sign-in runs the dummy hash instead. */
export function isPasswordless(stored: { passwordParams: string }): boolean {
  return stored.passwordParams === PASSWORDLESS_PARAMS;
}
export const MAX_PASSWORD_LENGTH = 1024;

export async function hashPassword(password: Secret, params: KdfParams = KDF_DEFAULTS): Promise<PasswordHash> {
  const salt = randomBytes(SALT_BYTES);
  return { hash: await deriveKey(password, salt, params), salt, params: encodeParams(params) };
}

export async function verifyPassword(password: Secret, stored: PasswordHash): Promise<boolean> {
  if (password.reveal().length === 0) return verifyAgainstNothing(password, decodeParams(stored.params));
  const candidate = await deriveKey(password, stored.salt, decodeParams(stored.params));
  return candidate.byteLength === stored.hash.byteLength && timingSafeEqual(candidate, stored.hash);
}

const DUMMY_SALT = new Uint8Array(SALT_BYTES);

/** Spends the same Argon2id work as a real verification and always fails. */
export async function verifyAgainstNothing(password: Secret, params: KdfParams = KDF_DEFAULTS): Promise<false> {
  // hash-wasm refuses an empty password; spend the same work on a stand-in so timing stays flat.
  await deriveKey(password.reveal().length === 0 ? new Secret("\u0000") : password, DUMMY_SALT, params);
  return false;
}
