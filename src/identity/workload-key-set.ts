// A trusted workload issuer's keys given as a document (a JWKS file, for an issuer the broker cannot reach;
// docs/architecture.md D27): checked on the way in and kept as the public keys only. The owner may paste a file a
// tool wrote with more in it than public keys, and the stored set is shown back (the API's `jwks`, the console's
// change form): so only the members a public signature key is made of are kept, and what could never verify a
// token is refused at once rather than when a workload's exchange fails.

import * as jose from "jose";
import { InvalidRequest } from "../errors.ts";
import { JWKS_MAX_KEYS } from "../policy/index.ts";
import { WORKLOAD_ALGORITHMS } from "./workload-token.ts";

/** Members that only a private or symmetric key has: a key set holding one is refused (it is not a public key). */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"] as const;

/**
 * The members kept of each key type, and nothing else: a private part hidden in another member (a nested object,
 * `__proto__`, `x5c`) or beside `keys` is dropped, so it can never be stored or shown. jose verifies with these only.
 */
const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  RSA: ["n", "e"],
  EC: ["crv", "x", "y"],
  OKP: ["crv", "x"],
};
const COMMON_MEMBERS = ["kty", "kid", "alg", "use", "key_ops"] as const;

/** jose refuses RS and PS signatures under a smaller key; such a key could never verify a token. */
const RSA_MIN_BITS = 2048;

/**
 * Reads a key set given as a document: JSON with `keys`, each a public RSA, EC or OKP signature key usable with an
 * accepted algorithm, at most JWKS_MAX_KEYS of them, no two of one type sharing a `kid`. Returns the key ids and the
 * document to store: compact, each key reduced to its public members. Refuses a private or symmetric key by name:
 * pasting a signing key here would be a leak, and an `oct` key would let HMAC in.
 */
export async function readKeySetDocument(text: string): Promise<{ kids: string[]; document: string }> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new InvalidRequest('jwks must be a JWKS document: JSON such as {"keys": [...]}');
  }
  const keys = (doc as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new InvalidRequest('jwks must hold a non-empty list of keys ({"keys": [...]})');
  if (keys.length > JWKS_MAX_KEYS) throw new InvalidRequest(`jwks may hold at most ${JWKS_MAX_KEYS} keys`);
  const kept: jose.JWK[] = [];
  for (const [i, key] of keys.entries()) kept.push(await readKey(key, `jwks key ${i + 1}`));
  const seen = new Set<string>();
  for (const k of kept) {
    if (k.kid === undefined) continue;
    // jose picks a key by type, `kid` and `alg`: two of one type with one kid leave a token naming it no key to use.
    const id = `${k.kty} ${k.kid}`;
    if (seen.has(id)) throw new InvalidRequest(`jwks holds two ${k.kty} keys with kid ${JSON.stringify(k.kid)}: give each key its own kid`);
    seen.add(id);
  }
  return { kids: kept.flatMap((k) => (k.kid === undefined ? [] : [k.kid])), document: JSON.stringify({ keys: kept }) };
}

/** One key of the set, checked, as its public members only. */
async function readKey(key: unknown, where: string): Promise<jose.JWK> {
  if (typeof key !== "object" || key === null || Array.isArray(key)) throw new InvalidRequest(`${where} is not a JSON object`);
  const jwk = key as Record<string, unknown>;
  const members = typeof jwk.kty === "string" && Object.hasOwn(PUBLIC_MEMBERS, jwk.kty) ? PUBLIC_MEMBERS[jwk.kty]! : undefined;
  if (!members) throw new InvalidRequest(`${where} must be a public RSA, EC or OKP key (kty), never a shared secret`);
  const secret = PRIVATE_MEMBERS.find((m) => Object.hasOwn(jwk, m));
  if (secret) throw new InvalidRequest(`${where} holds a private part (${secret}): give the issuer's public keys only`);
  if (jwk.kid !== undefined && typeof jwk.kid !== "string") throw new InvalidRequest(`${where} has a kid that is not a string`);
  if (jwk.alg !== undefined && !(WORKLOAD_ALGORITHMS as readonly unknown[]).includes(jwk.alg)) {
    throw new InvalidRequest(`${where} names an algorithm not accepted (${WORKLOAD_ALGORITHMS.join(", ")})`);
  }
  // jose never verifies with a key marked for encryption, or whose operations leave out verifying.
  if (jwk.use !== undefined && jwk.use !== "sig") throw new InvalidRequest(`${where} is not a signature key (use must be "sig")`);
  if (jwk.key_ops !== undefined && !(Array.isArray(jwk.key_ops) && jwk.key_ops.includes("verify"))) {
    throw new InvalidRequest(`${where} is not a key to verify with (key_ops must include "verify")`);
  }
  const publicJwk = Object.fromEntries(
    [...COMMON_MEMBERS, ...members].filter((m) => Object.hasOwn(jwk, m) && jwk[m] !== undefined).map((m) => [m, jwk[m]]),
  ) as jose.JWK;
  const alg = publicJwk.alg ?? defaultAlgorithm(publicJwk);
  if (!alg) throw new InvalidRequest(`${where} is on a curve no accepted algorithm uses (${WORKLOAD_ALGORITHMS.join(", ")})`);
  let imported: CryptoKey | Uint8Array;
  try {
    imported = await jose.importJWK(publicJwk, alg);
  } catch {
    throw new InvalidRequest(`${where} is not a valid public key`);
  }
  const bits = (imported as CryptoKey).algorithm as { modulusLength?: number } | undefined;
  if (publicJwk.kty === "RSA" && (bits?.modulusLength ?? 0) < RSA_MIN_BITS) throw new InvalidRequest(`${where} is an RSA key under ${RSA_MIN_BITS} bits`);
  return publicJwk;
}

/** The accepted algorithm a key without `alg` can verify with; none for a curve no accepted algorithm uses. */
function defaultAlgorithm(jwk: jose.JWK): string | undefined {
  if (jwk.kty === "RSA") return "RS256";
  if (jwk.kty === "OKP") return "EdDSA";
  return jwk.crv === "P-256" ? "ES256" : jwk.crv === "P-384" ? "ES384" : undefined;
}
