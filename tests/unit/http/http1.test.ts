// Wire format: the chunked decoder, response framing (RFC 9112 §6.3), head parsing and serialising.

import { describe, expect, test } from "bun:test";
import {
  createChunkedDecoder,
  encodeChunk,
  findHeadEnd,
  LAST_CHUNK,
  parseContentLength,
  parseRequestHead,
  parseResponseHead,
  requestFraming,
  responseFraming,
  serializeHead,
  trimOws,
  WireError,
  type HeaderList,
  type ResponseHead,
} from "../../../src/http/http1.ts";

const enc = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));
const text = (parts: Uint8Array[]) => Buffer.concat(parts).toString("latin1");

/** Feeds the pieces in order; returns decoded body text, done flag and the concatenated rest. */
function decodeAll(pieces: Uint8Array[]) {
  const d = createChunkedDecoder();
  const data: Uint8Array[] = [];
  const rest: Uint8Array[] = [];
  for (const p of pieces) {
    if (d.done) {
      rest.push(p);
      continue;
    }
    const r = d.push(p);
    data.push(...r.data.map((x) => x.slice()));
    if (r.rest.byteLength) rest.push(r.rest.slice());
  }
  return { body: text(data), done: d.done, rest: text(rest) };
}

const WIRE = '5\r\nhello\r\n1;name=value;x="q"\r\n \r\nB\r\n, world!!!!\r\n0\r\nX-Trailer: a\r\nY: b\r\n\r\n';

describe("createChunkedDecoder", () => {
  test("decodes a whole message in one push", () => {
    expect(decodeAll([enc(WIRE)])).toEqual({ body: "hello , world!!!!", done: true, rest: "" });
  });

  test("split at every byte boundary gives the same result", () => {
    const bytes = enc(WIRE);
    for (let i = 0; i <= bytes.length; i++) {
      expect(decodeAll([bytes.subarray(0, i), bytes.subarray(i)])).toEqual({ body: "hello , world!!!!", done: true, rest: "" });
    }
  });

  test("one byte at a time", () => {
    const bytes = enc(WIRE);
    const pieces = [...bytes].map((b) => new Uint8Array([b]));
    expect(decodeAll(pieces)).toEqual({ body: "hello , world!!!!", done: true, rest: "" });
  });

  test("chunk extensions are ignored", () => {
    expect(decodeAll([enc("3;a=b;c\r\nabc\r\n0;last=1\r\n\r\n")]).body).toBe("abc");
  });

  test("trailers are consumed and not part of the body", () => {
    const r = decodeAll([enc("2\r\nok\r\n0\r\nDigest: x\r\nOther: y\r\n\r\n")]);
    expect(r).toEqual({ body: "ok", done: true, rest: "" });
  });

  test("bytes after the last chunk are returned as rest (next message)", () => {
    const d = createChunkedDecoder();
    const r = d.push(enc("2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"));
    expect(d.done).toBe(true);
    expect(text(r.data)).toBe("ok");
    expect(Buffer.from(r.rest).toString("latin1")).toBe("HTTP/1.1 200 OK\r\n");
  });

  test("rest is correct for every split point", () => {
    const bytes = enc("4\r\nabcd\r\n0\r\n\r\nNEXT");
    for (let i = 0; i <= bytes.length; i++) {
      expect(decodeAll([bytes.subarray(0, i), bytes.subarray(i)])).toEqual({ body: "abcd", done: true, rest: "NEXT" });
    }
  });

  test("not done until the blank line after the last chunk", () => {
    const d = createChunkedDecoder();
    d.push(enc("2\r\nok\r\n0\r\n"));
    expect(d.done).toBe(false);
    d.push(enc("\r\n"));
    expect(d.done).toBe(true);
  });

  test("bare LF is rejected in size line, after data and in trailers", () => {
    expect(() => createChunkedDecoder().push(enc("2\nok\r\n0\r\n\r\n"))).toThrow(WireError);
    expect(() => createChunkedDecoder().push(enc("2\r\nok\n0\r\n\r\n"))).toThrow(WireError);
    expect(() => createChunkedDecoder().push(enc("0\r\nA: b\n\r\n"))).toThrow(WireError);
    expect(() => createChunkedDecoder().push(enc("0\r\n\n"))).toThrow(WireError);
  });

  test("bad sizes are rejected", () => {
    for (const bad of ["\r\n", "g\r\n", "-1\r\n", "+5\r\n", " 5\r\n", "5 \r\n", "0x5\r\n", "1234567890abc\r\n", "5 ;ext\r\n"]) {
      expect(() => createChunkedDecoder().push(enc(`${bad}hello\r\n0\r\n\r\n`)), JSON.stringify(bad)).toThrow(WireError);
    }
  });

  test("chunk data must be followed by CRLF", () => {
    expect(() => createChunkedDecoder().push(enc("2\r\nokX\r\n0\r\n\r\n"))).toThrow(WireError);
  });

  test("over-long lines are refused", () => {
    expect(() => createChunkedDecoder(16).push(enc(`1;${"x".repeat(64)}\r\n`))).toThrow(WireError);
  });

  test("encodeChunk and LAST_CHUNK round-trip through the decoder", () => {
    const wire = Buffer.concat([encodeChunk(enc("abc")), encodeChunk(enc("x".repeat(300))), LAST_CHUNK]);
    expect(decodeAll([new Uint8Array(wire)])).toEqual({ body: `abc${"x".repeat(300)}`, done: true, rest: "" });
  });
});

function head(status: number, headers: HeaderList, version: "1.0" | "1.1" = "1.1"): ResponseHead {
  return { status, statusText: "", version, headers };
}

describe("responseFraming", () => {
  test("Content-Length and Transfer-Encoding together is an error", () => {
    expect(() =>
      responseFraming(
        head(200, [
          ["Content-Length", "5"],
          ["Transfer-Encoding", "chunked"],
        ]),
        "GET",
      ),
    ).toThrow(WireError);
  });

  test("duplicate differing Content-Length is an error (both repeated headers and a list)", () => {
    expect(() =>
      responseFraming(
        head(200, [
          ["Content-Length", "5"],
          ["Content-Length", "6"],
        ]),
        "GET",
      ),
    ).toThrow(WireError);
    expect(() => responseFraming(head(200, [["Content-Length", "5, 6"]]), "GET")).toThrow(WireError);
  });

  test("a transfer coding other than chunked is an error, never dropped in silence", () => {
    for (const te of ["gzip, chunked", "gzip", "chunked, chunked", "deflate,chunked", "identity"]) {
      expect(() => responseFraming(head(200, [["Transfer-Encoding", te]]), "GET"), te).toThrow(WireError);
    }
    expect(() =>
      responseFraming(
        head(200, [
          ["Transfer-Encoding", "gzip"],
          ["Transfer-Encoding", "chunked"],
        ]),
        "GET",
      ),
    ).toThrow(WireError);
    expect(responseFraming(head(200, [["Transfer-Encoding", "Chunked"]]), "GET")).toEqual({ kind: "chunked" });
  });

  test("identical repeated Content-Length is accepted", () => {
    expect(
      responseFraming(
        head(200, [
          ["Content-Length", "5"],
          ["content-length", "5"],
        ]),
        "GET",
      ),
    ).toEqual({ kind: "length", length: 5 });
    expect(responseFraming(head(200, [["Content-Length", "7, 7"]]), "GET")).toEqual({ kind: "length", length: 7 });
  });

  test("invalid Content-Length values are errors", () => {
    for (const v of ["", "-1", "+1", "1.0", "0x10", "abc", "1 2", "9999999999999999"]) {
      expect(() => parseContentLength([v]), v).toThrow(WireError);
    }
  });

  test("HEAD, 204, 304 and 1xx have no body whatever the headers say", () => {
    expect(responseFraming(head(200, [["Content-Length", "100"]]), "HEAD")).toEqual({ kind: "none" });
    expect(responseFraming(head(204, [["Content-Length", "100"]]), "GET")).toEqual({ kind: "none" });
    expect(responseFraming(head(304, [["Transfer-Encoding", "chunked"]]), "GET")).toEqual({ kind: "none" });
    expect(responseFraming(head(103, []), "GET")).toEqual({ kind: "none" });
  });

  test("chunked alone → chunked, in any case", () => {
    expect(responseFraming(head(200, [["Transfer-Encoding", "chunked"]]), "GET")).toEqual({ kind: "chunked" });
    expect(responseFraming(head(200, [["Transfer-Encoding", " CHUNKED "]]), "GET")).toEqual({ kind: "chunked" });
  });

  test("no framing headers → close; Content-Length → length", () => {
    expect(responseFraming(head(200, []), "GET")).toEqual({ kind: "close" });
    expect(responseFraming(head(200, [["content-length", "0"]]), "POST")).toEqual({ kind: "length", length: 0 });
  });
});

describe("parseResponseHead", () => {
  test("parses status line, version and headers in order with original names", () => {
    const h = parseResponseHead(enc("HTTP/1.1 404 Not Found\r\nX-A: 1\r\nx-a: 2\r\nContent-Length:3\r\n\r\n"));
    expect(h).toEqual({
      status: 404,
      statusText: "Not Found",
      version: "1.1",
      headers: [
        ["X-A", "1"],
        ["x-a", "2"],
        ["Content-Length", "3"],
      ],
    });
    expect(parseResponseHead(enc("HTTP/1.0 200\r\n\r\n"))).toMatchObject({ status: 200, statusText: "", version: "1.0" });
  });

  test("obsolete line folding is rejected", () => {
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\nX-A: one\r\n two\r\n\r\n"))).toThrow(WireError);
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\nX-A: one\r\n\ttwo\r\n\r\n"))).toThrow(WireError);
  });

  test("malformed status lines and header names are rejected", () => {
    for (const bad of ["HTTP/2 200 OK", "HTTP/1.1 20 OK", "http/1.1 200 OK", "HTTP/1.1  200 OK", "ICY 200 OK"]) {
      expect(() => parseResponseHead(enc(`${bad}\r\n\r\n`)), bad).toThrow(WireError);
    }
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n"))).toThrow(WireError);
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\n: x\r\n\r\n"))).toThrow(WireError);
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n"))).toThrow(WireError);
    expect(() => parseResponseHead(enc("HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n"))).toThrow(WireError);
  });

  test("findHeadEnd finds the blank line, resuming from an offset", () => {
    const b = enc("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody");
    expect(findHeadEnd(b)).toBe(b.length - 4);
    expect(findHeadEnd(b, 20)).toBe(b.length - 4);
    expect(findHeadEnd(enc("HTTP/1.1 200 OK\r\nA: b\r\n"))).toBe(-1);
  });
});

describe("serializeHead", () => {
  test("writes start line and headers in order, names as given", () => {
    const out = Buffer.from(
      serializeHead("GET /x?y=1 HTTP/1.1", [
        ["Host", "a.test"],
        ["x-Dup", "1"],
        ["x-Dup", "2"],
      ]),
    ).toString("latin1");
    expect(out).toBe("GET /x?y=1 HTTP/1.1\r\nHost: a.test\r\nx-Dup: 1\r\nx-Dup: 2\r\n\r\n");
  });

  test("rejects CR, LF and NUL in values and bad names", () => {
    expect(() => serializeHead("GET / HTTP/1.1", [["X", "a\r\nInjected: 1"]])).toThrow(WireError);
    expect(() => serializeHead("GET / HTTP/1.1", [["X", "a\nb"]])).toThrow(WireError);
    expect(() => serializeHead("GET / HTTP/1.1", [["X", "a\rb"]])).toThrow(WireError);
    expect(() => serializeHead("GET / HTTP/1.1", [["X", "a\0b"]])).toThrow(WireError);
    expect(() => serializeHead("GET / HTTP/1.1", [["X\r\nY", "v"]])).toThrow(WireError);
    expect(() => serializeHead("GET / HTTP/1.1", [["X Y", "v"]])).toThrow(WireError);
  });
});

/** Parses a request head and its framing, as the tunnel does; the WireError message, or the framing. */
function readRequest(wire: string): string | ReturnType<typeof requestFraming> {
  try {
    return requestFraming(parseRequestHead(enc(wire)));
  } catch (err) {
    if (err instanceof WireError) return `refused: ${err.message}`;
    throw err;
  }
}

const CONTROL_BYTES = [...Array(32).keys()]
  .filter((c) => c !== 9)
  .concat(0x7f)
  .map((c) => String.fromCharCode(c));

describe("trimOws", () => {
  test("strips SP and HTAB only", () => {
    expect(trimOws(" \t a b \t ")).toBe("a b");
    expect(trimOws("ab")).toBe("ab");
    expect(trimOws(" \t ")).toBe("");
    for (const ws of ["\v", "\f", "\xa0", "\u2028", "\ufeff", "\r", "\n", "\u3000"]) expect(trimOws(`${ws}5${ws}`)).toBe(`${ws}5${ws}`);
  });
});

describe("parseRequestHead and requestFraming: strictness", () => {
  test("a plain request parses", () => {
    expect(parseRequestHead(enc("POST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length:\t 5 \t\r\n\r\n"))).toEqual({
      method: "POST",
      target: "/a?b=1",
      version: "1.1",
      headers: [
        ["Host", "x"],
        ["Content-Length", "5"],
      ],
    });
    expect(readRequest("POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n")).toEqual({ kind: "length", length: 5 });
  });

  // String.prototype.trim would strip these and read 5; other parsers would not.
  test.each(["\x0b5", "5\x0b", "\x0c5", "\xa05", "5\xa0", "\r5", "\x005"])("Content-Length %p is refused", (value) => {
    expect(readRequest(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${value}\r\n\r\n`)).toMatch(/^refused: /);
  });

  test.each(["+5", "-5", "5 5", "5\t5", "0x5", "5.0", "", " ", "5,6", "5, 6", "1e3"])("Content-Length %p is refused", (value) => {
    expect(readRequest(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${value}\r\n\r\n`)).toMatch(/^refused: /);
  });

  test("duplicate differing Content-Length is refused; identical repeats are one length", () => {
    expect(readRequest("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n")).toBe("refused: invalid Content-Length");
    expect(readRequest("POST / HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n")).toEqual({ kind: "length", length: 5 });
  });

  test("Transfer-Encoding with Content-Length is refused, in either order and any case", () => {
    expect(readRequest("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n")).toBe(
      "refused: both Transfer-Encoding and Content-Length",
    );
    expect(readRequest("POST / HTTP/1.1\r\ncontent-length: 5\r\nTRANSFER-ENCODING: chunked\r\n\r\n")).toBe(
      "refused: both Transfer-Encoding and Content-Length",
    );
  });

  test.each(["chunked\xa0", "\xa0chunked", "chunked\x0b", "\x0cchunked", "chunked, chunked", "gzip, chunked", "chunked,", "identity"])(
    "Transfer-Encoding %p is refused",
    (value) => {
      expect(readRequest(`POST / HTTP/1.1\r\nTransfer-Encoding: ${value}\r\n\r\n`)).toMatch(/^refused: /);
    },
  );

  test("Transfer-Encoding: chunked with SP/HTAB around it is chunked", () => {
    expect(readRequest("POST / HTTP/1.1\r\nTransfer-Encoding: \t Chunked\t \r\n\r\n")).toEqual({ kind: "chunked" });
  });

  test.each(CONTROL_BYTES.map((c) => [c]))("control byte %p in the request target is refused", (c) => {
    expect(readRequest(`GET /a${c}b HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^refused: /);
    expect(readRequest(`GET /ab${c} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^refused: /);
  });

  test("HTAB, SP and doubled spaces in the request line are refused", () => {
    for (const line of [
      "GET /a\tb HTTP/1.1",
      "GET /a b HTTP/1.1",
      "GET  / HTTP/1.1",
      "GET / HTTP/1.1 ",
      "GET\t/ HTTP/1.1",
      " GET / HTTP/1.1",
      "GET / HTTP/1.2",
      "GET / http/1.1",
    ]) {
      expect(readRequest(`${line}\r\nHost: x\r\n\r\n`), JSON.stringify(line)).toMatch(/^refused: /);
    }
  });

  test.each(["G(T", "GE T", "G\x00T", "GET\x7f", "G\u00e9T", "", "G:T"])("method %p (not a token) is refused", (method) => {
    expect(readRequest(`${method} / HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^refused: /);
  });

  test.each(CONTROL_BYTES.map((c) => [c]))("control byte %p in a header name is refused", (c) => {
    expect(readRequest(`GET / HTTP/1.1\r\nX-A${c}b: v\r\n\r\n`)).toMatch(/^refused: /);
  });

  test.each(['X"A', "X(A", "X A", "X\xa0A", "X@A", "X/A", "X[A", "X{A"])("header name %p (not a token) is refused", (name) => {
    expect(readRequest(`GET / HTTP/1.1\r\n${name}: v\r\n\r\n`)).toMatch(/^refused: /);
  });

  test('a space before the colon is refused ("Content-Length : 5")', () => {
    expect(readRequest("POST / HTTP/1.1\r\nContent-Length : 5\r\n\r\n")).toMatch(/^refused: /);
  });

  test.each(CONTROL_BYTES.map((c) => [c]))("control byte %p in a header value is refused", (c) => {
    expect(readRequest(`GET / HTTP/1.1\r\nX-A: a${c}b\r\n\r\n`)).toMatch(/^refused: /);
  });

  test("HTAB and obs-text inside a header value are kept", () => {
    expect(parseRequestHead(enc("GET / HTTP/1.1\r\nX-A: a\tb\xe9\r\n\r\n")).headers).toEqual([["X-A", "a\tb\xe9"]]);
  });

  test("obsolete line folding is refused, including on the first header line", () => {
    expect(readRequest("GET / HTTP/1.1\r\nX-A: one\r\n two\r\n\r\n")).toBe("refused: obsolete header line folding");
    expect(readRequest("GET / HTTP/1.1\r\nX-A: one\r\n\ttwo\r\n\r\n")).toBe("refused: obsolete header line folding");
    expect(readRequest("POST / HTTP/1.1\r\n Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")).toBe("refused: obsolete header line folding");
  });

  test("a bare CR or LF inside the head is refused", () => {
    expect(readRequest("GET / HTTP/1.1\nHost: x\r\n\r\n")).toMatch(/^refused: /);
    expect(readRequest("GET / HTTP/1.1\r\nX-A: a\nTransfer-Encoding: chunked\r\n\r\n")).toMatch(/^refused: /);
    expect(readRequest("GET / HTTP/1.1\r\nX-A: a\rB: c\r\n\r\n")).toMatch(/^refused: /);
  });
});

describe("parseResponseHead: strictness", () => {
  test("Content-Length padded with \\v, \\f or NBSP is refused", () => {
    for (const v of ["\x0b5", "\x0c5", "\xa05", "5\xa0"]) {
      expect(() => responseFraming(parseResponseHead(enc(`HTTP/1.1 200 OK\r\nContent-Length: ${v}\r\n\r\n`)), "GET"), JSON.stringify(v)).toThrow(WireError);
    }
  });

  test("a reason phrase with a control byte is refused", () => {
    for (const c of ["\x00", "\x0b", "\x7f", "\r"]) expect(() => parseResponseHead(enc(`HTTP/1.1 200 O${c}K\r\n\r\n`))).toThrow(WireError);
    expect(parseResponseHead(enc("HTTP/1.1 200 OK\tfine \xe9\r\n\r\n")).statusText).toBe("OK\tfine \xe9");
  });
});
