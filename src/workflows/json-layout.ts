// A JSON body laid out for a person deciding whether to send it: indented, but every character of
// every string, number and key exactly as the agent wrote it. Parsing and re-serialising would not
// do: it keeps only the last of duplicate keys (an upstream may read the first), rounds numbers a
// bignum parser reads exactly, and turns an escaped `\u202e` into a real bidirectional override.

export interface JsonLayout {
  readonly text: string;
  /**
   * Keys an object names more than once, letter case aside (ASP.NET Core's and Go's JSON readers match
   * names case-insensitively): the upstream may read either value. As written, in order of repetition.
   */
  readonly duplicateKeys: readonly string[];
}

const INDENT = "  ";
/** Past this nesting the layout would mostly be indentation (and grow with its square): shown as sent. */
const MAX_DEPTH = 16;
const JSON_SPACE = new Set([" ", "\t", "\n", "\r"]);

/** The layout of `body` when it is valid JSON nested at most MAX_DEPTH deep, else null (shown as sent). */
export function layoutJson(body: string): JsonLayout | null {
  try {
    JSON.parse(body);
  } catch {
    return null;
  }
  let out = "";
  let depth = 0;
  // Per open container: the keys seen so far (objects) and whether the next string is a key.
  const frames: { keys: Set<string> | null; expectKey: boolean }[] = [];
  const duplicates = new Set<string>();
  const newline = () => "\n" + INDENT.repeat(depth);
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch === '"') {
      let end = i + 1;
      while (body[end] !== '"') end += body[end] === "\\" ? 2 : 1;
      const token = body.slice(i, end + 1);
      const frame = frames.at(-1);
      if (frame?.keys && frame.expectKey) {
        const key = (JSON.parse(token) as string).toLowerCase(); // "\u0061" and "a" are one key
        if (frame.keys.has(key)) duplicates.add(token.slice(1, -1));
        frame.keys.add(key);
        frame.expectKey = false;
      }
      out += token;
      i = end;
    } else if (ch === "{" || ch === "[") {
      frames.push({ keys: ch === "{" ? new Set() : null, expectKey: ch === "{" });
      let next = i + 1;
      while (JSON_SPACE.has(body[next]!)) next++;
      if (body[next] === "}" || body[next] === "]") {
        // An empty container stays on one line.
        out += ch + body[next];
        frames.pop();
        i = next;
      } else {
        if (++depth > MAX_DEPTH) return null;
        out += ch + newline();
      }
    } else if (ch === "}" || ch === "]") {
      frames.pop();
      depth--;
      out += newline() + ch;
    } else if (ch === ",") {
      const frame = frames.at(-1);
      if (frame?.keys) frame.expectKey = true;
      out += "," + newline();
    } else if (ch === ":") {
      out += ": ";
    } else if (!JSON_SPACE.has(ch)) {
      out += ch; // numbers, true, false, null: as written
    }
  }
  return { text: out, duplicateKeys: [...duplicates] };
}
