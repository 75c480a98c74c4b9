// gRPC response bodies on an injected call: each length-prefixed message is read whole (however the
// bytes are split), decoded when compressed, redacted and re-framed with its new length; what the
// broker cannot decode or frame fails closed. A Content-Encoding over the whole body is refused.

import { describe, expect, test } from "bun:test";
import { deflateSync, gzipSync } from "node:zlib";
import { UndecodableResponse } from "../../../src/errors.ts";
import { createGrpcRedactor, refuseGrpcContentCoding } from "../../../src/egress/grpc-body.ts";

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
    for (const headers of [[], [["content-encoding", "identity"]], [["content-encoding", " Identity "]], [["content-encoding", "identity"], ["content-encoding", ""]]] as [string, string][][]) {
      expect(() => refuseGrpcContentCoding([["content-type", "application/grpc"], ...headers])).not.toThrow();
    }
  });

  test("any other coding is refused with the 502 for undecodable bodies, quoting no upstream text", () => {
    const hostile = `x-${SECRET}`;
    for (const coding of ["deflate", "gzip", "br", "zstd", "identity, deflate", hostile]) {
      let caught: unknown;
      try {
        refuseGrpcContentCoding([["content-type", "application/grpc"], ["content-encoding", coding]]);
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(UndecodableResponse);
      expect((caught as UndecodableResponse).status).toBe(502);
      expect((caught as Error).message.includes(SECRET)).toBe(false);
    }
    // A second header line counts as much as the first.
    expect(() => refuseGrpcContentCoding([["content-encoding", "identity"], ["content-encoding", "deflate"]])).toThrow(UndecodableResponse);
  });
});
