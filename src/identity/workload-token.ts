// Verifies a workload's platform token (a JWT) against the trusted issuer it names (docs/architecture.md D27), as
// strictly as the OIDC sign-in: allow-listed asymmetric algorithms only (never `none`, never HMAC, so a token
// "signed" with an issuer's public key is refused), `iss` exact, `aud` one the issuer allows, `exp` required,
// `nbf` and `iat` honoured within the issuer's clock skew, a `jti` where the issuer requires one. Keys come over HTTPS
// through the broker's trusting fetch and are fetched again on an unknown `kid` (rotation), at most once per
// cooldown, or from a key set the owner gave as a document (read by workload-key-set.ts). The subject must be one the
// audit can keep and show as it is. Never logs or echoes a token.

import * as jose from "jose";
import { InvalidGrant } from "../errors.ts";
import type { WorkloadIssuerRow } from "../store/index.ts";

export const WORKLOAD_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"] as const;
/** A platform token longer than this is refused unread. */
export const WORKLOAD_TOKEN_MAX_CHARS = 16_384;

export interface WorkloadKeysOptions {
  /** fetch trusting the system roots plus BROKER_UPSTREAM_CA_FILE (createTrustingFetch). */
  readonly fetch: typeof fetch;
  /** How long a key set is trusted before it is fetched again (default 10 minutes). */
  readonly cacheMs?: number;
  /** How soon after a fetch an unknown `kid` may fetch again (default 30 s: the endpoint is open to anyone). */
  readonly cooldownMs?: number;
  readonly timeoutMs?: number;
}

/** The key sets of trusted issuers, one per JWKS address, kept across exchanges. */
export interface WorkloadKeys {
  keysFor(issuer: WorkloadIssuerRow): Promise<jose.JWTVerifyGetKey>;
}

const MAX_KEY_SETS = 200;

export function createWorkloadKeys(opts: WorkloadKeysOptions): WorkloadKeys {
  const sets = new Map<string, jose.JWTVerifyGetKey>();
  const discovered = new Map<string, { jwksUrl: string; at: number }>();
  const cacheMs = opts.cacheMs ?? 10 * 60_000;
  const timeout = opts.timeoutMs ?? 5_000;
  const httpFetch = opts.fetch;

  /** Discoveries under way (concurrent exchanges share one), and failures remembered for the cooldown. */
  const discovering = new Map<string, Promise<string>>();
  const failed = new Map<string, { at: number; error: InvalidGrant }>();
  const cooldownMs = opts.cooldownMs ?? 30_000;

  /**
   * The issuer's JWKS address. Discovery runs before any signature is checked, for anyone who names a trusted `iss`:
   * so one fetch at a time per issuer, and a failure is answered from memory for the cooldown, like an unknown `kid`.
   */
  function jwksUrlOf(issuer: WorkloadIssuerRow): Promise<string> {
    if (issuer.jwksUrl) return Promise.resolve(issuer.jwksUrl);
    const hit = discovered.get(issuer.issuer);
    if (hit && Date.now() - hit.at < cacheMs) return Promise.resolve(hit.jwksUrl);
    const recent = failed.get(issuer.issuer);
    if (recent && Date.now() - recent.at < cooldownMs) return Promise.reject(recent.error);
    const under = discovering.get(issuer.issuer);
    if (under) return under;
    const found = discover(issuer)
      .catch((err: unknown) => {
        const error = err instanceof InvalidGrant ? err : new InvalidGrant("the issuer's discovery document could not be read");
        failed.set(issuer.issuer, { at: Date.now(), error });
        // The last good address goes on serving while a refresh fails.
        if (hit) return hit.jwksUrl;
        throw error;
      })
      .finally(() => discovering.delete(issuer.issuer));
    discovering.set(issuer.issuer, found);
    return found;
  }

  async function discover(issuer: WorkloadIssuerRow): Promise<string> {
    const url = `${issuer.issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
    const res = await httpFetch(url, { signal: AbortSignal.timeout(timeout), headers: { accept: "application/json" } });
    if (!res.ok) throw new InvalidGrant(`the issuer's discovery document could not be read (HTTP ${res.status})`);
    const doc = (await res.json().catch(() => ({}))) as { issuer?: unknown; jwks_uri?: unknown };
    if (doc.issuer !== issuer.issuer || typeof doc.jwks_uri !== "string" || !doc.jwks_uri.startsWith("https://")) {
      throw new InvalidGrant("the issuer's discovery document names another issuer or no HTTPS jwks_uri");
    }
    discovered.set(issuer.issuer, { jwksUrl: doc.jwks_uri, at: Date.now() });
    return doc.jwks_uri;
  }

  /** Key sets given as documents, by their text (an update of the issuer is a new text, so a new set). */
  const documents = new Map<string, jose.JWTVerifyGetKey>();

  return {
    async keysFor(issuer) {
      if (issuer.jwks !== null) {
        let local = documents.get(issuer.jwks);
        if (!local) {
          local = jose.createLocalJWKSet(JSON.parse(issuer.jwks) as jose.JSONWebKeySet);
          documents.set(issuer.jwks, local);
          if (documents.size > MAX_KEY_SETS) documents.delete(documents.keys().next().value!);
        }
        return local;
      }
      const url = await jwksUrlOf(issuer);
      let set = sets.get(url);
      if (!set) {
        set = jose.createRemoteJWKSet(new URL(url), {
          cacheMaxAge: cacheMs,
          cooldownDuration: opts.cooldownMs ?? 30_000,
          timeoutDuration: timeout,
          [jose.customFetch]: (u, init) => httpFetch(u, init as RequestInit),
        });
        sets.set(url, set);
        if (sets.size > MAX_KEY_SETS) sets.delete(sets.keys().next().value!);
      }
      return set;
    },
  };
}

export interface VerifiedWorkload {
  readonly issuer: WorkloadIssuerRow;
  readonly claims: jose.JWTPayload;
  readonly subject: string;
  /** The token's `exp`, in epoch milliseconds. */
  readonly expiresAt: number;
  readonly jti: string | undefined;
}

/** The unverified `iss` of a token, read only to pick which trusted issuer's keys verify it. */
export function readTokenIssuer(token: string): string {
  if (token.length > WORKLOAD_TOKEN_MAX_CHARS || token.split(".").length !== 3) throw new InvalidGrant("subject_token is not a signed JWT");
  let header: jose.ProtectedHeaderParameters;
  let payload: jose.JWTPayload;
  try {
    header = jose.decodeProtectedHeader(token);
    payload = jose.decodeJwt(token);
  } catch {
    throw new InvalidGrant("subject_token is not a signed JWT");
  }
  if (!(WORKLOAD_ALGORITHMS as readonly string[]).includes(String(header.alg))) {
    throw new InvalidGrant(`the token's signing algorithm is not accepted (accepted: ${WORKLOAD_ALGORITHMS.join(", ")}; never none or HMAC)`);
  }
  if (typeof payload.iss !== "string" || payload.iss === "") throw new InvalidGrant("the token names no issuer (iss)");
  return payload.iss;
}

/** Verifies the token's signature and claims for one trusted issuer; throws InvalidGrant saying which check failed. */
export async function verifyWorkloadToken(token: string, issuer: WorkloadIssuerRow, keys: WorkloadKeys, now: number): Promise<VerifiedWorkload> {
  let result: jose.JWTVerifyResult;
  try {
    result = await jose.jwtVerify(token, await keys.keysFor(issuer), {
      algorithms: [...WORKLOAD_ALGORITHMS],
      issuer: issuer.issuer,
      audience: [...issuer.audiences],
      clockTolerance: issuer.clockSkewSeconds,
      requiredClaims: ["exp", "sub"],
      currentDate: new Date(now),
    });
  } catch (err) {
    throw refusal(err);
  }
  const { payload } = result;
  const skewMs = issuer.clockSkewSeconds * 1000;
  if (typeof payload.iat === "number" && payload.iat * 1000 > now + skewMs) throw new InvalidGrant("the token was issued in the future (iat)");
  if (typeof payload.sub !== "string" || payload.sub === "") throw new InvalidGrant("the token names no subject (sub)");
  checkSubject(payload.sub);
  const jti = typeof payload.jti === "string" && payload.jti !== "" ? payload.jti : undefined;
  if (issuer.requireJti && jti === undefined) throw new InvalidGrant("this issuer requires a token id (jti), and the token has none");
  return {
    issuer,
    claims: payload,
    subject: payload.sub,
    expiresAt: Math.floor(payload.exp! * 1000), // a fractional exp: whole milliseconds, as the store keeps them
    jti,
  };
}

/** The longest subject kept: a SPIFFE ID's limit (2048 bytes); CI and Kubernetes subjects are far shorter. */
const WORKLOAD_SUBJECT_MAX_CHARS = 2048;

/**
 * C0 and C1 controls and DEL (terminal escapes, NUL, forged line breaks) and the bidirectional controls that reorder
 * how the text around them is shown (an RTL override makes `…/nur-yolped` read as `…/deploy-run`).
 */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/**
 * The subject is kept in the session and named in every audit record its session makes, and shown in the console,
 * `broker logs` and exports: so it must be stored exactly as the token says (a lone surrogate is stored as U+FFFD, so
 * two subjects would read as one; PostgreSQL refuses NUL, which failed the exchange with a 500) and shown as it reads.
 * No platform issues other subjects.
 */
function checkSubject(sub: string): void {
  if (sub.length > WORKLOAD_SUBJECT_MAX_CHARS) throw new InvalidGrant(`the token's subject (sub) is longer than ${WORKLOAD_SUBJECT_MAX_CHARS} characters`);
  if (!sub.isWellFormed()) throw new InvalidGrant("the token's subject (sub) is not well-formed Unicode (a lone surrogate)");
  if (UNSHOWABLE.test(sub)) throw new InvalidGrant("the token's subject (sub) holds control or bidirectional formatting characters");
}

/** A jose failure in words that name the check, never the token. */
function refusal(err: unknown): InvalidGrant {
  if (err instanceof InvalidGrant) return err;
  if (err instanceof jose.errors.JWTExpired) return new InvalidGrant("the token has expired (exp)");
  if (err instanceof jose.errors.JWTClaimValidationFailed) {
    const words: Record<string, string> = {
      aud: "the token's audience (aud) is not one this issuer allows",
      iss: "the token's issuer (iss) does not match",
      nbf: "the token is not valid yet (nbf)",
      exp: "the token has no expiry (exp)",
      sub: "the token names no subject (sub)",
      iat: "the token's issue time (iat) is not a number",
    };
    return new InvalidGrant(words[err.claim] ?? `the token's ${err.claim} claim is invalid`);
  }
  if (err instanceof jose.errors.JOSEAlgNotAllowed) return new InvalidGrant("the token's signing algorithm is not accepted");
  if (err instanceof jose.errors.JWKSNoMatchingKey) return new InvalidGrant("no key of the issuer matches the token's key id (kid)");
  if (err instanceof jose.errors.JWKSMultipleMatchingKeys) return new InvalidGrant("the token names no key id (kid) and the issuer has several keys");
  if (err instanceof jose.errors.JWSSignatureVerificationFailed) return new InvalidGrant("the token's signature does not verify");
  if (err instanceof jose.errors.JWKSTimeout || err instanceof jose.errors.JWKSInvalid || err instanceof TypeError) {
    return new InvalidGrant("the issuer's keys could not be fetched");
  }
  if (err instanceof jose.errors.JOSEError) return new InvalidGrant("the token is not valid");
  return new InvalidGrant("the issuer's keys could not be fetched");
}
