// The echo redactor's decoding view and forms (architecture.md D22): every form a server quotes a value
// in is found, in a whole body and streamed in any chunking, linear and bounded; text around it
// survives, and near misses (11 characters of a value, other values) pass untouched.

import { describe, expect, test } from "bun:test";
import { viewOf } from "../../../src/egress/echo-scanner.ts";
import { createRedactor, Needles, redactWhole } from "../../../src/egress/redact.ts";
import { redactHeaders, redactText } from "../../../src/egress/redact-headers.ts";

const VALUE = "sk-live-4eC39HqLyjWDarjtT1zdp7dc9Fz2";
const needles = new Needles([VALUE]);
const enc = (s: string) => new Uint8Array(Buffer.from(s, "utf8"));
const text = (b: Uint8Array) => Buffer.from(b).toString("latin1");
const whole = (body: Uint8Array | string, n: Needles = needles) => text(redactWhole(typeof body === "string" ? enc(body) : body, n));

/** Base64 of `prefix + value` (the value at the prefix's alignment), padded or not. */
const b64 = (s: string, url = false, pad = true) => {
  let out = Buffer.from(s, "utf8").toString(url ? "base64url" : "base64");
  if (url && pad) out += "=".repeat((4 - (out.length % 4)) % 4);
  return pad ? out : out.replace(/=+$/, "");
};

function streamed(body: Uint8Array, cuts: number[], n: Needles = needles): string {
  const r = createRedactor(n);
  const parts: Uint8Array[] = [];
  let at = 0;
  for (const c of [...cuts, body.length].sort((a, b) => a - b)) {
    parts.push(r.push(body.slice(at, c)));
    at = c;
  }
  parts.push(r.flush());
  return text(Buffer.concat(parts));
}

const FORMS: [string, string][] = [
  ["raw", VALUE],
  ["upper-cased", VALUE.toUpperCase()],
  ["case flipped", [...VALUE].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join("")],
  ["hex", Buffer.from(VALUE).toString("hex")],
  ["HEX", Buffer.from(VALUE).toString("hex").toUpperCase()],
  ["every character %XX", [...Buffer.from(VALUE)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("")],
  ["every other character %xx", [...VALUE].map((c, i) => (i % 2 ? `%${c.charCodeAt(0).toString(16)}` : c)).join("")],
  ["one character &#NN;", `${VALUE.slice(0, 5)}&#${VALUE.charCodeAt(5)};${VALUE.slice(6)}`],
  ["one character &#xHH;", `${VALUE.slice(0, 5)}&#x${VALUE.charCodeAt(5).toString(16)};${VALUE.slice(6)}`],
  ["all &#NNN; with zeros", [...VALUE].map((c) => `&#000${c.charCodeAt(0)};`).join("")],
  [
    "all &#XHH without ;",
    [...VALUE]
      .map((c) => `&#X${c.charCodeAt(0).toString(16)}`)
      .join(" ")
      .replaceAll(" ", ""),
  ],
  ["one \\u escape", `${VALUE.slice(0, 7)}\\u${VALUE.charCodeAt(7).toString(16).padStart(4, "0")}${VALUE.slice(8)}`],
  ["all \\u escapes, upper hex", [...VALUE].map((c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`).join("")],
  ["soft hyphen inside", `${VALUE.slice(0, 10)}\u00ad${VALUE.slice(10)}`],
  ["zero-width characters everywhere", [...VALUE].join("\u200b\u200c\u200d\u2060\ufeff")],
  ["soft hyphen as an entity", [...VALUE].join("&#173;")],
  ["&shy; and &shy without ';' (legacy) between characters", [...VALUE].map((c, i) => c + (i % 2 ? "&shy" : "&shy;")).join("")],
  ["named invisible characters", [...VALUE].join("&ZeroWidthSpace;&zwnj;&NoBreak;")],
  ["bidi controls, variation selectors, Mongolian and Hangul fillers", [...VALUE].join("\u2066\u202c\ufe0f\u180b\u061c\u3164")],
  ["every character %uXXXX (JavaScript escape(), IIS)", [...VALUE].map((c) => `%u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`).join("")],
  ["every character \\u{XX} (ES2015)", [...VALUE].map((c) => `\\u{${c.charCodeAt(0).toString(16)}}`).join("")],
  ["every character octal \\ooo", [...VALUE].map((c) => `\\${c.charCodeAt(0).toString(8).padStart(3, "0")}`).join("")],
  ["punctuation as named references", VALUE.replaceAll("-", "&#45;").replaceAll("_", "&lowbar;")],
  ["masked key: first 12 then ...", `${VALUE.slice(0, 12)}...`],
  ["last 12", VALUE.slice(-12)],
  ["12 from the middle", VALUE.slice(11, 23)],
];

describe("forms found in a body", () => {
  for (const [name, form] of FORMS) {
    test(name, () => {
      const out = whole(`{"error":"bad key ${form} given"}`);
      expect(out.startsWith('{"error":"bad key ')).toBe(true);
      expect(out.endsWith(' given"}')).toBe(true);
      expect(out).toContain("[redacted]");
      expect(out).not.toContain(VALUE.slice(0, 12));
    });
  }

  for (const prefix of ["", "Bearer ", "user:", "x", "xy"]) {
    for (const url of [false, true]) {
      for (const pad of [false, true]) {
        test(`base64${url ? "url" : ""}${pad ? "" : " unpadded"} of "${prefix}<value>"`, () => {
          const encoded = b64(prefix + VALUE, url, pad);
          const out = whole(`blob=${encoded};`);
          expect(out).toContain("[redacted]");
          // what is left of the encoding decodes to no 12 characters of the value
          for (const piece of out.split(/\[redacted\]|[=;]/))
            expect(Buffer.from(piece, url ? "base64url" : "base64").toString("latin1")).not.toMatch(/sk-live-4eC3|9Fz2/);
        });
      }
    }
  }

  test("base64 of the value URL-encoded (an OAuth client_secret_basic header: base64 of urlencode(id):urlencode(secret))", () => {
    const secret = "s3cr/t+v4lue~with=signs/and+more";
    const header = `Basic ${Buffer.from(`client%20id:${encodeURIComponent(secret)}`).toString("base64")}`;
    const out = whole(header, new Needles([secret]));
    expect(out).toContain("[redacted]");
    for (const piece of out.replace("Basic ", "").split("[redacted]"))
      expect(decodeURIComponent(Buffer.from(piece, "base64").toString("latin1"))).not.toContain(secret.slice(0, 12));
  });

  test("UTF-16LE and UTF-16BE", () => {
    for (const bytes of [Buffer.from(`id: ${VALUE}!`, "utf16le"), Buffer.from(`id: ${VALUE}!`, "utf16le").swap16()]) {
      const out = Buffer.from(redactWhole(new Uint8Array(bytes), needles));
      expect(out.toString("latin1")).toContain("[redacted]");
      expect(out.includes(Buffer.from(VALUE.slice(0, 6), "utf16le"))).toBe(false);
    }
  });

  test("near misses pass untouched: 11 characters, another value, the value's prefix alone", () => {
    const body = `a ${VALUE.slice(0, 11)} b ${VALUE.slice(-11)} c sk-live-0000000000000000 d`;
    expect(whole(body)).toBe(body);
  });

  test("two echoes side by side are two redactions; overlapping windows one", () => {
    expect(whole(`<${VALUE}${VALUE}>`)).toBe("<[redacted][redacted]>");
    expect(whole(`<${VALUE}>`)).toBe("<[redacted]>");
  });

  test("a short value is found whole (its own window), case-insensitively", () => {
    const short = new Needles(["hunter2"]);
    expect(whole("pw=HUNTER2; x=hunter", short)).toBe("pw=[redacted]; x=hunter");
    expect(whole("aHVudGVyMg==", short)).toBe("[redacted]g=="); // base64: 9 whole characters
    expect(whole("68756e74657232", short)).toBe("[redacted]"); // hex
  });

  test("a value holding an escape is found escaped once more", () => {
    const odd = new Needles(["pa%41ss-word-1234"]);
    expect(whole("x pa%2541ss-word-1234 y", odd)).toBe("x [redacted] y");
    expect(whole("x pa%41ss-word-1234 y", odd)).toBe("x [redacted] y");
  });

  test("preserveLength keeps offsets", () => {
    const body = enc(`0123456789${VALUE}abcdef`);
    const out = redactWhole(body, needles, { preserveLength: true });
    expect(out.length).toBe(body.length);
    expect(text(out).slice(0, 10)).toBe("0123456789");
    expect(text(out).slice(-6)).toBe("abcdef");
    expect(text(out)).not.toContain(VALUE.slice(0, 12));
  });
});

describe("UTF-16 text", () => {
  for (const [order, bom] of [
    ["le", false],
    ["be", false],
    ["bom", true],
  ] as const) {
    test(`a match is replaced by "[redacted]" in UTF-16 (${order}), on whole code units`, () => {
      const encode = (s: string) => (order === "be" ? Buffer.from(s, "utf16le").swap16() : Buffer.from(s, "utf16le"));
      const body = Buffer.concat([bom ? Buffer.from([0xff, 0xfe]) : Buffer.alloc(0), encode(`id: ${VALUE.slice(5)} ok \u00e9`)]);
      for (const cuts of [[], [1], [7, 8, 9], Array.from({ length: body.length }, (_, i) => i)]) {
        const r = createRedactor(needles, { utf16: order });
        const parts: Uint8Array[] = [];
        let at = 0;
        for (const c of [...cuts, body.length]) parts.push(r.push(body.subarray(at, c))), (at = c);
        parts.push(r.flush());
        const out = Buffer.concat(parts);
        expect(out.length % 2).toBe(0);
        const text = order === "be" ? Buffer.from(out).swap16().toString("utf16le") : out.toString("utf16le");
        expect(text).toBe(`${bom ? "\ufeff" : ""}id: [redacted] ok \u00e9`);
      }
    });
  }
});

describe("streaming", () => {
  test("every chunking gives what the whole body gives", () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32;
    for (let round = 0; round < 200; round++) {
      const [, form] = FORMS[round % FORMS.length]!;
      const body = enc(`{"a":"${"x".repeat(Math.floor(rnd() * 30))}${form}%zz&#;\\q${form.slice(0, 7)}"}`);
      const cuts = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => Math.floor(rnd() * body.length));
      expect(streamed(body, cuts)).toBe(whole(body));
    }
  });

  test("a byte at a time", () => {
    for (const [, form] of FORMS) {
      const body = enc(`[${form}]`);
      expect(
        streamed(
          body,
          Array.from({ length: body.length }, (_, i) => i),
        ),
      ).toBe(whole(body));
    }
  });

  test("a tail that is no part of a value is emitted at once (SSE)", () => {
    const r = createRedactor(needles);
    expect(text(r.push(enc('data: {"t":"hi"}\n\n')))).toBe('data: {"t":"hi"}\n\n');
  });

  test("what is held back stays small: long runs of invisible characters, an endless repeated value", () => {
    const r = createRedactor(needles);
    let out = 0;
    for (let i = 0; i < 2000; i++) out += r.push(enc("\u200b".repeat(100))).length;
    expect(out).toBeGreaterThan(2000 * 300 - 4096);
    const r2 = createRedactor(needles);
    let held = 0;
    let emitted = 0;
    for (let i = 0; i < 10_000; i++) {
      const chunk = enc(VALUE);
      held += chunk.length;
      const o = r2.push(chunk);
      emitted += o.length;
      if (o.length) held = 0;
      expect(held).toBeLessThan(128 * 1024);
    }
    expect(text(r2.flush())).not.toContain(VALUE.slice(0, 12));
    expect(emitted).toBeGreaterThan(0);
  });
});

describe("headers", () => {
  test("a value split over two or three lines of one name is redacted in each", () => {
    for (const parts of [2, 3]) {
      const size = Math.ceil(VALUE.length / parts);
      const lines: [string, string][] = Array.from({ length: parts }, (_, i) => ["x-echo", VALUE.slice(i * size, (i + 1) * size)]);
      const out = redactHeaders([["content-type", "text/plain"], ...lines], needles);
      expect(out[0]).toEqual(["content-type", "text/plain"]);
      expect(out.map(([, v]) => v).join("")).not.toContain(VALUE.slice(0, 4));
    }
  });

  test("lines of one name with other lines between them, and the items of one folded line", () => {
    const [a, b, c] = [VALUE.slice(0, 10), VALUE.slice(10, 20), VALUE.slice(20)];
    const interleaved = redactHeaders(
      [
        ["x-echo", a],
        ["x-pad", "1"],
        ["x-echo", b],
        ["x-pad", "2"],
        ["x-echo", c],
      ],
      needles,
    );
    expect(interleaved.filter(([k]) => k === "x-pad")).toEqual([
      ["x-pad", "1"],
      ["x-pad", "2"],
    ]);
    expect(interleaved.map(([, v]) => v).join("")).not.toContain(VALUE.slice(0, 4));
    const folded = redactHeaders([["x-echo", `you sent: ${a}, ${b}, ${c}`]], needles);
    expect(folded[0]![1]).toBe("you sent: [redacted], [redacted], [redacted]");
  });

  test("an unrelated header next to an echo keeps its value", () => {
    const out = redactHeaders(
      [
        ["x-a", `k=${VALUE}`],
        ["x-b", "plain"],
      ],
      needles,
    );
    expect(out).toEqual([
      ["x-a", "k=[redacted]"],
      ["x-b", "plain"],
    ]);
  });

  test("redactText reads escapes and case in a reason phrase", () => {
    expect(redactText(`Bad ${VALUE.toUpperCase()} key`, needles)).toBe("Bad [redacted] key");
  });
});

describe("the view", () => {
  test("decodes each escape once, folds case, drops invisible characters", () => {
    expect(text(viewOf(enc("A%41&#66;&#x43;\\u0044\\x45&amp;\u00adZ%2541")))).toBe("aabcde&z%41");
  });
  test("leaves malformed escapes as text", () => {
    expect(text(viewOf(enc("%4 %zz &# &#x; &bogus; \\q \\u12")))).toBe("%4 %zz &# &#x; &bogus; \\q \\u12");
  });
  test("joins surrogate pairs and reads a lone one as U+FFFD", () => {
    expect(Buffer.from(viewOf(enc("\\ud83d\\ude00"))).toString("utf8")).toBe("😀");
    expect(Buffer.from(viewOf(enc("\\ud83dx"))).toString("utf8")).toBe("\ufffdx");
  });
});
