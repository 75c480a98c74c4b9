// An agent using the AWS SDK for JavaScript with placeholder keys, run by aws-sigv4.test.ts under
// `broker vault run`: PutObject (a string, and a stream the SDK sends aws-chunked), GetObject and
// ListObjectsV2 against the endpoint in argv[2]. Prints one JSON line with what came back.

import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { FetchHttpHandler } from "@smithy/fetch-http-handler";
import { createHash } from "node:crypto";
import { Readable } from "node:stream";

const endpoint = process.argv[2]!;
const streamBytes = Number(process.argv[3] ?? 5 * 1024 * 1024 + 123);
const Bucket = "sdk-bucket";
// Bun's node:https ignores HTTPS_PROXY; its fetch honours it (and NODE_EXTRA_CA_CERTS), as vault run expects.
const client = new S3Client({ region: "us-east-1", endpoint, forcePathStyle: true, requestHandler: new FetchHttpHandler() });

/** Deterministic bytes, produced piece by piece (never held whole). */
function pattern(total: number): { stream: Readable; sha256: () => string } {
  const hash = createHash("sha256");
  let sent = 0;
  const stream = new Readable({
    read() {
      if (sent >= total) return void this.push(null);
      const n = Math.min(64 * 1024, total - sent);
      const piece = Buffer.alloc(n);
      for (let i = 0; i < n; i++) piece[i] = (sent + i) % 251;
      sent += n;
      hash.update(piece);
      this.push(piece);
    },
  });
  return { stream, sha256: () => hash.digest("hex") };
}

const small = "hello from the SDK: ünïcødé & <xml>";
const put = await client.send(new PutObjectCommand({ Bucket, Key: "dir/small file.txt", Body: small, ContentType: "text/plain" }));
const body = pattern(streamBytes);
const putStream = await client.send(new PutObjectCommand({ Bucket, Key: "stream.bin", Body: body.stream, ContentLength: streamBytes }));
const got = await client.send(new GetObjectCommand({ Bucket, Key: "dir/small file.txt" }));
const text = await got.Body!.transformToString();
const list = await client.send(new ListObjectsV2Command({ Bucket, Prefix: "" }));
console.log(
  JSON.stringify({
    putEtag: put.ETag,
    putStreamEtag: putStream.ETag,
    streamSha256: body.sha256(),
    text,
    list: (list.Contents ?? []).map((c) => ({ key: c.Key, size: c.Size })),
  }),
);
