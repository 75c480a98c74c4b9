// The forms an echoed credential takes when a server quotes it back: as sent, escaped by the JSON
// encoders of common stacks (JavaScript, Go, Python, .NET), percent-encoded by common URL encoders
// (either hex case, `+` for space), HTML-escaped. These are the transformations servers apply when
// they quote a value; an upstream bent on smuggling a value out can always invent another one.

type Escape = (unit: number) => boolean;

const hex = (n: number, width: number, upper: boolean) => {
  const h = n.toString(16).padStart(width, "0");
  return upper ? h.toUpperCase() : h;
};

/** JSON string content with `\uXXXX` for every UTF-16 unit `escape` selects (and the mandatory escapes). */
function escapeJson(s: string, escape: Escape, upper: boolean): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const u = s.charCodeAt(i);
    if (escape(u) || u < 0x20) out += `\\u${hex(u, 4, upper)}`;
    else if (u === 0x22) out += '\\"';
    else if (u === 0x5c) out += "\\\\";
    else out += s[i];
  }
  return out;
}

/** Percent-encoding of the UTF-8 bytes, keeping the ASCII characters `keep` allows. */
function escapeUrl(s: string, keep: RegExp, upper: boolean, spaceAsPlus: boolean): string {
  let out = "";
  for (const byte of Buffer.from(s, "utf8")) {
    const ch = String.fromCharCode(byte);
    if (byte < 0x80 && keep.test(ch)) out += ch;
    else if (byte === 0x20 && spaceAsPlus) out += "+";
    else out += `%${hex(byte, 2, upper)}`;
  }
  return out;
}

const nonAscii: Escape = (u) => u >= 0x7f; // Python's json.dumps (ensure_ascii)
const goHtmlSafe: Escape = (u) => u === 0x3c || u === 0x3e || u === 0x26 || u === 0x2028 || u === 0x2029; // Go's encoding/json
const dotnetDefault: Escape = (u) => nonAscii(u) || "<>&'\"+`".includes(String.fromCharCode(u)); // .NET System.Text.Json
const UNRESERVED = /[A-Za-z0-9\-._~]/; // RFC 3986
const FORM_SAFE = /[A-Za-z0-9\-._*]/; // Java URLEncoder, PHP urlencode

const HTML: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Every form of each needle, longest first so a form containing another is replaced whole. */
export function echoForms(needles: readonly string[]): string[] {
  const out = new Set<string>();
  for (const n of needles) {
    if (!n) continue;
    const json = JSON.stringify(n).slice(1, -1);
    out.add(n).add(json).add(json.replaceAll("/", "\\/"));
    for (const upper of [false, true]) {
      out.add(escapeJson(n, nonAscii, upper)).add(escapeJson(n, goHtmlSafe, upper)).add(escapeJson(n, dotnetDefault, upper));
      out.add(escapeUrl(n, UNRESERVED, upper, false)).add(escapeUrl(n, FORM_SAFE, upper, true));
    }
    try {
      out.add(encodeURIComponent(n));
    } catch {} // a lone surrogate has no URL form
    const html = n.replace(/[&<>"']/g, (c) => HTML[c]!);
    out.add(html).add(html.replaceAll("&#39;", "&#x27;"));
  }
  return [...out].sort((a, b) => b.length - a.length);
}
