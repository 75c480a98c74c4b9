// An echoed credential is caught in the forms servers quote values in: JSON escaping of common
// stacks, URL encoders of either hex case, HTML escaping. Python's own encoders produce some of the
// inputs (real encoders where the machine has them); the others follow the documented behaviour.

import { describe, expect, test } from "bun:test";
import { echoForms } from "../../../src/egress/echo-forms.ts";
import { redactWhole } from "../../../src/egress/redact.ts";

const BASIC = Buffer.from("alice:Pa55w0rd??>Secret~~").toString("base64"); // holds '+', '/' and '='
const PUNCT = "Tr0ub4dor&3!(x) 'q'<y>";
const ACCENTED = "sécrèt_välue_ÿ_12345";

const redacted = (body: string, secret: string) => Buffer.from(redactWhole(Buffer.from(body, "utf8"), [secret])).toString("utf8");

function python(code: string, arg: string): string {
  const r = Bun.spawnSync(["python3", "-c", code, arg]);
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return r.stdout.toString();
}

describe("forms real encoders produce", () => {
  const cases: [string, string][] = [
    ["json.dumps (ensure_ascii)", "import json,sys; print(json.dumps(sys.argv[1])[1:-1], end='')"],
    ["urllib quote", "import sys, urllib.parse as u; print(u.quote(sys.argv[1], safe=''), end='')"],
    ["urllib quote_plus", "import sys, urllib.parse as u; print(u.quote_plus(sys.argv[1]), end='')"],
    ["html.escape", "import sys, html; print(html.escape(sys.argv[1]), end='')"],
  ];
  for (const [name, code] of cases) {
    test(name, () => {
      for (const secret of [BASIC, PUNCT, ACCENTED]) {
        const form = python(code, secret);
        expect(redacted(`before ${form} after`, secret)).toBe("before [redacted] after");
      }
    });
  }
});

describe("documented forms of other stacks", () => {
  test("Go encoding/json escapes <, > and & as lower-case \\u", () => {
    expect(redacted('{"e":"Tr0ub4dor\\u00263!(x) \'q\'\\u003cy\\u003e"}', PUNCT)).toBe('{"e":"[redacted]"}');
  });

  test(".NET System.Text.Json escapes +, HTML-sensitive and non-ASCII characters as upper-case \\u", () => {
    const form = BASIC.replaceAll("+", "\\u002B");
    expect(form).not.toBe(BASIC);
    expect(redacted(`{"e":"${form}"}`, BASIC)).toBe('{"e":"[redacted]"}');
    expect(redacted('{"e":"s\\u00E9cr\\u00E8t_v\\u00E4lue_\\u00FF_12345"}', ACCENTED)).toBe('{"e":"[redacted]"}');
  });

  test("percent-encoding in lower-case hex, and Java's URLEncoder", () => {
    const lowerHex = encodeURIComponent(BASIC).replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase());
    expect(lowerHex).toContain("%2f");
    expect(redacted(`next=${lowerHex}`, BASIC)).toBe("next=[redacted]");
    expect(redacted("next=Tr0ub4dor%263%21%28x%29+%27q%27%3Cy%3E", PUNCT)).toBe("next=[redacted]");
  });

  test("a token's raw forms: itself, base64 and base64url at three alignments, hex, UTF-16 both ways", () => {
    const forms = echoForms(["sk-live_0123.abc"]).map((b) => Buffer.from(b).toString("latin1"));
    expect(forms[0]).toBe("sk-live_0123.abc");
    const b64 = Buffer.from("sk-live_0123.abc").toString("base64");
    expect(forms).toContain(b64.slice(0, 21)); // alignment 0: 128 bits make 21 whole characters; the 22nd mixes with what follows
    expect(forms).toContain(Buffer.from("sk-live_0123.abc").toString("hex"));
    expect(forms).toContain(Buffer.from("sk-live_0123.abc", "utf16le").toString("latin1"));
    expect(forms).toContain(Buffer.from("sk-live_0123.abc", "utf16le").swap16().toString("latin1"));
    expect(forms.length).toBe(1 + 3 + 1 + 2); // its base64url forms are its base64 ones (no + or /)
  });
});
