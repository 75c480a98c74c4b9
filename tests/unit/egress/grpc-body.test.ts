// gRPC response bodies on an injected call: each length-prefixed message is read whole (however the
// bytes are split), decoded when compressed, redacted and re-framed with its new length; what the
// broker cannot decode or frame fails closed. A Content-Encoding over the whole body is refused.
// The same for gRPC-Web (its trailer frame scanned as header text) and Connect streaming; a
// per-message codec on an answer not read as messages is refused.

import { describe, expect, test } from "bun:test";
import { deflateSync, gzipSync } from "node:zlib";
import { UndecodableResponse } from "../../../src/errors.ts";
import { createGrpcRedactor, messageFraming, refuseGrpcContentCoding, refuseUnscannedMessageCoding } from "../../../src/egress/grpc-body.ts";

const SECRET = "sk-live-grpc-0123456789";

function frame(message: Uint8Array, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(message.byteLength, 1);
  return Buffer.concat([head, message]);
}

function messages(bytes: Uint8Array): string[] {
  const out: string[] = [];
  const b = Buffer.from(bytes);
  for (let at = 0; at < b.byteLength; ) {
    expect(b[at]).toBe(0); // always sent uncompressed
    const len = b.readUInt32BE(at + 1);
    out.push(b.subarray(at + 5, at + 5 + len).toString());
    at += 5 + len;
  }
  return out;
}

function run(body: Buffer, encoding?: string, slice = body.byteLength): string[] {
  const r = createGrpcRedactor([SECRET], encoding);
  const parts: Uint8Array[] = [];
  for (let at = 0; at < body.byteLength; at += slice) parts.push(...r.push(body.subarray(at, at + slice)));
  r.end();
  return messages(Buffer.concat(parts));
}

describe("messages are redacted and re-framed", () => {
  const body = Buffer.concat([frame(Buffer.from(`token ${SECRET} here`)), frame(Buffer.from("plain")), frame(Buffer.alloc(0))]);
  for (const slice of [body.byteLength, 1, 3, 7]) {
    test(`in slices of ${slice} bytes`, () => expect(run(body, undefined, slice)).toEqual(["token [redacted] here", "plain", ""]));
  }
  test("gzip- and deflate-compressed messages are decoded, redacted and sent uncompressed", () => {
    expect(run(frame(gzipSync(`gz ${SECRET}`), true), "gzip")).toEqual(["gz [redacted]"]);
    expect(run(frame(deflateSync(`df ${SECRET}`), true), "deflate")).toEqual(["df [redacted]"]);
  });
});

describe("fails closed", () => {
  test("a compressed message in an encoding the broker cannot decode", () => {
    expect(() => run(frame(Buffer.from("xx"), true), "snappy")).toThrow(/cannot decode/);
  });
  test("a body that ends inside a message", () => {
    const cut = frame(Buffer.from("abcdef")).subarray(0, 8);
    expect(() => run(cut)).toThrow(/ended inside a message/);
  });
  test("an unknown flag, or a message over the scanned size", () => {
    const bad = frame(Buffer.from("x"));
    bad[0] = 2;
    expect(() => run(bad)).toThrow(/unknown flag/);
    const huge = Buffer.alloc(5);
    huge.writeUInt32BE(0xffffffff, 1);
    expect(() => run(huge)).toThrow(/exceeded/);
  });
});

describe("Content-Encoding on a gRPC response", () => {
  test("none, identity (any case, any number of lines) and empty pass", () => {
    for (const headers of [
      [],
      [["content-encoding", "identity"]],
      [["content-encoding", " Identity "]],
      [
        ["content-encoding", "identity"],
        ["content-encoding", ""],
      ],
    ] as [string, string][][]) {
      expect(() => refuseGrpcContentCoding([["content-type", "application/grpc"], ...headers])).not.toThrow();
    }
  });

  test("any other coding is refused with the 502 for undecodable bodies, quoting no upstream text", () => {
    const hostile = `x-${SECRET}`;
    for (const coding of ["deflate", "gzip", "br", "zstd", "identity, deflate", hostile]) {
      let caught: unknown;
      try {
        refuseGrpcContentCoding([
          ["content-type", "application/grpc"],
          ["content-encoding", coding],
        ]);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(UndecodableResponse);
      expect((caught as UndecodableResponse).status).toBe(502);
      expect((caught as Error).message.includes(SECRET)).toBe(false);
    }
    // A second header line counts as much as the first.
    expect(() =>
      refuseGrpcContentCoding([
        ["content-encoding", "identity"],
        ["content-encoding", "deflate"],
      ]),
    ).toThrow(UndecodableResponse);
  });
});

describe("gRPC-Web and Connect framings", () => {
  /** Each frame's flag and its payload as text (the redactor always sends messages uncompressed). */
  function framesOf(bytes: Uint8Array): [number, string][] {
    const b = Buffer.from(bytes);
    const out: [number, string][] = [];
    for (let at = 0; at < b.byteLength; ) {
      const len = b.readUInt32BE(at + 1);
      out.push([b[at]!, b.subarray(at + 5, at + 5 + len).toString("latin1")]);
      at += 5 + len;
    }
    return out;
  }
  function runFraming(body: Buffer, framing: "grpc-web" | "connect", encoding = "gzip", slice = 3): [number, string][] {
    const r = createGrpcRedactor([SECRET], encoding, { framing });
    const parts: Uint8Array[] = [];
    for (let at = 0; at < body.byteLength; at += slice) parts.push(...r.push(body.subarray(at, at + slice)));
    r.end();
    return framesOf(Buffer.concat(parts));
  }
  const flagged = (flag: number, payload: Uint8Array) => {
    const f = frame(payload);
    f[0] = flag;
    return f;
  };

  test("gRPC-Web: a compressed message decoded and sent uncompressed; the trailer frame (0x80) scanned as text, kept a trailer frame", () => {
    const body = Buffer.concat([flagged(1, gzipSync(`you sent ${SECRET}`)), flagged(0x80, Buffer.from(`grpc-status: 0\r\ngrpc-message: ${SECRET}\r\n`))]);
    expect(runFraming(body, "grpc-web")).toEqual([
      [0, "you sent [redacted]"],
      [0x80, "grpc-status: 0\r\ngrpc-message: [redacted]\r\n"],
    ]);
  });

  test("gRPC-Web: -bin fields of the trailer frame are decoded, and joined with the head's (8-byte pieces)", () => {
    const value = Buffer.from(`Bearer ${SECRET}`);
    const pieces = Array.from({ length: Math.ceil(value.length / 8) }, (_, i) => value.subarray(i * 8, i * 8 + 8));
    const half = Math.ceil(pieces.length / 2);
    const head = pieces.slice(0, half).map((bytes) => ({ name: "x-split-bin", bytes }));
    const text = `grpc-status: 0\r\n${pieces
      .slice(half)
      .map((p) => `x-split-bin: ${p.toString("base64")}\r\n`)
      .join("")}`;
    const r = createGrpcRedactor([SECRET], undefined, { framing: "grpc-web", head });
    const out = framesOf(Buffer.concat(r.push(flagged(0x80, Buffer.from(text)))));
    expect(out.length).toBe(1);
    expect(out[0]![0]).toBe(0x80);
    const tail = [...out[0]![1].matchAll(/x-split-bin: (\S*)/g)].map((m) => Buffer.from(m[1]!, "base64"));
    expect(tail.length).toBe(pieces.length - half);
    const joined = Buffer.concat([...pieces.slice(0, half), ...tail]).toString("latin1");
    expect(Array.from({ length: SECRET.length - 11 }, (_, i) => SECRET.slice(i, i + 12)).some((w) => joined.includes(w))).toBe(false);
  });

  test("Connect: compressed envelopes (flag 1), and a compressed end-of-stream (flag 3), decoded; end-of-stream kept (flag 2)", () => {
    const body = Buffer.concat([
      flagged(1, gzipSync(JSON.stringify({ echoed: SECRET }))),
      flagged(3, gzipSync(JSON.stringify({ error: { message: SECRET } }))),
    ]);
    expect(runFraming(body, "connect")).toEqual([
      [0, '{"echoed":"[redacted]"}'],
      [2, '{"error":{"message":"[redacted]"}}'],
    ]);
  });

  test("flag bits a framing does not define fail closed", () => {
    expect(() => runFraming(flagged(0x02, Buffer.from("x")), "grpc-web")).toThrow(/unknown flag/);
    expect(() => runFraming(flagged(0x80, Buffer.from("x")), "connect")).toThrow(/unknown flag/);
    const r = createGrpcRedactor([SECRET], undefined);
    expect(() => r.push(flagged(0x80, Buffer.from("x")))).toThrow(/unknown flag/);
  });

  test("which Content-Types are read as messages", () => {
    const framing = (ct: string, extra: [string, string][] = []) => messageFraming([["content-type", ct], ...extra]);
    expect(framing("application/grpc")).toBe("grpc");
    expect(framing("application/grpc+proto", [["content-encoding", "gzip"]])).toBe("grpc"); // refused then, by refuseGrpcContentCoding
    expect(framing("application/grpc-web+proto")).toBe("grpc-web");
    expect(framing("Application/GRPC-Web")).toBe("grpc-web");
    expect(framing("application/connect+json")).toBe("connect");
    // Compressed as a whole by an HTTP proxy: the ordinary (decoding) scan, where a per-message codec is refused.
    expect(framing("application/grpc-web+proto", [["content-encoding", "gzip"]])).toBeUndefined();
    for (const ct of ["application/grpc-web-text", "application/grpcx", "text/plain", "application/json", "application/connect"])
      expect(framing(ct)).toBeUndefined();
  });
});

describe("a per-message codec on an answer not read as messages", () => {
  test("grpc-encoding or connect-content-encoding other than identity (any case, any line) is refused, quoting nothing", () => {
    for (const headers of [
      [["grpc-encoding", "gzip"]],
      [["Grpc-Encoding", "GZIP"]],
      [["connect-content-encoding", "gzip"]],
      [
        ["grpc-encoding", "identity"],
        ["grpc-encoding", `x-${SECRET}`],
      ],
    ] as [string, string][][]) {
      let caught: unknown;
      try {
        refuseUnscannedMessageCoding([["content-type", "text/plain"], ...headers]);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(UndecodableResponse);
      expect((caught as Error).message.includes(SECRET)).toBe(false);
    }
  });

  test("none, or identity: passes", () => {
    for (const headers of [[], [["grpc-encoding", "identity"]], [["connect-content-encoding", " Identity "]]] as [string, string][][]) {
      expect(() => refuseUnscannedMessageCoding([["content-type", "text/plain"], ...headers])).not.toThrow();
    }
  });
});
