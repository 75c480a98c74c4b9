// Ranged S3 GetObject through an aws_sigv4 service (issue 31, architecture.md D21): the broker widens the
// agent's one range by CONTEXT_BYTES on each side before signing, and cuts the masked 206 back to the
// bytes asked for. Verified against the botocore-checked fake S3 (tests/helpers/aws-upstream.py):
// every byte right for ranges at the start, middle and end, `bytes=N-`, `bytes=-N`, past the end,
// through /proxy and the tunnel, and with the official @aws-sdk/client-s3; the widened Range is what
// was signed. And an echo: an object holding the access key id the request was signed with, read in
// ranges that split it, never hands back any piece of it (masked, same length, offsets intact).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CONTEXT_BYTES as K } from "../../src/egress/ranges.ts";
import { requireBotocore, startAwsUpstream, type AwsKeys, type AwsRecord, type AwsUpstream } from "../helpers/aws-upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { piecesOf, reassemble, type AgentAnswer } from "./range-echo-upstream.ts";

const python = requireBotocore();
/** An access key id as AWS writes them (20 upper-case letters and digits), echoed by /echo-key. */
const AKID = `AKIA${Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"[b % 32]).join("")}`;
const SECRET = `aws-secret-sentinel-${crypto.randomUUID()}`;
const TOKEN = `aws-session-sentinel-${crypto.randomUUID()}`;
const KEYS: AwsKeys = { accessKeyId: AKID, secretAccessKey: SECRET, sessionToken: TOKEN, region: "us-east-1", service: "s3" };
const PLACEHOLDER = { "x-amz-date": "20000101T000000Z", "x-amz-content-sha256": "0".repeat(64), "x-amz-security-token": "placeholder-session-token" };
const SIZE = 300 * 1024 + 17;
const OBJECT = Buffer.from(crypto.getRandomValues(new Uint8Array(SIZE)));
/** The echo object: 300 dots, the access key id, 300 dots. */
const ECHO_AT = 300;
const ECHO_TARGET = `/ranges/echo-key?at=${ECHO_AT}&tail=300`;

let aws: AwsUpstream;
let broker: Broker;
let host: string;
let brokerCa: string;
let proxyUrl: string;
let dir: string;
const seen: string[] = [];

const sha256 = (data: Uint8Array) => createHash("sha256").update(data).digest("hex");

async function recordAfter(count: number): Promise<AwsRecord> {
  for (let i = 0; i < 250 && aws.records.length <= count; i++) await Bun.sleep(20);
  const rec = aws.records.at(-1);
  if (!rec || aws.records.length <= count) throw new Error(`no verifier record:\n${aws.output().slice(-2000)}`);
  return rec;
}

function expectVerified(rec: AwsRecord): void {
  if (!rec.ok) throw new Error(`botocore refused ${rec.method} ${rec.target}: ${rec.code} ${rec.reason}\n${rec.CanonicalRequest ?? ""}`);
}

type Via = "proxy" | "tunnel";

async function send(
  via: Via,
  method: string,
  target: string,
  init: { body?: BodyInit; headers?: Record<string, string> } = {},
): Promise<{ res: AgentAnswer; rec: AwsRecord }> {
  const before = aws.records.length;
  const headers = { ...PLACEHOLDER, ...init.headers };
  const res =
    via === "proxy"
      ? await broker.proxy(host, target, { method, headers, body: init.body })
      : await fetch(`https://${host}${target}`, {
          method,
          headers: {
            ...headers,
            authorization: `AWS4-HMAC-SHA256 Credential=placeholder/20000101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=${"0".repeat(64)}`,
          },
          body: init.body,
          proxy: proxyUrl,
          tls: { ca: brokerCa },
        } as RequestInit);
  const answer: AgentAnswer = { status: res.status, headers: Object.fromEntries(res.headers), body: Buffer.from(await res.arrayBuffer()) };
  seen.push(`${answer.status}\n${JSON.stringify(answer.headers)}\n${answer.body.toString("latin1")}`);
  return { res: answer, rec: await recordAfter(before) };
}

/** What S3 answers for one range of an object of `size` bytes: [first, last] (inclusive). */
function expected(range: string, size: number): [number, number] {
  const m = /^bytes=(\d*)-(\d*)$/.exec(range)!;
  if (m[1] === "") return [Math.max(0, size - Number(m[2])), size - 1];
  return [Number(m[1]), m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1)];
}

/** The Range the broker must have sent (and signed): the agent's, K more bytes on each side. */
function widened(range: string): string {
  const m = /^bytes=(\d*)-(\d*)$/.exec(range)!;
  if (m[1] === "") return `bytes=-${Number(m[2]) + K}`;
  return `bytes=${Math.max(0, Number(m[1]) - K)}-${m[2] === "" ? "" : Number(m[2]) + K}`;
}

const RANGES = [
  "bytes=0-999",
  "bytes=0-0",
  "bytes=150000-160000",
  `bytes=${SIZE - 200}-${SIZE - 1}`,
  `bytes=${SIZE - 5000}-`,
  "bytes=-5000",
  "bytes=-1",
  `bytes=${SIZE - 100}-${SIZE + 5000}`,
  `bytes=${SIZE - 1}-`,
  "bytes=3000-3099",
];

describe.skipIf(!python)("aws_sigv4 ranged reads", () => {
  beforeAll(async () => {
    aws = await startAwsUpstream(python!, KEYS, { names: { dns: ["localhost", "s3.test"], ips: ["127.0.0.1"] } });
    broker = await startBroker({ caPem: aws.pki.caPem, tunnel: true });
    broker.dns.set("localhost", ["127.0.0.1"]);
    broker.dns.set("s3.test", ["127.0.0.1"]);
    host = `localhost:${aws.port}`;
    await broker.setCredential("AWS_ACCESS_KEY_ID", AKID);
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
    await broker.addService(`s3.test:${aws.port}`, auth);
    brokerCa = await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text();
    proxyUrl = `http://${broker.sessionToken}:${broker.vault}@127.0.0.1:${broker.proxyAddress!.split(":").at(-1)}`;
    dir = mkdtempSync(join(tmpdir(), "broker-aws-ranges-"));
    const put = await send("proxy", "PUT", "/ranges/object.bin", { body: OBJECT, headers: { "content-type": "application/octet-stream" } });
    expectVerified(put.rec);
    expect(put.rec.sha256).toBe(sha256(OBJECT));
  }, 60_000);

  afterAll(async () => {
    await broker?.stop();
    await aws?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const via of ["proxy", "tunnel"] as const) {
    describe(`through ${via === "proxy" ? "/proxy" : "the tunnel"}`, () => {
      test("ranges at the start, middle and end, from an offset, suffixes, past the end: every byte right, the widened Range signed", async () => {
        for (const range of RANGES) {
          const { res, rec } = await send(via, "GET", "/ranges/object.bin", { headers: { range } });
          expectVerified(rec);
          expect({ range, sent: rec.range, signed: rec.signed_headers?.includes("range") }).toEqual({ range, sent: widened(range), signed: true });
          const [first, last] = expected(range, SIZE);
          expect({ range, status: res.status, contentRange: res.headers["content-range"], contentLength: res.headers["content-length"] }).toEqual({
            range,
            status: 206,
            contentRange: `bytes ${first}-${last}/${SIZE}`,
            contentLength: String(last - first + 1),
          });
          expect(res.body.equals(OBJECT.subarray(first, last + 1))).toBe(true);
        }
      });

      test("If-Range goes with the kept Range; HEAD describes the agent's range", async () => {
        const { res, rec } = await send(via, "GET", "/ranges/object.bin", { headers: { range: "bytes=100-199", "if-range": '"some-etag"' } });
        expectVerified(rec);
        expect(rec.headers_seen).toContain("if-range");
        expect(rec.signed_headers).toContain("if-range");
        expect(res.status).toBe(206);
        expect(res.body.equals(OBJECT.subarray(100, 200))).toBe(true);
        const head = await send(via, "HEAD", "/ranges/object.bin", { headers: { range: "bytes=100-199" } });
        expectVerified(head.rec);
        expect(head.rec.range).toBe(widened("bytes=100-199"));
        expect({ status: head.res.status, cr: head.res.headers["content-range"], cl: head.res.headers["content-length"] }).toEqual({
          status: 206,
          cr: `bytes 100-199/${SIZE}`,
          cl: "100",
        });
      });

      test("a range past the end: 416, whether the widened range reached the object or not", async () => {
        for (const range of [`bytes=${SIZE + 10}-${SIZE + 20}`, `bytes=${SIZE + K + 10}-`]) {
          const { res, rec } = await send(via, "GET", "/ranges/object.bin", { headers: { range } });
          expect(rec.range).toBe(widened(range));
          expect({ range, status: res.status, contentRange: res.headers["content-range"] }).toEqual({ range, status: 416, contentRange: `bytes */${SIZE}` });
        }
      });

      test("several ranges: Range dropped, the whole object (200)", async () => {
        const { res, rec } = await send(via, "GET", "/ranges/object.bin", { headers: { range: "bytes=0-9,20-29", "if-range": '"x"' } });
        expectVerified(rec);
        expect(rec.range).toBeNull();
        expect(rec.headers_seen).not.toContain("if-range");
        expect(res.status).toBe(200);
        expect(res.body.equals(OBJECT)).toBe(true);
      });

      test("an object echoing the access key id, read in ranges that split it: none of it, same lengths, offsets intact", async () => {
        const whole = Buffer.from(`${".".repeat(ECHO_AT)}${AKID}${".".repeat(300)}`, "latin1");
        const ranges = [
          `bytes=${ECHO_AT - 10}-${ECHO_AT + 9}`,
          `bytes=${ECHO_AT + 10}-${ECHO_AT + 29}`,
          `bytes=${ECHO_AT + 10}-`,
          `bytes=-${300 + 10}`,
          "bytes=0-",
        ];
        for (let i = ECHO_AT - 2; i < ECHO_AT + AKID.length + 2; i++) ranges.push(`bytes=${i}-${i}`);
        const sent = [];
        for (const range of ranges) sent.push({ range, ...(await send(via, "GET", ECHO_TARGET, { headers: { range } })) });
        const answers = sent.map((x) => x.res);
        expect(piecesOf(AKID, reassemble(answers))).toEqual([]);
        expect(piecesOf(AKID, seen.join("\n"))).toEqual([]);
        for (const { range, res, rec } of sent) {
          expectVerified(rec);
          expect(rec.range).toBe(widened(range));
          const [first, last] = expected(range, whole.length);
          expect({ range, status: res.status, contentRange: res.headers["content-range"], length: res.body.length }).toEqual({
            range,
            status: 206,
            contentRange: `bytes ${first}-${last}/${whole.length}`,
            length: last - first + 1,
          });
          // Every byte around the value is the object's own, at its own offset; each byte of the value is masked.
          const wrong: number[] = [];
          for (let at = first; at <= last; at++) {
            const inValue = at >= ECHO_AT && at < ECHO_AT + AKID.length;
            if ((res.body[at - first] === whole[at]) === inValue) wrong.push(at);
          }
          expect({ range, wrong }).toEqual({ range, wrong: [] });
        }
      });
    });
  }

  test("the official @aws-sdk/client-s3: ranged GetObject through the tunnel, every byte right", async () => {
    const caFile = join(dir, "broker-ca.pem");
    writeFileSync(caFile, brokerCa);
    const before = aws.records.length;
    const agent = resolve(import.meta.dir, "aws-sdk-range-agent.ts");
    const ranges = ["bytes=0-99", "bytes=100000-199999", "bytes=-777", `bytes=${SIZE - 1000}-`];
    const proc = Bun.spawn([process.execPath, agent, `https://s3.test:${aws.port}`, "ranges", "object.bin", JSON.stringify(ranges)], {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        HOME: dir,
        HTTPS_PROXY: proxyUrl,
        NODE_EXTRA_CA_CERTS: caFile,
        AWS_ACCESS_KEY_ID: "AKIDPLACEHOLDER",
        AWS_SECRET_ACCESS_KEY: "placeholder-secret",
        AWS_SESSION_TOKEN: "placeholder-token",
        AWS_REGION: "us-east-1",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    seen.push(out, err);
    if (code !== 0) console.log(out, err);
    expect(code).toBe(0);
    const records = aws.records.slice(before);
    for (const rec of records) expectVerified(rec);
    expect(records.map((r) => r.range)).toEqual(ranges.map(widened));
    const lines = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toEqual(
      ranges.map((range) => {
        const [first, last] = expected(range, SIZE);
        const bytes = OBJECT.subarray(first, last + 1);
        return { range, status: 206, contentRange: `bytes ${first}-${last}/${SIZE}`, contentLength: bytes.length, length: bytes.length, sha256: sha256(bytes) };
      }),
    );
  }, 60_000);

  test("the keys appear in no response, log line or audit record", async () => {
    for (const s of [SECRET, TOKEN, AKID]) await expectNoLeak(broker, s, seen);
  });
});
