// Binary (`-bin`) metadata on responses to injected requests: base64 parts decoded strictly (padded or
// not, several comma-separated), scanned, and encoded again when something was replaced; a value that
// is not strict base64, or whose parts spell a value only when read as one text, fails closed: a head
// is refused, a trailer is dropped and a gRPC call's status made INTERNAL. Pieces a caller can join
// (parts, lines, names, head then trailers) are scanned joined and masked in place.

import { describe, expect, test } from "bun:test";
import { UndecodableResponse } from "../../../src/errors.ts";
import { binaryPartsOf, redactBinaryHeaders, redactBinaryTrailers, redactBinaryValue } from "../../../src/egress/binary-metadata.ts";
import type { HeaderList } from "../../../src/http/http1.ts";

const SECRET = `sk-bin-${crypto.randomUUID()}`;
const AUTH = `Bearer ${SECRET}`;
const NEEDLES = [SECRET];
const REDACTED_AUTH = "Bearer [redacted]";
const b64 = (text: string) => Buffer.from(text).toString("base64");
const unpadded = (text: string) => b64(text).replace(/=+$/, "");
/** Each part decoded as gRPC readers do (grpc-js: split on commas, trim, Buffer.from base64). */
const parts = (value: string | undefined) => (value ?? "").split(",").map((p) => Buffer.from(p.trim(), "base64").toString("latin1"));
/** The field read as one base64 text: stopping at the first "=" (Node), and skipping every "=". */
const views = (value: string) => [Buffer.from(value, "base64").toString("latin1"), Buffer.from(value.replaceAll("=", ""), "base64").toString("latin1")];
/** A boolean, so a failure prints no value. */
const holdsValue = (texts: string[]) => texts.some((t) => t.includes(SECRET));

describe("redactBinaryValue", () => {
  test("a padded part is scanned decoded and encoded again padded", () => {
    expect(AUTH.length % 3).not.toBe(0); // so the base64 has padding to keep
    const out = redactBinaryValue(b64(AUTH), NEEDLES)!;
    expect(parts(out)).toEqual([REDACTED_AUTH]);
    expect(out).toBe(b64(REDACTED_AUTH));
    expect(out.endsWith("=")).toBe(true);
  });

  test("an unpadded part stays unpadded, and a value in the middle of binary bytes is found", () => {
    const bytes = Buffer.concat([Buffer.from([0, 0xff, 1]), Buffer.from(AUTH), Buffer.from([2])]);
    const out = redactBinaryValue(bytes.toString("base64").replace(/=+$/, ""), NEEDLES)!;
    expect(out.endsWith("=")).toBe(false);
    expect(Buffer.from(out, "base64")).toEqual(Buffer.concat([Buffer.from([0, 0xff, 1]), Buffer.from(REDACTED_AUTH), Buffer.from([2])]));
  });

  test("several comma-separated parts (whitespace around them) are each scanned", () => {
    const out = redactBinaryValue(` ${b64("first")} ,\t${unpadded(AUTH)}, ${b64("last")}`, NEEDLES)!;
    expect(parts(out)).toEqual(["first", REDACTED_AUTH, "last"]);
  });

  test("nothing to replace: the very same string, whitespace and all", () => {
    const value = `${b64("first")}, ${unpadded("second")}`;
    expect(redactBinaryValue(value, NEEDLES)).toBe(value);
    expect(redactBinaryValue("", NEEDLES)).toBe("");
  });

  test("not strict base64 fails closed, even where Node's lenient decoder reads the value", () => {
    const lenient = b64(AUTH).replace(/(.{8})/g, "$1.");
    expect(Buffer.from(lenient, "base64").toString()).toBe(AUTH); // what grpc-js would have shown the agent
    for (const bad of [lenient, "abc!", "QQ=", "Q", "QQ==QQ==", "QmVh cmVy", b64(AUTH).replace(/\+|\//g, "-").replace(/=+$/, "") + "-_", "Q\u00e9Q="]) {
      expect(redactBinaryValue(bad, NEEDLES)).toBeUndefined();
    }
  });

  test("a value split across parts (none holding 12 of its characters): never passed as it came, since readers decoding the field as one text see it", () => {
    const whole = unpadded(AUTH);
    // Pieces of 12 base64 characters (9 bytes each), the first one 7 or 12 long: quad-aligned or not.
    for (const first of [12, 7]) {
      const pieces = [whole.slice(0, first), ...(whole.slice(first).match(/.{1,12}/g) ?? [])];
      const split = pieces.join(",");
      // Node reads the whole field as one text (grpc-js does so for grpc-* keys).
      expect(Buffer.from(split, "base64").toString() === AUTH).toBe(true);
      const out = redactBinaryValue(split, NEEDLES);
      // Refused, or rewritten so that no reader sees the value.
      if (out !== undefined) expect(holdsValue([...parts(out), ...views(out)])).toBe(false);
    }
  });

  test("readers stopping at the first padding and readers skipping it both see the rewritten field clean", () => {
    const out = redactBinaryValue(`${b64("A")},${b64(AUTH)}`, NEEDLES)!;
    expect(parts(out)).toEqual(["A", REDACTED_AUTH]);
    expect(holdsValue(views(out))).toBe(false);
  });
});

describe("redactBinaryHeaders (a response head)", () => {
  test("only -bin fields are decoded, whatever the name's case; the rest is left to the text scan", () => {
    const head: HeaderList = [
      ["content-type", "application/grpc"],
      ["X-Echo-Bin", b64(AUTH)],
      ["x-plain", b64(AUTH)],
    ];
    const out = redactBinaryHeaders(head, NEEDLES);
    expect(out[0]).toEqual(["content-type", "application/grpc"]);
    expect(out[1]![0]).toBe("X-Echo-Bin");
    expect(parts(out[1]![1])).toEqual([REDACTED_AUTH]);
    expect(out[2]).toEqual(["x-plain", b64(AUTH)]);
  });

  test("nothing -bin, or nothing injected: the same list", () => {
    const head: HeaderList = [["x-a", "1"]];
    expect(redactBinaryHeaders(head, NEEDLES)).toBe(head);
    const notBase64: HeaderList = [["x-echo-bin", "not base64!"]];
    expect(redactBinaryHeaders(notBase64, [])).toBe(notBase64);
  });

  test("a -bin value that is not base64 refuses the response (502), quoting neither the field nor its value", () => {
    const value = b64(AUTH).replace(/(.{8})/g, "$1.");
    let caught: unknown;
    try {
      redactBinaryHeaders([["x-sneaky-bin", value]], NEEDLES);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(UndecodableResponse);
    const e = caught as UndecodableResponse;
    expect(e.status).toBe(502);
    expect(e.message.includes(value) || e.message.includes("sneaky") || e.message.includes(SECRET)).toBe(false);
  });
});

describe("redactBinaryTrailers (after the body was passed on)", () => {
  const bad = b64(AUTH).replace(/(.{8})/g, "$1.");

  test("decodable -bin trailers are rewritten like head fields; grpc-status-details-bin too", () => {
    const out = redactBinaryTrailers(
      [
        ["grpc-status", "0"],
        ["grpc-status-details-bin", unpadded(AUTH)],
      ],
      NEEDLES,
      true,
    );
    expect(out[0]).toEqual(["grpc-status", "0"]);
    expect(parts(out[1]![1])).toEqual([REDACTED_AUTH]);
  });

  test("gRPC: one that is not base64 is dropped and the call fails INTERNAL, the upstream's status and details gone", () => {
    const out = redactBinaryTrailers(
      [
        ["grpc-status", "0"],
        ["grpc-message", "fine"],
        ["grpc-status-details-bin", b64("details")],
        ["x-note", "kept"],
        ["x-echo-bin", bad],
      ],
      NEEDLES,
      true,
    );
    expect(out.map(([k]) => k)).toEqual(["x-note", "x-broker-error", "grpc-status", "grpc-message"]);
    expect(Object.fromEntries(out)).toMatchObject({ "x-broker-error": "undecodable_response", "grpc-status": "13" });
    // grpc-message is sent as it stands: printable ASCII, no "%".
    expect(/^[\x20-\x24\x26-\x7e]+$/.test(Object.fromEntries(out)["grpc-message"]!)).toBe(true);
    expect(holdsValue(out.flat())).toBe(false);
  });

  test("a grpc-status among the trailers makes it a gRPC call whatever the content type", () => {
    const out = redactBinaryTrailers(
      [
        ["grpc-status", "0"],
        ["x-echo-bin", bad],
      ],
      NEEDLES,
      false,
    );
    expect(Object.fromEntries(out)).toEqual({ "x-broker-error": "undecodable_response", "grpc-status": "13", "grpc-message": expect.any(String) });
  });

  test("not gRPC: the field is dropped and x-broker-error says why; no gRPC status is invented", () => {
    const out = redactBinaryTrailers(
      [
        ["x-checksum", "abc"],
        ["x-echo-bin", bad],
      ],
      NEEDLES,
      false,
    );
    expect(out).toEqual([
      ["x-checksum", "abc"],
      ["x-broker-error", "undecodable_response"],
    ]);
  });
});

describe("pieces a caller can join (each shorter than 12 characters of the value)", () => {
  const value = Buffer.from(AUTH);
  const pieces = Array.from({ length: Math.ceil(value.length / 8) }, (_, i) => value.subarray(i * 8, i * 8 + 8));
  /** Any 12 consecutive characters of SECRET in the text (a boolean: a failure prints no value). */
  const holds12 = (text: string) => Array.from({ length: SECRET.length - 11 }, (_, i) => SECRET.slice(i, i + 12)).some((w) => text.includes(w));
  const decodedJoin = (values: string[]) => Buffer.concat(values.flatMap((v) => v.split(",").map((p) => Buffer.from(p.trim(), "base64")))).toString("latin1");

  test("8-byte pieces, one per line of one name: masked in place, as many pieces of the same lengths", () => {
    const head: HeaderList = pieces.map((p) => ["x-split-bin", p.toString("base64")]);
    expect(holds12(decodedJoin(head.map(([, v]) => v)))).toBe(true);
    const out = redactBinaryHeaders(head, NEEDLES);
    expect(out.length).toBe(head.length);
    expect(out.map(([, v]) => Buffer.from(v, "base64").length)).toEqual(pieces.map((p) => p.length));
    expect(holds12(decodedJoin(out.map(([, v]) => v)))).toBe(false);
  });

  test("8-byte pieces as comma-separated parts of one field, padded or not", () => {
    for (const pad of [true, false]) {
      const field = pieces.map((p) => (pad ? p.toString("base64") : p.toString("base64").replace(/=+$/, ""))).join(",");
      const out = redactBinaryValue(field, NEEDLES);
      expect(out).toBeDefined();
      expect(out!.split(",").length).toBe(pieces.length);
      expect(holds12(decodedJoin([out!]))).toBe(false);
    }
  });

  test("pieces spread over two names, in order: the join of every -bin field is scanned too", () => {
    const head: HeaderList = pieces.map((p, i) => [i % 2 ? "x-a-bin" : "x-b-bin", p.toString("base64")]);
    const out = redactBinaryHeaders(head, NEEDLES);
    expect(holds12(decodedJoin(out.map(([, v]) => v)))).toBe(false);
  });

  test("10 characters in the head, the next 10 in the trailers: the trailers' pieces are masked against the head's", () => {
    const b64s = (text: string) => (text.match(/.{1,8}/g) ?? []).map((p) => Buffer.from(p).toString("base64")).join(",");
    const head = redactBinaryHeaders([["x-split-bin", b64s(`..${SECRET.slice(0, 10)}`)]], NEEDLES);
    const trailers: HeaderList = [
      ["grpc-status", "0"],
      ["x-split-bin", b64s(`${SECRET.slice(10, 20)}..`)],
    ];
    expect(head[0]![1]).toBe(b64s(`..${SECRET.slice(0, 10)}`)); // alone, neither holds 12 characters
    expect(redactBinaryTrailers(trailers, NEEDLES, true)).toEqual(trailers);
    const out = redactBinaryTrailers(trailers, NEEDLES, true, binaryPartsOf(head));
    expect(out[0]).toEqual(["grpc-status", "0"]);
    expect(out[1]![1].split(",").length).toBe(trailers[1]![1].split(",").length);
    const joined = decodedJoin([head[0]![1], out[1]![1]]);
    expect(Array.from({ length: 9 }, (_, i) => SECRET.slice(i, i + 12)).some((w) => joined.includes(w))).toBe(false);
    expect(joined.includes(SECRET.slice(10, 20))).toBe(false);
  });
});
