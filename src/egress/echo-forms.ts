// The forms an echoed credential takes when a server quotes it back, as byte strings to look for in
// the scanner's view (echo-scanner.ts), which already reads percent-escapes, HTML entities and JSON
// escapes of any character, drops invisible characters and folds ASCII case. What the view cannot
// undo is listed here: base64 and base64url at each of the three alignments a value can sit at
// inside a larger encoded blob (so `Bearer <value>`, `user:<value>` and any other prefix are
// covered), hex, UTF-16 in either byte order, the latin1 bytes a header carried, and `+` for space.
// Forms derived by encoding are kept only when at least MIN_DERIVED bytes long: a shorter one would
// match ordinary text everywhere.

import { viewOf } from "./echo-view.ts";

export const MIN_DERIVED = 8;

const B64 = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64");

/**
 * The base64 characters that depend only on `bytes` when they start `offset` (0, 1 or 2) bytes into
 * a 3-byte group: the characters before (mixed with what precedes) and after (mixed with what
 * follows) are left out.
 */
export function base64Core(bytes: Uint8Array, offset: number): string {
  const padded = new Uint8Array(offset + bytes.length);
  padded.set(bytes, offset);
  const text = B64(padded);
  const first = Math.ceil((offset * 8) / 6);
  const last = Math.floor(((offset + bytes.length) * 8) / 6); // characters wholly inside the value's bits
  return text.slice(first, Math.max(first, last));
}

/** The value URL-encoded as RFC 3986 and as a form (application/x-www-form-urlencoded) encode it. */
function urlForms(v: string): Uint8Array[] {
  let component: string;
  try {
    component = encodeURIComponent(v);
  } catch {
    return []; // a lone surrogate has no URL form
  }
  const form = new URLSearchParams({ v }).toString().slice(2);
  return [component, form].map((f) => new Uint8Array(Buffer.from(f, "latin1")));
}

function utf16(s: string, bigEndian: boolean): Uint8Array {
  const le = Buffer.from(s, "utf16le");
  return bigEndian ? le.swap16() : le;
}

/** Every raw form of each value (before the view is applied), deduplicated. */
export function echoForms(values: readonly string[]): Uint8Array[] {
  const out = new Map<string, Uint8Array>();
  const add = (b: Uint8Array, derived: boolean) => {
    if (b.length === 0 || (derived && b.length < MIN_DERIVED)) return;
    out.set(Buffer.from(b).toString("latin1"), b);
  };
  for (const v of values) {
    if (!v) continue;
    const utf8 = new Uint8Array(Buffer.from(v, "utf8"));
    add(utf8, false);
    if (/[\x80-\xff]/.test(v) && !/[^\x00-\xff]/.test(v)) add(new Uint8Array(Buffer.from(v, "latin1")), false);
    if (v.includes(" ")) add(new Uint8Array(Buffer.from(v.replaceAll(" ", "+"), "utf8")), false);
    // Base64 of the value as sent, and of its URL-encoded forms (an OAuth client_secret_basic header is
    // base64 of urlencode(id):urlencode(secret), RFC 6749 §2.3.1; the view reads the percent-escapes
    // once the agent has decoded the base64 itself).
    for (const text of new Set([utf8, ...urlForms(v)].map((b) => Buffer.from(b).toString("latin1")))) {
      const bytes = new Uint8Array(Buffer.from(text, "latin1"));
      for (let offset = 0; offset < 3; offset++) {
        const core = base64Core(bytes, offset);
        add(new Uint8Array(Buffer.from(core, "latin1")), true);
        add(new Uint8Array(Buffer.from(core.replaceAll("+", "-").replaceAll("/", "_"), "latin1")), true);
      }
    }
    add(new Uint8Array(Buffer.from(Buffer.from(utf8).toString("hex"), "latin1")), true);
    add(utf16(v, false), true);
    add(utf16(v, true), true);
  }
  return [...out.values()];
}

/**
 * The needles to look for: each form as the view reads it, and, where the view would decode part of
 * the value itself (a value holding `%41` or `\u`), also the form merely case-folded, so the value
 * escaped once more (`%2541`) is found too.
 */
export function echoNeedles(values: readonly string[]): Uint8Array[] {
  const out = new Map<string, Uint8Array>();
  for (const form of echoForms(values)) {
    const viewed = viewOf(form);
    out.set(Buffer.from(viewed).toString("latin1"), viewed);
    const folded = form.map((b) => (b >= 0x41 && b <= 0x5a ? b + 32 : b));
    if (/[%&\\]/.test(Buffer.from(form).toString("latin1"))) out.set(Buffer.from(folded).toString("latin1"), folded);
  }
  return [...out.values()].filter((n) => n.length > 0);
}
