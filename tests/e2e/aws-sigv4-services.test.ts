// aws_sigv4 beyond S3 path-style, verified by botocore (tests/helpers/aws-upstream.py): a non-S3
// service (path signed as sent and encoded again, bodies held and hashed up to 16 MiB, larger ones
// refused), and region/service read from AWS host names (s3.<region>.amazonaws.com, virtual-hosted
// buckets) with long-term keys (no session token).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { requireBotocore, startAwsUpstream, type AwsRecord, type AwsUpstream } from "../helpers/aws-upstream.ts";
import { dumpResponse, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";

const python = requireBotocore();
const API_SECRET = `api-secret-sentinel-${crypto.randomUUID()}`;
const S3_SECRET = `s3-secret-sentinel-${crypto.randomUUID()}`;
const S3_REGION_HOST = "s3.us-west-2.amazonaws.com";
const S3_BUCKET_HOST = "my-bucket.s3.us-west-2.amazonaws.com";

let api: AwsUpstream;
let s3: AwsUpstream;
let broker: Broker;
const seen: string[] = [];
const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");

async function send(
  up: AwsUpstream,
  host: string,
  method: string,
  target: string,
  body?: string | Uint8Array<ArrayBuffer>,
): Promise<{ status: number; rec: AwsRecord | undefined }> {
  const before = up.records.length;
  const res = await broker.proxy(`${host}:${up.port}`, target, { method, body, headers: { "x-amz-date": "20000101T000000Z" } });
  const text = await dumpResponse(res);
  seen.push(text);
  for (let i = 0; i < 100 && up.records.length <= before; i++) await Bun.sleep(20);
  const rec = up.records.length > before ? up.records.at(-1) : undefined;
  if (rec && !rec.ok)
    throw new Error(
      `botocore refused ${method} ${target}: ${rec.code} ${rec.reason}\n--- CanonicalRequest (botocore)\n${rec.CanonicalRequest ?? ""}\n--- StringToSign\n${rec.StringToSign ?? ""}`,
    );
  return { status: res.status, rec };
}

describe.skipIf(!python)("aws_sigv4 services verified by botocore", () => {
  beforeAll(async () => {
    const names = { dns: ["localhost", "api.test", S3_REGION_HOST, S3_BUCKET_HOST], ips: ["127.0.0.1"] };
    api = await startAwsUpstream(
      python!,
      { accessKeyId: "AKIDAPIEXAMPLE", secretAccessKey: API_SECRET, region: "eu-west-1", service: "execute-api" },
      { names },
    );
    s3 = await startAwsUpstream(python!, { accessKeyId: "AKIDS3EXAMPLE", secretAccessKey: S3_SECRET, region: "us-west-2", service: "s3" }, { pki: api.pki });
    broker = await startBroker({ caPem: api.pki.caPem });
    for (const h of ["api.test", S3_REGION_HOST, S3_BUCKET_HOST]) broker.dns.set(h, ["127.0.0.1"]);
    await broker.setCredential("API_ID", "AKIDAPIEXAMPLE");
    await broker.setCredential("API_SECRET", API_SECRET);
    await broker.setCredential("S3_ID", "AKIDS3EXAMPLE");
    await broker.setCredential("S3_SECRET", S3_SECRET);
    await broker.addService(`api.test:${api.port}`, {
      type: "aws_sigv4",
      access_key_id: "API_ID",
      secret_access_key: "API_SECRET",
      region: "eu-west-1",
      service: "execute-api",
    });
    for (const h of [S3_REGION_HOST, S3_BUCKET_HOST])
      await broker.addService(`${h}:${s3.port}`, { type: "aws_sigv4", access_key_id: "S3_ID", secret_access_key: "S3_SECRET" });
  }, 60_000);

  afterAll(async () => {
    await broker?.stop();
    await api?.close();
    await s3?.close();
  });

  test("non-S3: a JSON POST with reserved characters in the path and query", async () => {
    const body = JSON.stringify({ item: "ünïcødé", n: 1 });
    const { status, rec } = await send(api, "api.test", "POST", "/prod/items/a:b/c@d/e%20f/~g?x=1&y=a%20b&z=%2F", body);
    expect(status).toBe(200);
    expect(rec).toMatchObject({ ok: true, content_sha256: sha256(body), sha256: sha256(body) });
  });

  test("non-S3: a 1 MiB body is held and hashed; past 16 MiB the broker refuses it and nothing reaches AWS", async () => {
    const mib = new Uint8Array(1024 * 1024).map((_, i) => (i * 7) % 256);
    const held = await send(api, "api.test", "PUT", "/prod/blob", mib);
    expect(held.rec).toMatchObject({ ok: true, content_sha256: sha256(mib), bytes: mib.length });
    const before = api.records.length;
    const big = await send(api, "api.test", "PUT", "/prod/blob", new Uint8Array(16 * 1024 * 1024 + 1));
    expect(big.status).toBe(413);
    expect(api.records.length).toBe(before);
  });

  test("region and service read from s3.<region>.amazonaws.com and from a virtual-hosted bucket", async () => {
    const body = "derived region";
    const put = await send(s3, S3_REGION_HOST, "PUT", "/bkt/derived.txt", body);
    expect(put.rec).toMatchObject({ ok: true, sha256: sha256(body), host: `${S3_REGION_HOST}:${s3.port}` });
    const get = await send(s3, S3_BUCKET_HOST, "GET", "/?list-type=2&prefix=derived");
    expect(get.rec).toMatchObject({ ok: true, host: `${S3_BUCKET_HOST}:${s3.port}` });
    expect(get.rec!.headers_seen).not.toContain("x-amz-security-token");
  });

  test("a wrong secret key in the vault is refused by botocore (the checks above are not vacuous)", async () => {
    await broker.setCredential("S3_SECRET", "not-the-secret-key");
    const before = s3.records.length;
    const res = await broker.proxy(`${S3_REGION_HOST}:${s3.port}`, "/bkt/derived.txt");
    seen.push(await dumpResponse(res));
    for (let i = 0; i < 100 && s3.records.length <= before; i++) await Bun.sleep(20);
    expect(res.status).toBe(403);
    expect(s3.records.at(-1)).toMatchObject({ ok: false, code: "SignatureDoesNotMatch" });
    await broker.setCredential("S3_SECRET", S3_SECRET);
    expect((await send(s3, S3_REGION_HOST, "GET", "/bkt/derived.txt")).rec).toMatchObject({ ok: true });
  });

  test("neither secret key appears in a response, log line or audit record", async () => {
    for (const s of [API_SECRET, S3_SECRET]) await expectNoLeak(broker, s, seen);
  });
});
