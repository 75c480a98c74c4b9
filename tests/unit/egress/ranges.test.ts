// Ranged reads on injected requests (src/egress/ranges.ts): the Range header read and widened, a
// widened 206 checked against what was asked, masked in place and cut back to the agent's bytes,
// and the partial answers the broker refuses. End to end: tests/e2e/ranges-echo.test.ts and
// tests/e2e/aws-sigv4-ranges.test.ts.

import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { UndecodableResponse } from "../../../src/errors.ts";
import type { Answer } from "../../../src/egress/answer.ts";
import type { HeaderList } from "../../../src/http/http1.ts";
import { createRedactor, redactWhole, type Redactor } from "../../../src/egress/redact.ts";
import {
  answerRange,
  CONTEXT_BYTES,
  formatRange,
  isByteRange,
  isPartialAnswer,
  maskAndCut,
  parseContentRange,
  parseSingleRange,
  PART_NUMBER_REFUSAL,
  planCut,
  planRanges,
  widenRange,
  WIDEST_MATCH_BYTES,
  type ByteRange,
} from "../../../src/egress/ranges.ts";

const K = CONTEXT_BYTES;
const SECRET = "sk-unit-Zq8Vw3Xj-Rk5Pm2Ty7Ln4Hb9Gd6";

describe("the agent's Range", () => {
  test.each([
    ["bytes=0-99", { kind: "span", first: 0, last: 99 }],
    ["bytes=81-81", { kind: "span", first: 81, last: 81 }],
    ["BYTES = 5 - 9 ", { kind: "span", first: 5, last: 9 }],
    ["bytes=100-", { kind: "from", first: 100 }],
    ["bytes=-500", { kind: "suffix", length: 500 }],
    ["bytes=-0", { kind: "suffix", length: 0 }],
  ])("%s is one range", (value, range) => {
    expect(parseSingleRange(value)).toEqual(range as ByteRange);
  });

  test.each([
    "bytes=0-1,3-4",
    "bytes=0-1, 3-4",
    "bytes=9-5",
    "items=0-1",
    "bytes=-",
    "bytes=",
    "bytes=1-2-3",
    "bytes=a-b",
    `bytes=0-${"9".repeat(16)}`,
    "bytes 0-1",
  ])("%s is not (several, reversed, another unit or malformed)", (value) => expect(parseSingleRange(value)).toBeUndefined());

  test("widened by k on each side, never before byte 0, and written back", () => {
    expect(formatRange(widenRange({ kind: "span", first: K + 10_000, last: K + 10_099 }, K))).toBe(`bytes=10000-${2 * K + 10_099}`);
    expect(formatRange(widenRange({ kind: "span", first: 81, last: 100 }, K))).toBe(`bytes=0-${100 + K}`);
    expect(formatRange(widenRange({ kind: "from", first: K + 5000 }, K))).toBe("bytes=5000-");
    expect(formatRange(widenRange({ kind: "from", first: 3 }, K))).toBe("bytes=0-");
    expect(formatRange(widenRange({ kind: "suffix", length: 20 }, K))).toBe(`bytes=-${20 + K}`);
  });
});

describe("what goes upstream", () => {
  const agent: HeaderList = [
    ["Accept", "*/*"],
    ["Range", "bytes=81-100"],
    ["If-Range", '"etag-1"'],
    ["Request-Range", "bytes=81-100"],
    ["authorization", "Bearer x"],
  ];

  test("every auth type but aws_sigv4: Range, If-Range and Request-Range are dropped", () => {
    for (const type of ["bearer", "basic", "header", "query", "path", "oauth_client_credentials"]) {
      const r = planRanges(type, agent);
      expect(r.asked).toBeUndefined();
      expect(r.upstreamHeaders(agent)).toEqual([
        ["Accept", "*/*"],
        ["authorization", "Bearer x"],
      ]);
    }
  });

  test("aws_sigv4 keeps one range, widened, and If-Range with it", () => {
    const r = planRanges("aws_sigv4", agent);
    expect(r.asked).toEqual({ kind: "span", first: 81, last: 100 });
    expect(r.upstreamHeaders(agent)).toEqual([
      ["Accept", "*/*"],
      ["If-Range", '"etag-1"'],
      ["authorization", "Bearer x"],
      ["range", `bytes=0-${100 + K}`],
    ]);
  });

  test("aws_sigv4 with several ranges, two Range lines or one it cannot read: dropped", () => {
    for (const headers of [
      [["range", "bytes=0-9,20-29"]],
      [
        ["range", "bytes=0-9"],
        ["Range", "bytes=20-29"],
      ],
      [["range", "bytes=z"]],
    ] as HeaderList[]) {
      const r = planRanges("aws_sigv4", [...headers, ["if-range", "x"]]);
      expect(r.asked).toBeUndefined();
      expect(r.upstreamHeaders([...headers, ["if-range", "x"], ["x-amz-date", "d"]])).toEqual([["x-amz-date", "d"]]);
    }
  });

  test("no Range: nothing is added", () => {
    const r = planRanges("aws_sigv4", [["accept", "*/*"]]);
    expect(r.asked).toBeUndefined();
    expect(r.upstreamHeaders([["accept", "*/*"]])).toEqual([["accept", "*/*"]]);
  });
});

describe("the context covers the scanner's widest match", () => {
  test("12 characters, each a 64-digit reference after 64 invisible ones spelt so too: found, and narrower than the context", () => {
    const zw = `&#x${"0".repeat(60)}200b;`;
    const spelt = [...SECRET.slice(0, 12)].map((c) => zw.repeat(64) + `&#x${"0".repeat(62)}${c.charCodeAt(0).toString(16)};`).join("");
    const body = Buffer.from(`..${spelt}..`, "latin1");
    const out = Buffer.from(redactWhole(body, [SECRET], { preserveLength: true }));
    expect(out.equals(body)).toBe(false); // the scanner reads it
    const changed = [...out].map((b, i) => b !== body[i]);
    const span = changed.lastIndexOf(true) - changed.indexOf(true) + 1;
    expect(span).toBeLessThanOrEqual(WIDEST_MATCH_BYTES);
    expect(CONTEXT_BYTES).toBeGreaterThanOrEqual(WIDEST_MATCH_BYTES);
  });
});

describe("which Ranges are byte ranges, which answers partial", () => {
  test.each(["bytes=0-9", "Bytes = 0-9", "BYTES=0-1,5-6", "bytes=z", "garbage", "-20", "0-9, 20-29", ""])("Range %p may be read as bytes: dropped", (value) => {
    expect(isByteRange(value)).toBe(true);
    expect(
      planRanges("bearer", [
        ["range", value],
        ["if-range", '"e"'],
      ]).upstreamHeaders([
        ["range", value],
        ["if-range", '"e"'],
      ]),
    ).toEqual([]);
  });

  test.each(["items=0-19", "rows = 5-", "0-19", " 20 - ", "0-"])("Range %p is not bytes (PostgREST rows): sent as it is, If-Range with it", (value) => {
    expect(isByteRange(value)).toBe(false);
    for (const type of ["bearer", "aws_sigv4"]) {
      const r = planRanges(type, [
        ["Range", value],
        ["If-Range", '"e"'],
      ]);
      expect(r.asked).toBeUndefined();
      expect(
        r.upstreamHeaders([
          ["Range", value],
          ["If-Range", '"e"'],
          ["accept", "*/*"],
        ]),
      ).toEqual([
        ["Range", value],
        ["If-Range", '"e"'],
        ["accept", "*/*"],
      ]);
    }
  });

  test("a rows Range next to a byte one, or a Request-Range: all dropped", () => {
    for (const headers of [
      [
        ["range", "0-19"],
        ["range", "bytes=0-9"],
      ],
      [
        ["range", "items=0-19"],
        ["request-range", "bytes=0-9"],
      ],
    ] as HeaderList[]) {
      expect(planRanges("bearer", headers).upstreamHeaders(headers)).toEqual([]);
    }
  });

  test("partial: a 206, multipart/byteranges, a Content-Range in bytes (any case); not: rows (PostgREST's 0-1/*), another unit", () => {
    expect(isPartialAnswer(206, [])).toBe(true);
    expect(isPartialAnswer(206, [["content-range", "0-24/3573458"]])).toBe(true);
    expect(isPartialAnswer(200, [["content-type", "Multipart/ByteRanges; boundary=b"]])).toBe(true);
    for (const cr of ["bytes 0-6/100", "Bytes 0-6/100", " BYTES */100", "bytes=0-6", "bytes"]) expect(isPartialAnswer(200, [["content-range", cr]])).toBe(true);
    for (const cr of ["0-1/*", "items 0-19/*", "*/100", "bytesx 0-1/2", "rows 0-1/2"]) expect(isPartialAnswer(200, [["content-range", cr]])).toBe(false);
    expect(isPartialAnswer(200, [["content-type", "application/json"]])).toBe(false);
  });
});

describe("Content-Range", () => {
  test.each([
    ["bytes 0-99/1000", { first: 0, last: 99, total: 1000 }],
    ["Bytes 5-5/6", { first: 5, last: 5, total: 6 }],
    ["bytes 10-19/*", { first: 10, last: 19, total: undefined }],
  ])("%s", (value, want) => expect(parseContentRange(value)).toEqual(want));

  test.each(["bytes 9-5/100", "bytes 0-100/100", "bytes */100", "bytes 0-9", "items 0-9/10", "bytes 0-9/10, bytes 0-1/10", "bytes -1-9/10"])(
    "%s is refused",
    (value) => expect(parseContentRange(value)).toBeUndefined(),
  );
});

describe("the cut of a widened answer", () => {
  const T = 4 * K; // an object with room for a range and its context on both sides
  const M = 2 * K; // a range in its middle
  const cutOf = (asked: ByteRange, first: number, last: number, total: number | "unknown" = T) =>
    planCut(asked, { first, last, total: total === "unknown" ? undefined : total }, K);

  test("a span in the middle, with its context", () => {
    expect(cutOf({ kind: "span", first: M, last: M + 99 }, M - K, M + 99 + K)).toEqual({
      satisfiable: true,
      skip: K,
      length: 100,
      bodyLength: 100 + 2 * K,
      contentRange: `bytes ${M}-${M + 99}/${T}`,
    });
  });

  test("near the start, past the end, from, suffix, suffix longer than the object", () => {
    expect(cutOf({ kind: "span", first: 81, last: 100 }, 0, 100 + K)).toMatchObject({ skip: 81, length: 20, contentRange: `bytes 81-100/${T}` });
    expect(cutOf({ kind: "span", first: T - 10, last: T + 500 }, T - 10 - K, T - 1)).toMatchObject({
      skip: K,
      length: 10,
      contentRange: `bytes ${T - 10}-${T - 1}/${T}`,
    });
    expect(cutOf({ kind: "from", first: T - 10_000 }, T - 10_000 - K, T - 1)).toMatchObject({ skip: K, length: 10_000 });
    expect(cutOf({ kind: "suffix", length: 20 }, T - 20 - K, T - 1)).toMatchObject({ skip: K, length: 20, contentRange: `bytes ${T - 20}-${T - 1}/${T}` });
    expect(cutOf({ kind: "suffix", length: 20 }, 0, 49, 50)).toMatchObject({ skip: 30, length: 20, contentRange: "bytes 30-49/50" });
    expect(cutOf({ kind: "suffix", length: 500 }, 0, 49, 50)).toMatchObject({ skip: 0, length: 50, contentRange: "bytes 0-49/50" });
  });

  test("an upstream that sends more context than asked is fine", () => {
    expect(cutOf({ kind: "span", first: M, last: M }, 0, T - 1)).toMatchObject({ skip: M, length: 1 });
  });

  test("a range past the end of the object: 416", () => {
    expect(cutOf({ kind: "span", first: 200, last: 300 }, 0, 99, 100)).toEqual({ satisfiable: false, contentRange: "bytes */100" });
    expect(cutOf({ kind: "from", first: 100 }, 0, 99, 100)).toEqual({ satisfiable: false, contentRange: "bytes */100" });
    expect(cutOf({ kind: "suffix", length: 0 }, 0, 99, 100)).toEqual({ satisfiable: false, contentRange: "bytes */100" });
  });

  test("less context than asked, or an unknown length: refused", () => {
    const span = { kind: "span", first: M, last: M + 99 } as const;
    expect(() => cutOf(span, M - K + 1, M + 99 + K)).toThrow(UndecodableResponse);
    expect(() => cutOf(span, M - K, M + 99 + K - 1)).toThrow(UndecodableResponse);
    expect(() => cutOf(span, M, M + 99)).toThrow(UndecodableResponse);
    expect(() => cutOf({ kind: "span", first: 81, last: 100 }, 1, 100 + K)).toThrow(UndecodableResponse);
    expect(() => cutOf({ kind: "suffix", length: 20 }, T - 20, T - 1)).toThrow(UndecodableResponse);
    expect(() => cutOf(span, M - K, M + 99 + K, "unknown")).toThrow(UndecodableResponse);
  });
});

/** A length-preserving masker for a fixed byte string (a stand-in for the scanner, to test the cutting alone). */
function fakeMasker(value: Uint8Array): Redactor {
  let held = new Uint8Array(0);
  const mask = (b: Uint8Array) => {
    const out = Buffer.from(b);
    for (let i = out.indexOf(value); i !== -1; i = out.indexOf(value, i + 1)) out.fill(0x2a, i, i + value.length);
    return out;
  };
  return {
    push(chunk) {
      const all = mask(Buffer.concat([held, chunk]));
      const keep = Math.min(all.length, value.length - 1);
      held = all.subarray(all.length - keep);
      return all.subarray(0, all.length - keep);
    },
    flush() {
      const rest = mask(held);
      held = new Uint8Array(0);
      return rest;
    },
  };
}

function runStep(step: ReturnType<typeof maskAndCut>, chunks: Uint8Array[]): Buffer {
  const out: Uint8Array[] = chunks.map((c) => step.push(c));
  out.push(step.end());
  return Buffer.concat(out);
}

function chunked(body: Uint8Array, sizes: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  for (let i = 0; at < body.length; i++) {
    const n = Math.max(1, sizes[i % sizes.length]!);
    out.push(body.subarray(at, at + n));
    at += n;
  }
  return out;
}

describe("mask and cut", () => {
  test("any range of any body, any chunking: exactly the masked bytes asked for", () => {
    const value = Buffer.from("VALUE-0123456789");
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 400 }),
        fc.nat(400),
        fc.nat(400),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 8 }),
        fc.nat(400),
        (noise, at, a, sizes, len) => {
          const body = Buffer.concat([noise.subarray(0, at), value, noise.subarray(at)]);
          const skip = a % body.length;
          const length = 1 + (len % (body.length - skip));
          const out = runStep(maskAndCut({ skip, length, bodyLength: body.length }, fakeMasker(value)), chunked(body, sizes));
          const masked = Buffer.from(body);
          for (let i = masked.indexOf(value); i !== -1; i = masked.indexOf(value, i + 1)) masked.fill(0x2a, i, i + value.length);
          expect(out.equals(masked.subarray(skip, skip + length))).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("with the broker's scanner: a range splitting the value holds none of it, and keeps its length", () => {
    const before = Buffer.alloc(5000, ".");
    const after = Buffer.alloc(5000, ".");
    const body = Buffer.concat([before, Buffer.from(`Bearer ${SECRET}`), after]);
    const at = before.length + "Bearer ".length;
    for (const [first, last] of [
      [at - 10, at + 9],
      [at + 10, at + 29],
      [at + 5, at + 5],
      [at, at + SECRET.length - 1],
    ] as const) {
      const got = { first: Math.max(0, first - K), last: Math.min(body.length - 1, last + K), total: body.length };
      const cut = planCut({ kind: "span", first, last }, got, K);
      if (!cut.satisfiable) throw new Error("unsatisfiable");
      const out = runStep(maskAndCut(cut, createRedactor([SECRET], { preserveLength: true })), chunked(body.subarray(got.first, got.last + 1), [7, 100, 3]));
      expect(out.length).toBe(last - first + 1);
      for (let i = first; i <= last; i++) if (i < at || i >= at + SECRET.length) expect(out[i - first]).toBe(body[i]);
      expect(pieces(out.toString("latin1"))).toEqual([]);
    }
  });

  test("a body longer or shorter than its Content-Range, or a masker that moves bytes: refused", () => {
    const body = Buffer.alloc(100, "a");
    expect(() => runStep(maskAndCut({ skip: 10, length: 10, bodyLength: 99 }, fakeMasker(Buffer.from("zz"))), [body])).toThrow(UndecodableResponse);
    expect(() => runStep(maskAndCut({ skip: 10, length: 10, bodyLength: 101 }, fakeMasker(Buffer.from("zz"))), [body])).toThrow(UndecodableResponse);
    const shrinking: Redactor = { push: (c) => c.subarray(1), flush: () => new Uint8Array(0) };
    expect(() => runStep(maskAndCut({ skip: 10, length: 10, bodyLength: 100 }, shrinking), [body])).toThrow(UndecodableResponse);
    const growing: Redactor = { push: (c) => Buffer.concat([c, Buffer.from("x")]), flush: () => new Uint8Array(0) };
    expect(() => runStep(maskAndCut({ skip: 10, length: 10, bodyLength: 100 }, growing), [body])).toThrow(UndecodableResponse);
  });
});

/** Every 4-character piece of SECRET found in `text`. */
function pieces(text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i + 4 <= SECRET.length; i++) if (text.includes(SECRET.slice(i, i + 4))) found.push(SECRET.slice(i, i + 4));
  return found;
}

describe("answers", () => {
  const done = () => {};
  const bytes = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));
  const answer = (status: number, headers: HeaderList, body: Answer["body"] = bytes("partial")): Answer => ({ status, statusText: "", headers, body });
  const dropped = planRanges("bearer", [["range", "bytes=0-3"]]);
  const kept = planRanges("aws_sigv4", [["range", "bytes=20-29"]]);

  test("whole answers pass as ordinary ones", async () => {
    expect(await answerRange(dropped, answer(200, [["content-type", "text/plain"]]), [SECRET], 0, done)).toBeUndefined();
    expect(await answerRange(kept, answer(200, [["content-length", "7"]]), [SECRET], 0, done)).toBeUndefined();
    expect(await answerRange(kept, answer(416, [["content-range", "bytes */10"]]), [SECRET], 0, done)).toBeUndefined();
  });

  test("a partial answer to a request sent without Range is refused, its body cancelled", async () => {
    for (const a of [
      answer(206, [["content-range", "bytes 0-6/100"]]),
      answer(200, [["content-type", "multipart/byteranges; boundary=x"]]),
      answer(200, [["content-range", "bytes 0-6/100"]]),
      answer(416, [["content-range", "bytes */100"]]),
    ]) {
      await expect(answerRange(dropped, a, [SECRET], 0, done)).rejects.toThrow(UndecodableResponse);
    }
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({ cancel: () => void (cancelled = true) });
    await expect(answerRange(dropped, answer(206, [], stream), [SECRET], 0, done)).rejects.toThrow(UndecodableResponse);
    expect(cancelled).toBe(true);
  });

  test("PostgREST's rows Content-Range on a 200: an ordinary answer", async () => {
    expect(
      await answerRange(
        dropped,
        answer(200, [
          ["content-range", "0-1/*"],
          ["range-unit", "items"],
        ]),
        [SECRET],
        0,
        done,
      ),
    ).toBeUndefined();
    expect(await answerRange(dropped, answer(200, [["content-range", "items 0-19/*"]]), [SECRET], 0, done)).toBeUndefined();
  });

  test("an S3 part-number read (206 with no Range asked): refused with its own message, quoting nothing upstream", async () => {
    for (const target of ["/bucket/key?partNumber=1", "/bucket/key?versionId=x&partNumber=2"]) {
      const r = planRanges("aws_sigv4", [["accept", "*/*"]], target);
      const err = await answerRange(r, answer(206, [["content-range", `bytes 0-6/${SECRET}`]]), [SECRET], 0, done).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UndecodableResponse);
      expect((err as Error).message).toBe(PART_NUMBER_REFUSAL);
    }
    // Without partNumber, the general message.
    const err = await answerRange(planRanges("aws_sigv4", [], "/bucket/key"), answer(206, [["content-range", "bytes 0-6/100"]]), [SECRET], 0, done).catch(
      (e: unknown) => e,
    );
    expect((err as Error).message).not.toBe(PART_NUMBER_REFUSAL);
  });

  test("a widened 206: masked, cut, Content-Range and Content-Length rewritten", async () => {
    const object = `${".".repeat(18)}${SECRET}${".".repeat(K + 5000)}`;
    const got = object.slice(0, 29 + K + 1);
    for (const body of [bytes(got), new Blob([bytes(got)]).stream()]) {
      const res = await answerRange(
        kept,
        answer(
          206,
          [
            ["content-type", "text/plain"],
            ["content-range", `bytes 0-${29 + K}/${object.length}`],
            ["content-length", String(got.length)],
          ],
          body,
        ),
        [SECRET],
        0,
        done,
      );
      expect(res?.status).toBe(206);
      expect(res?.headers).toEqual([
        ["content-type", "text/plain"],
        ["content-range", `bytes 20-29/${object.length}`],
        ["content-length", "10"],
      ]);
      const out = Buffer.from(await new Response(res!.body as BodyInit).arrayBuffer()).toString("latin1");
      expect(out.length).toBe(10);
      expect(pieces(out)).toEqual([]);
    }
  });

  test("a small range from a streamed widened body: one buffer, counted once; one that breaks off or runs long: refused, never counted", async () => {
    const object = `${".".repeat(18)}${SECRET}${".".repeat(K + 5000)}`;
    const got = bytes(object.slice(0, 29 + K + 1));
    const headers: HeaderList = [["content-range", `bytes 0-${29 + K}/${object.length}`]];
    const counts: number[] = [];
    const count = (n: number) => void counts.push(n);
    const res = await answerRange(kept, answer(206, headers, new Blob([got]).stream()), [SECRET], 0, count);
    expect(res?.body).toBeInstanceOf(Uint8Array);
    expect((res!.body as Uint8Array).byteLength).toBe(10);
    expect(counts).toEqual([got.byteLength]);
    const broken = new ReadableStream<Uint8Array>({
      start(ctrl) {
        ctrl.enqueue(got.subarray(0, 25));
        ctrl.error(new Error("upstream closed the connection mid-body"));
      },
    });
    const long = new Blob([got, bytes(`tail ${SECRET}`)]).stream();
    for (const body of [broken, long]) {
      const err = await answerRange(kept, answer(206, headers, body), [SECRET], 0, count).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UndecodableResponse);
      expect((err as Error).message.includes(SECRET)).toBe(false);
    }
    expect(counts.length).toBe(1);
  });

  test("a widened 206 the broker cannot check: compressed, not covering, several parts, malformed", async () => {
    const cr = `bytes 0-${29 + K}/${K + 10_000}`;
    for (const headers of [
      [
        ["content-range", cr],
        ["content-encoding", "gzip"],
      ],
      [["content-range", `bytes 16-${29 + K}/${K + 10_000}`]],
      [["content-range", `bytes 0-29/${K + 10_000}`]],
      [
        ["content-range", cr],
        ["content-range", cr],
      ],
      [["content-type", "multipart/byteranges; boundary=b"]],
      [["content-range", "garbage"]],
      [],
      [
        ["content-range", cr],
        ["content-length", "12"],
      ],
    ] as HeaderList[]) {
      await expect(answerRange(kept, answer(206, headers), [SECRET], 0, done)).rejects.toThrow(UndecodableResponse);
    }
  });

  test("a widened 206 for a range past the object's end: 416 with no body", async () => {
    const res = await answerRange(
      kept,
      answer(
        206,
        [
          ["content-range", "bytes 0-14/15"],
          ["etag", '"e"'],
        ],
        bytes("x".repeat(15)),
      ),
      [SECRET],
      0,
      done,
    );
    expect(res).toMatchObject({
      status: 416,
      headers: [
        ["content-range", "bytes */15"],
        ["content-length", "0"],
      ],
    });
    expect((res!.body as Uint8Array).byteLength).toBe(0);
  });

  test("a HEAD answer (no body) describes the agent's range", async () => {
    const res = await answerRange(
      kept,
      answer(
        206,
        [
          ["content-range", `bytes 0-${29 + K}/${K + 10_000}`],
          ["content-length", String(30 + K)],
        ],
        null,
      ),
      [SECRET],
      0,
      done,
    );
    expect(res).toMatchObject({
      status: 206,
      body: null,
      headers: [
        ["content-range", `bytes 20-29/${K + 10_000}`],
        ["content-length", "10"],
      ],
    });
  });
});
