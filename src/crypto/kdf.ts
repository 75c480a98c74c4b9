// Argon2id (hash-wasm) with the contract's parameters: 3 iterations, 64 MiB, 4 lanes,
// 128-bit random salt, 256-bit output. Parameters travel with every stored hash or wrap,
// so they can change later without invalidating what exists.

import { argon2id } from "hash-wasm";
import type { Secret } from "../secret.ts";

export interface KdfParams {
  readonly alg: "argon2id";
  readonly iterations: number;
  /** KiB */
  readonly memoryKiB: number;
  readonly parallelism: number;
  readonly hashLength: number;
}

export const KDF_DEFAULTS: KdfParams = Object.freeze({ alg: "argon2id", iterations: 3, memoryKiB: 64 * 1024, parallelism: 4, hashLength: 32 });
export const SALT_BYTES = 16;

export async function deriveKey(password: Secret<string>, salt: Uint8Array, params: KdfParams = KDF_DEFAULTS): Promise<Uint8Array> {
  return argon2id({
    password: password.reveal(), // reveal: fed straight into the KDF, never stored
    salt,
    iterations: params.iterations,
    memorySize: params.memoryKiB,
    parallelism: params.parallelism,
    hashLength: params.hashLength,
    outputType: "binary",
  });
}

export function encodeParams(p: KdfParams): string {
  return JSON.stringify({ alg: p.alg, iterations: p.iterations, memoryKiB: p.memoryKiB, parallelism: p.parallelism, hashLength: p.hashLength });
}

export function decodeParams(json: string): KdfParams {
  const p = JSON.parse(json) as Partial<KdfParams>;
  const ints = [p.iterations, p.memoryKiB, p.parallelism, p.hashLength];
  if (p.alg !== "argon2id" || !ints.every((n) => Number.isInteger(n) && (n as number) > 0)) throw new Error("unsupported KDF parameters");
  // Bounds stop a tampered row from making us allocate gigabytes or spin forever.
  if ((p.memoryKiB as number) > 4 * 1024 * 1024 || (p.iterations as number) > 64 || (p.parallelism as number) > 64)
    throw new Error("KDF parameters out of range");
  return Object.freeze(p as KdfParams);
}
