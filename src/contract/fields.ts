// Field schemas more than one body uses: credential key names, bounded text, https URLs. Each refusal
// is worded once here and names its field wherever the field sits (`{field}`, schema-input.ts).

import { z } from "zod";
import { CREDENTIAL_KEY_PATTERN } from "../crypto/index.ts";
import { LIMITS } from "../policy/index.ts";
import { says } from "../schema-input.ts";
import { Secret } from "../secret.ts";

const KEY = "{field} must be a credential key name (A-Z, 0-9, _; starting with a letter)";

/** A credential key name: never a value. */
export const KeyName = z
  .string(says(KEY))
  .max(LIMITS.credentialKeyMaxLength, says(KEY))
  .regex(CREDENTIAL_KEY_PATTERN, says(KEY))
  .describe("credential key name (A-Z, 0-9, _; starting with a letter)");

/** Absent, null and "" all mean "not given": the field is left out of what is read. */
export function omittedWhenEmpty<T extends z.ZodType>(schema: T) {
  return z.preprocess((v) => (v === null || v === "" ? undefined : v), schema.optional());
}

/** Free text of at most `max` characters; absent or null reads as "". */
export function optionalText(max: number) {
  return z
    .string(says("{field} must be text"))
    .max(max, says(`{field} must be at most ${max} characters`))
    .nullish()
    .transform((v) => v ?? "");
}

/** Text of at most `max` characters without control characters (settings a request carries upstream). */
export function plainText(max: number) {
  const message = `{field} must be text of at most ${max} characters without control characters`;
  return z
    .string(says(message))
    .max(max, says(message))
    .refine((v) => !/[\0-\x1f\x7f]/.test(v), says(message));
}

/**
 * A URL read from text inside a transform: `check` answers the refusal for a URL it does not take
 * (null: taken). A text that is no URL is refused with `notAUrl`; a taken URL is read back normalised.
 */
export function urlCheckedBy(notAUrl: string, check: (url: URL) => string | null) {
  return (text: string, ctx: z.RefinementCtx): string => {
    let url: URL | undefined;
    try {
      url = new URL(text);
    } catch {}
    const refusal = url ? check(url) : notAUrl;
    if (refusal === null && url) return url.href;
    ctx.addIssue({ code: "custom", message: refusal ?? notAUrl, input: text });
    return z.NEVER;
  };
}

/** An https URL a token is fetched from: no user:password@, no #fragment; read back normalised. */
export const HttpsEndpoint = plainText(2048).transform(
  urlCheckedBy("{field} must be an https:// URL", (url) => {
    if (url.protocol !== "https:") return "{field} must be an https:// URL (a token endpoint is never reached over plain HTTP)";
    if (url.username || url.password) return "{field} must not carry user:password@; name the client's credentials as keys instead";
    if (url.hash) return "{field} must not have a #fragment";
    return null;
  }),
);

/**
 * One PEM block (a GitHub App's private key): the only multi-line value. It is only ever read as a
 * key (minting/minted-tokens.ts); the header and URL injections refuse a value with line breaks.
 */
const PEM_BLOCK = /^-----BEGIN [A-Z0-9 ]{1,40}-----\r?\n(?:[A-Za-z0-9+/=]{1,128}\r?\n){1,200}-----END [A-Z0-9 ]{1,40}-----\r?\n?$/;

/**
 * A credential's value, wrapped in its Secret as soon as it is read. `name` is how refusals name it:
 * `{field}` (a body's `value`) or `{key}` (the slot's key, where values are posted by key).
 */
export function credentialValue(name: "{field}" | "{key}" = "{field}") {
  const max = LIMITS.credentialValueMaxBytes;
  return z
    .string(says(`${name} must be a non-empty string`))
    .min(1, says(`${name} must be a non-empty string`))
    .refine((v) => Buffer.byteLength(v) <= max, says(`${name} must be at most ${max} bytes`))
    .refine(
      (v) => !/[\r\n\0]/.test(v) || PEM_BLOCK.test(v),
      says(`${name} must not contain line breaks or NUL (it is sent in an HTTP header); only a PEM key may span lines`),
    )
    .transform((v) => new Secret(v));
}

/** Report mode (architecture.md D33): a vault's policy mode, a service's own rules mode. */
export const PolicyModeInput = z.enum(["enforce", "report"], says("{field} must be enforce or report"));
