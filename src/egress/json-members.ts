// The top-level members of a JSON object text, found without building it (issue 38): metering needs two small fields
// of a chat request (`stream`, `stream_options`) that may sit beside megabytes of messages, and JSON.parse of such a
// body builds every one of them on the event loop. One pass over the characters, nested values skipped.

/** A top-level member: its key and where its value's text lies. */
export interface Member {
  readonly key: string;
  readonly start: number;
  readonly end: number;
}

/**
 * The object's members whose key folds to one in `wanted` (lower case), in order (a key given twice appears twice), as
 * written: servers differ in how they read keys (Go's encoding/json matches them case-insensitively, folding ſ to s
 * and the Kelvin sign to k), so a caller sees every spelling one of them might take for the key. Undefined when the
 * text is not one JSON object. Other keys are compared by length first (decoded only when they hold an escape).
 */
export function topLevelMembers(text: string, wanted: ReadonlySet<string>): Member[] | undefined {
  const lengths = new Set([...wanted].map((k) => k.length));
  let i = skipSpace(text, 0);
  if (text[i] !== "{") return undefined;
  i = skipSpace(text, i + 1);
  const members: Member[] = [];
  if (text[i] === "}") return skipSpace(text, i + 1) === text.length ? members : undefined;
  for (;;) {
    if (text[i] !== '"') return undefined;
    const keyEnd = endOfString(text, i);
    if (keyEnd < 0) return undefined;
    // Most keys are neither wanted nor escaped: told apart by length before any string is made.
    const raw = keyEnd - i - 2;
    let key: string | undefined;
    if (lengths.has(raw)) key = text.slice(i + 1, keyEnd - 1);
    else if (escaped(text, i + 1, keyEnd - 1)) {
      try {
        key = JSON.parse(text.slice(i, keyEnd)) as string;
      } catch {
        return undefined;
      }
    }
    i = skipSpace(text, keyEnd);
    if (text[i] !== ":") return undefined;
    const start = skipSpace(text, i + 1);
    const end = endOfValue(text, start);
    if (end < 0) return undefined;
    if (key !== undefined && wanted.has(foldKey(key))) members.push({ key, start, end });
    i = skipSpace(text, end);
    if (text[i] === ",") {
      i = skipSpace(text, i + 1);
      continue;
    }
    if (text[i] !== "}") return undefined;
    return skipSpace(text, i + 1) === text.length ? members : undefined;
  }
}

/** A key as a case-insensitive reader matches it. */
export function foldKey(key: string): string {
  return key
    .replace(/\u017f/g, "s")
    .replace(/\u212a/g, "k")
    .toLowerCase();
}

/** Whether text[from, to) holds a backslash (an escaped key may decode to a wanted one of another length). */
function escaped(text: string, from: number, to: number): boolean {
  for (let j = from; j < to; j++) if (text.charCodeAt(j) === 0x5c) return true;
  return false;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) break;
    i++;
  }
  return i;
}

/** Just past the string that opens at `i`, or -1 when it never closes. */
function endOfString(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x5c) j++;
    else if (c === 0x22) return j + 1;
  }
  return -1;
}

/** Just past the value that starts at `i` (nested objects and arrays skipped whole), or -1 when malformed. */
function endOfValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return endOfString(text, i);
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      const d = text.charCodeAt(j);
      if (d === 0x22) {
        j = endOfString(text, j) - 1;
        if (j < 0) return -1;
      } else if (d === 0x7b || d === 0x5b) depth++;
      else if ((d === 0x7d || d === 0x5d) && --depth === 0) return j + 1;
    }
    return -1;
  }
  // A number or a literal: up to the next delimiter (, } ] or white space).
  let j = i;
  for (; j < text.length; j++) {
    const d = text.charCodeAt(j);
    if (d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
  }
  return j > i ? j : -1;
}
