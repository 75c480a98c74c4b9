// aws_sigv4 services, verified independently: a fake S3 endpoint (tests/helpers/aws-upstream.py)
// recomputes every signature with botocore and the vault's secret key. Through /proxy and through the
// tunnel: GET, PUT, a streamed 64 MiB upload, reserved characters in the query, aws-chunked bodies;
// then the AWS SDK for JavaScript with placeholder keys under `broker vault run`. The secret key and
// the session token must appear in nothing the agent, the logs or the audit log show.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { requireBotocore, startAwsUpstream, type AwsKeys, type AwsRecord, type AwsUpstream } from "../helpers/aws-upstream.ts";
import { sourceCli } from "./cli-from-source.ts";
import { dumpResponse, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const python = requireBotocore();
const SECRET = `aws-secret-sentinel-${crypto.randomUUID()}`;
const TOKEN = `aws-session-sentinel-${crypto.randomUUID()}`;
const KEYS: AwsKeys = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: SECRET, sessionToken: TOKEN, region: "us-east-1", service: "s3" };
const BIG = 64 * 1024 * 1024;
/** What an agent's SDK sends with placeholder keys: all of it must be replaced. */
const PLACEHOLDER = {
  "x-amz-date": "20000101T000000Z",
  "x-amz-content-sha256": "0".repeat(64),
  "x-amz-security-token": "placeholder-session-token",
};

let aws: AwsUpstream;
let broker: Broker;
let host: string;
let brokerCa: string;
let proxyUrl: string;
/** Everything the agent side saw (responses, CLI output): searched for the sentinels at the end. */
const seen: string[] = [];

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

/** The verifier's record for the request just answered (records arrive on its stdout). */
async function recordAfter(count: number): Promise<AwsRecord> {
  for (let i = 0; i < 250 && aws.records.length <= count; i++) await Bun.sleep(20);
  const rec = aws.records.at(-1);
  if (!rec || aws.records.length <= count) throw new Error(`no verifier record:\n${aws.output().slice(-2000)}`);
  return rec;
}

/** Fails with botocore's canonical request and string to sign when the signature did not verify. */
function expectVerified(rec: AwsRecord): void {
  if (!rec.ok)
    throw new Error(
      `botocore refused ${rec.method} ${rec.target}: ${rec.code} ${rec.reason}\n--- CanonicalRequest (botocore)\n${rec.CanonicalRequest ?? ""}\n--- StringToSign\n${rec.StringToSign ?? ""}`,
    );
  expect(rec.status).toBe(200);
}

type Via = "proxy" | "tunnel";

/** One request to the fake S3 as an agent makes it, through /proxy or the tunnel; returns the verifier's record. */
async function send(
  via: Via,
  method: string,
  target: string,
  init: { body?: BodyInit; headers?: Record<string, string> } = {},
): Promise<{ res: Response; text: string; rec: AwsRecord }> {
  const before = aws.records.length;
  const headers = { ...PLACEHOLDER, ...init.headers };
  const res =
    via === "proxy"
      ? await broker.proxy(host, target, { method, headers, body: init.body, duplex: "half" } as RequestInit)
      : await fetch(`https://${host}${target}`, {
          method,
          headers: {
            ...headers,
            authorization: `AWS4-HMAC-SHA256 Credential=placeholder/20000101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${"0".repeat(64)}`,
          },
          body: init.body,
          proxy: proxyUrl,
          tls: { ca: brokerCa },
          duplex: "half",
        } as RequestInit);
  const text = await dumpResponse(res);
  seen.push(text);
  if (res.status !== 200) console.log(text);
  return { res, text, rec: await recordAfter(before) };
}

/** `total` bytes made piece by piece (64 KiB blocks numbered in their first bytes), hashed as they go. */
function bigBody(total: number): { stream: ReadableStream<Uint8Array>; sha256: () => string } {
  const hash = createHash("sha256");
  const block = new Uint8Array(64 * 1024).map((_, i) => i % 251);
  let sent = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(ctrl) {
      if (sent >= total) return ctrl.close();
      const piece = block.slice(0, Math.min(block.length, total - sent));
      new DataView(piece.buffer).setUint32(0, sent);
      sent += piece.length;
      hash.update(piece);
      ctrl.enqueue(piece);
    },
  });
  return { stream, sha256: () => hash.digest("hex") };
}

/** aws-chunked framing; `signed` puts (placeholder) chunk signatures on each chunk header. */
function awsChunked(data: Buffer, chunk: number, signed: boolean, trailer?: string): Uint8Array<ArrayBuffer> {
  const parts: Buffer[] = [];
  const ext = signed ? `;chunk-signature=${"ab".repeat(32)}` : "";
  for (let at = 0; at < data.length; at += chunk) {
    const piece = data.subarray(at, at + chunk);
    parts.push(Buffer.from(`${piece.length.toString(16)}${ext}\r\n`), piece, Buffer.from("\r\n"));
  }
  parts.push(Buffer.from(`0${ext}\r\n${trailer ? `${trailer}\r\n` : ""}\r\n`));
  return new Uint8Array(Buffer.concat(parts));
}

function crc32Base64(data: Buffer): string {
  let c = ~0;
  for (const b of data) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  const out = Buffer.alloc(4);
  out.writeUInt32BE(~c >>> 0);
  return out.toString("base64");
}

describe.skipIf(!python)("aws_sigv4: signatures verified by botocore", () => {
  beforeAll(async () => {
    aws = await startAwsUpstream(python!, KEYS, { names: { dns: ["localhost", "s3.test"], ips: ["127.0.0.1"] } });
    broker = await startBroker({ caPem: aws.pki.caPem, tunnel: true });
    broker.dns.set("localhost", ["127.0.0.1"]);
    broker.dns.set("s3.test", ["127.0.0.1"]);
    host = `localhost:${aws.port}`;
    await broker.setCredential("AWS_ACCESS_KEY_ID", KEYS.accessKeyId);
    await broker.setCredential("AWS_SECRET_ACCESS_KEY", SECRET);
    await broker.setCredential("AWS_SESSION_TOKEN", TOKEN);
    const auth = {
      type: "aws_sigv4",
      access_key_id: "AWS_ACCESS_KEY_ID",
      secret_access_key: "AWS_SECRET_ACCESS_KEY",
      session_token: "AWS_SESSION_TOKEN",
      region: "us-east-1",
      service: "s3",
    };
    await broker.addService(host, auth);
    // The SDK agent's endpoint: a name vault run's NO_PROXY (localhost,127.0.0.1) does not bypass.
    await broker.addService(`s3.test:${aws.port}`, auth);
    brokerCa = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
    proxyUrl = `http://${broker.sessionToken}:${broker.vault}@127.0.0.1:${broker.proxyAddress!.split(":").at(-1)}`;
  }, 60_000);

  afterAll(async () => {
    await broker?.stop();
    await aws?.close();
  });

  describe("the verifier itself", () => {
    const direct = (url: string, init: RequestInit) => fetch(url, { ...init, tls: { ca: aws.pki.caPem } } as RequestInit);
    const url = () => `https://localhost:${aws.port}/self-check/obj%20one?b=x%2Fy&a=1&empty=`;

    test("accepts requests botocore signed, refuses tampered ones", async () => {
      const body = "self-check body";
      const signed = await aws.sign({ method: "PUT", url: url(), body, keys: KEYS });
      const good = await direct(url(), { method: "PUT", headers: signed, body });
      expect({ status: good.status, body: await good.json() }).toMatchObject({ status: 200, body: { ok: true, bytes: body.length, sha256: sha256(body) } });

      const cases: [string, string, RequestInit, number, string][] = [
        ["another body", url(), { method: "PUT", headers: signed, body: "self-check bodY" }, 400, "XAmzContentSHA256Mismatch"],
        [
          "another body with its hash",
          url(),
          { method: "PUT", headers: { ...signed, "X-Amz-Content-SHA256": sha256("other") }, body: "other" },
          403,
          "SignatureDoesNotMatch",
        ],
        ["another query value", url().replace("a=1", "a=2"), { method: "PUT", headers: signed, body }, 403, "SignatureDoesNotMatch"],
        ["another path", url().replace("obj%20one", "obj%20two"), { method: "PUT", headers: signed, body }, 403, "SignatureDoesNotMatch"],
        ["another method", url(), { method: "POST", headers: signed, body }, 403, "SignatureDoesNotMatch"],
        ["another session token", url(), { method: "PUT", headers: { ...signed, "X-Amz-Security-Token": "forged" }, body }, 403, "InvalidToken"],
        ["no signature", url(), { method: "PUT", headers: { "x-amz-content-sha256": sha256(body) }, body }, 403, "MissingAuthenticationToken"],
      ];
      for (const [name, target, init, status, code] of cases) {
        const res = await direct(target, init);
        expect({ name, status: res.status, code: ((await res.json()) as { code: string }).code }).toEqual({ name, status, code });
      }
      const wrongKey = await aws.sign({ method: "PUT", url: url(), body, keys: { ...KEYS, secretAccessKey: "not-the-secret" } });
      const refused = await direct(url(), { method: "PUT", headers: wrongKey, body });
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { code: string }).code).toBe("SignatureDoesNotMatch");
      const stale = await aws.sign({ method: "GET", url: url(), keys: KEYS });
      const unsignedHeader = await direct(url(), { method: "GET", headers: { ...stale, "x-amz-meta-extra": "1" } });
      expect(((await unsignedHeader.json()) as { code: string }).code).toBe("AccessDenied");
    });
  });

  for (const via of ["proxy", "tunnel"] as const) {
    describe(`through ${via === "proxy" ? "/proxy" : "the tunnel (HTTPS_PROXY, Bun fetch)"}`, () => {
      test("GET: the agent's placeholder signature is replaced by one botocore verifies", async () => {
        const { res, rec } = await send(via, "GET", `/bucket-${via}/nothing-here`);
        expectVerified(rec);
        expect(res.status).toBe(200);
        expect(rec.content_sha256).toBe(sha256(""));
        expect(rec.signed_headers).toEqual(expect.arrayContaining(["host", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"]));
        expect(rec.host).toBe(host);
      });

      test("PUT of a small body (hashed) and GET of it back", async () => {
        const body = `small body ✓ via ${via}`;
        const put = await send(via, "PUT", `/bucket-${via}/dir/small%20file+%E2%9C%93.txt`, {
          body,
          // x-amz-meta-* must be signed (S3 refuses unsigned x-amz-* headers); SigV4 collapses the inner spaces.
          headers: { "content-type": "text/plain; charset=utf-8", "x-amz-meta-note": "  two  spaces   inside ", "x-amz-meta-list": "a, b" },
        });
        expectVerified(put.rec);
        expect(put.rec).toMatchObject({ bytes: Buffer.byteLength(body), sha256: sha256(body), content_sha256: sha256(body), path_canonical: true });
        expect(put.rec.signed_headers).toEqual(expect.arrayContaining(["x-amz-meta-list", "x-amz-meta-note"]));
        const get = await send(via, "GET", `/bucket-${via}/dir/small%20file+%E2%9C%93.txt`);
        expectVerified(get.rec);
        expect(get.text.endsWith(`\n\n${body}`)).toBe(true);
      });

      test("a query with reserved characters, unicode, empty values and repeated keys", async () => {
        const query =
          "b=a%20b&slash=%2Fx%2Fy&tilde=~t&pct=100%25&plus=1%2B1&raw+plus=x+y&uni=%C3%A9%E2%82%AC&lower=%2f&empty=&flag&rep=2&rep=1&Z=upper&eq=a%3Db%26c";
        const { rec } = await send(via, "GET", `/bucket-${via}/q?${query}`);
        expectVerified(rec);
        expect(rec.query_canonical).toBe(true);
        expect(rec.decoded_query).toEqual([
          ["b", "a b"],
          ["slash", "/x/y"],
          ["tilde", "~t"],
          ["pct", "100%"],
          ["plus", "1+1"],
          ["raw+plus", "x+y"],
          ["uni", "é€"],
          ["lower", "/"],
          ["empty", ""],
          ["flag", ""],
          ["rep", "2"],
          ["rep", "1"],
          ["Z", "upper"],
          ["eq", "a=b&c"],
        ]);
      });

      test("a streamed 64 MiB upload is sent UNSIGNED-PAYLOAD with its length, every byte arriving", async () => {
        const big = bigBody(BIG);
        const { rec } = await send(via, "PUT", `/bucket-${via}/big.bin`, { body: big.stream, headers: { "content-length": String(BIG) } });
        expectVerified(rec);
        expect(rec).toMatchObject({
          bytes: BIG,
          sha256: big.sha256(),
          content_sha256: "UNSIGNED-PAYLOAD",
          content_length: String(BIG),
          chunked_transfer: false,
        });
      }, 120_000);

      test("aws-chunked with the agent's chunk signatures is decoded and sent unsigned with its decoded length", async () => {
        const data = Buffer.from("signed chunks ".repeat(5000));
        const framed = awsChunked(data, 8192, true);
        const { rec } = await send(via, "PUT", `/bucket-${via}/signed-chunks.bin`, {
          body: framed,
          headers: {
            "x-amz-content-sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": String(data.length),
          },
        });
        expectVerified(rec);
        expect(rec).toMatchObject({
          bytes: data.length,
          sha256: sha256(data),
          content_sha256: "UNSIGNED-PAYLOAD",
          aws_chunked: false,
          content_length: String(data.length),
        });
        expect(rec.headers_seen).not.toContain("x-amz-decoded-content-length");
      });

      test("unsigned aws-chunked with a trailer is forwarded as sent and signed STREAMING-UNSIGNED-PAYLOAD-TRAILER", async () => {
        const data = Buffer.from("unsigned chunks with a crc32 trailer ".repeat(3000));
        const framed = awsChunked(data, 16384, false, `x-amz-checksum-crc32:${crc32Base64(data)}`);
        const { rec } = await send(via, "PUT", `/bucket-${via}/trailer.bin`, {
          body: framed,
          headers: {
            "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
            "content-encoding": "aws-chunked",
            "x-amz-decoded-content-length": String(data.length),
            "x-amz-trailer": "x-amz-checksum-crc32",
          },
        });
        expectVerified(rec);
        expect(rec).toMatchObject({
          bytes: data.length,
          sha256: sha256(data),
          content_sha256: "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
          aws_chunked: true,
          trailers: ["x-amz-checksum-crc32"],
          wire_bytes: framed.length,
        });
      });
    });
  }

  test("the AWS SDK for JavaScript under `broker vault run`, with placeholder keys", async () => {
    const home = mkdtempSync(join(tmpdir(), "broker-aws-sdk-"));
    const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), seen);
    await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
    await ok(["vault", "use", broker.vault]);
    const before = aws.records.length;
    const agent = resolve(import.meta.dir, "aws-sdk-agent.ts");
    const placeholders = [
      "AWS_ACCESS_KEY_ID=AKIDPLACEHOLDER",
      "AWS_SECRET_ACCESS_KEY=placeholder-secret",
      "AWS_SESSION_TOKEN=placeholder-token",
      "AWS_REGION=us-east-1",
    ];
    const r = await cli(["vault", "run", "--", "env", ...placeholders, process.execPath, agent, `https://s3.test:${aws.port}`]);
    const records = aws.records.slice(before);
    if (r.code !== 0) console.log(r.stdout, r.stderr, JSON.stringify(records, null, 1));
    expect(r.code).toBe(0);
    for (const rec of records) expectVerified(rec);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(out.text).toBe("hello from the SDK: ünïcødé & <xml>");
    expect(out.list).toEqual([
      { key: "dir/small file.txt", size: Buffer.byteLength(out.text) },
      { key: "stream.bin", size: 5 * 1024 * 1024 + 123 },
    ]);
    expect(records.map((x) => `${x.method} ${x.target.split("?")[0]}`)).toEqual([
      "PUT /sdk-bucket/dir/small%20file.txt",
      "PUT /sdk-bucket/stream.bin",
      "GET /sdk-bucket/dir/small%20file.txt",
      "GET /sdk-bucket/",
    ]);
    const stream = records[1]!;
    expect({ bytes: stream.bytes, sha256: stream.sha256 }).toEqual({ bytes: 5 * 1024 * 1024 + 123, sha256: out.streamSha256 });
    // The SDK sends a stream aws-chunked with a CRC32 trailer; the verifier checked the trailer too.
    expect(stream).toMatchObject({ content_sha256: "STREAMING-UNSIGNED-PAYLOAD-TRAILER", aws_chunked: true, trailers: ["x-amz-checksum-crc32"] });
  }, 120_000);

  test("the secret key and the session token appear in no response, log line or audit record", async () => {
    expect(aws.records.filter((r) => r.ok).length).toBeGreaterThan(10);
    for (const s of [SECRET, TOKEN]) await expectNoLeak(broker, s, seen);
  });
});
