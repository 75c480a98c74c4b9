// An agent using the AWS SDK for JavaScript with placeholder keys, run by aws-sigv4-ranges.test.ts
// through the broker's tunnel (HTTPS_PROXY): ranged GetObject calls on one object. Arguments: the
// endpoint, bucket, key and a JSON array of Range values. Prints one JSON line per range with what
// came back (status fields and the body's length and SHA-256, never the body).

import { GetObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { FetchHttpHandler } from "@smithy/fetch-http-handler";
import { createHash } from "node:crypto";

const [endpoint, Bucket, Key, ranges] = process.argv.slice(2) as [string, string, string, string];
// Bun's node:https ignores HTTPS_PROXY; its fetch honours it (and NODE_EXTRA_CA_CERTS).
const client = new S3Client({ region: "us-east-1", endpoint, forcePathStyle: true, requestHandler: new FetchHttpHandler() });

for (const Range of JSON.parse(ranges) as string[]) {
  const got = await client.send(new GetObjectCommand({ Bucket, Key, Range }));
  const bytes = await got.Body!.transformToByteArray();
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  console.log(
    JSON.stringify({
      range: Range,
      status: got.$metadata.httpStatusCode,
      contentRange: got.ContentRange,
      contentLength: got.ContentLength,
      length: bytes.byteLength,
      sha256,
    }),
  );
}
