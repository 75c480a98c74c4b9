// SigV4 helpers that need no network: region and service read from AWS host names, and aws-chunked
// bodies decoded (and refused when malformed or not the declared length). The signatures themselves
// are checked by botocore in tests/e2e/aws-sigv4.test.ts.

import { describe, expect, test } from "bun:test";
import { decodeAwsChunked } from "../../../src/egress/aws-chunked.ts";
import { fromAwsHost } from "../../../src/egress/sigv4.ts";

describe("region and service from the host", () => {
  test.each([
    ["s3.eu-west-1.amazonaws.com", "s3", "eu-west-1"],
    ["my-bucket.s3.us-east-2.amazonaws.com", "s3", "us-east-2"],
    ["s3.amazonaws.com", "s3", "us-east-1"],
    ["bucket.s3.amazonaws.com", "s3", "us-east-1"],
    ["s3-ap-southeast-2.amazonaws.com", "s3", "ap-southeast-2"],
    ["dynamodb.us-east-1.amazonaws.com", "dynamodb", "us-east-1"],
    ["bedrock-runtime.us-west-2.amazonaws.com", "bedrock-runtime", "us-west-2"],
    ["sts.amazonaws.com", "sts", "us-east-1"],
    ["s3.cn-north-1.amazonaws.com.cn", "s3", "cn-north-1"],
  ])("%s → %s in %s", (host, service, region) => {
    expect(fromAwsHost(host)).toEqual({ service, region });
  });
  test("not an AWS host: nothing is guessed", () => {
    expect(fromAwsHost("minio.internal.example")).toBeUndefined();
    expect(fromAwsHost("amazonaws.com.evil.example")).toBeUndefined();
  });
});

const stream = (...parts: string[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(new TextEncoder().encode(p));
      c.close();
    },
  });
const text = (s: ReadableStream<Uint8Array>) => new Response(s).text();
const sig = ";chunk-signature=" + "ab".repeat(32);

describe("aws-chunked", () => {
  test("signed chunks, split anywhere, with a trailer: the plain bytes", async () => {
    const wire = `5${sig}\r\nhello\r\n6${sig}\r\n world\r\n0${sig}\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n`;
    for (let cut = 1; cut < wire.length; cut += 7) {
      expect(await text(decodeAwsChunked(stream(wire.slice(0, cut), wire.slice(cut)), 11))).toBe("hello world");
    }
  });
  test.each([
    ["a length other than the declared one", `5${sig}\r\nhello\r\n0${sig}\r\n\r\n`, 6],
    ["more data than declared", `5${sig}\r\nhello\r\n0${sig}\r\n\r\n`, 4],
    ["a malformed size line", `zz\r\nhello\r\n0\r\n\r\n`, 5],
    ["a chunk not ending in CRLF", `5${sig}\r\nhelloXX0\r\n\r\n`, 5],
    ["a body cut off mid-chunk", `5${sig}\r\nhel`, 5],
  ])("refused: %s", async (_what, wire, declared) => {
    await expect(text(decodeAwsChunked(stream(wire), declared))).rejects.toMatchObject({ code: "invalid_request" });
  });
});
