// Starts tests/helpers/aws-upstream.py (checks in aws_sigv4_check.py), a fake S3/AWS endpoint that
// verifies every request's SigV4 signature with botocore, independently of the broker's signer, and
// reads its per-request records.
// Missing python3 or botocore skips (with the reason printed); under CI=true it fails instead.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki, type TestPki } from "./pki.ts";

const SCRIPT = join(import.meta.dir, "aws-upstream.py");

export interface AwsKeys {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  readonly region: string;
  readonly service: string;
}

/** What the verifier saw and decided for one request (see aws-upstream.py). */
export interface AwsRecord {
  method: string;
  target: string;
  ok: boolean;
  status: number;
  code?: string;
  reason?: string;
  CanonicalRequest?: string;
  StringToSign?: string;
  bytes?: number;
  sha256?: string;
  wire_bytes?: number;
  chunked_transfer?: boolean;
  aws_chunked?: boolean;
  trailers?: string[];
  content_sha256?: string | null;
  signed_headers?: string[];
  headers_seen?: string[];
  path_canonical?: boolean;
  query_canonical?: boolean;
  decoded_query?: [string, string][];
  content_length?: string | null;
  content_encoding?: string | null;
  host?: string;
  /** The Range header received, if any. */
  range?: string | null;
}

export interface AwsUpstream {
  readonly port: number;
  readonly pki: TestPki;
  readonly python: string;
  readonly records: AwsRecord[];
  /** The verifier's output so far (records and any Python traceback). */
  output(): string;
  /** Signs a request with botocore's own signer (for the verifier's self-check). */
  sign(spec: { method: string; url: string; headers?: Record<string, string>; body?: string; keys: AwsKeys }): Promise<Record<string, string>>;
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The first python3 that imports botocore: Debian's /usr/bin/python3 (python3-botocore) first. */
export function findBotocorePython(): { python?: string; reason?: string } {
  const candidates = [...new Set(["/usr/bin/python3", Bun.which("python3")].filter((p): p is string => !!p))];
  if (candidates.length === 0) return { reason: "python3 is not installed" };
  for (const python of candidates) {
    const r = Bun.spawnSync([python, "-c", "import botocore.auth, botocore.awsrequest"], { stdout: "ignore", stderr: "ignore" });
    if (r.exitCode === 0) return { python };
  }
  return { reason: `botocore is missing (${candidates.join(", ")}): apt-get install python3-botocore` };
}

/** The python to use, or undefined with the reason printed; under CI=true a missing one throws. */
export function requireBotocore(): string | undefined {
  const found = findBotocorePython();
  if (found.python) return found.python;
  if (process.env.CI === "true") throw new Error(`${found.reason} (listed in .ci/run)`);
  console.warn(`skipping the SigV4 verification tests: ${found.reason}`);
  return undefined;
}

export async function startAwsUpstream(
  python: string,
  keys: AwsKeys,
  opts: {
    host?: string /** certificate names (a fresh PKI) */;
    names?: { dns?: string[]; ips?: string[] } /** or this PKI, shared with another upstream */;
    pki?: TestPki;
  } = {},
): Promise<AwsUpstream> {
  const pki = opts.pki ?? (await createTestPki(opts.names));
  const dir = mkdtempSync(join(tmpdir(), "broker-aws-upstream-"));
  writeFileSync(join(dir, "cert.pem"), pki.certPem);
  writeFileSync(join(dir, "key.pem"), pki.keyPem, { mode: 0o600 });
  const proc = Bun.spawn(
    [python, "-B", "-u", SCRIPT, "serve", "--cert", join(dir, "cert.pem"), "--key", join(dir, "key.pem"), "--host", opts.host ?? "127.0.0.1"],
    {
      env: {
        PATH: process.env.PATH ?? "/usr/bin:/bin",
        FAKE_AWS_ACCESS_KEY_ID: keys.accessKeyId,
        FAKE_AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
        FAKE_AWS_SESSION_TOKEN: keys.sessionToken ?? "",
        FAKE_AWS_REGION: keys.region,
        FAKE_AWS_SERVICE: keys.service,
      },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const records: AwsRecord[] = [];
  let text = "";
  let port = 0;
  const decoder = new TextDecoder();
  const readLines = async (stream: ReadableStream<Uint8Array>, parse: boolean) => {
    let pending = "";
    for await (const chunk of stream) {
      const s = decoder.decode(chunk, { stream: true });
      text += s;
      if (!parse) continue;
      pending += s;
      let nl: number;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const v = JSON.parse(line);
        if (v.port) port = v.port;
        if (v.record) records.push(v.record);
      }
    }
  };
  void readLines(proc.stdout, true);
  void readLines(proc.stderr, false);
  const deadline = Date.now() + 15_000;
  while (!port) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill();
      throw new Error(`aws-upstream.py did not start:\n${text}`);
    }
    await Bun.sleep(20);
  }
  const close = async () => {
    proc.kill();
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    port,
    pki,
    python,
    records,
    output: () => text,
    async sign(spec) {
      const input = {
        method: spec.method,
        url: spec.url,
        headers: spec.headers ?? {},
        body: spec.body ?? "",
        access_key: spec.keys.accessKeyId,
        secret_key: spec.keys.secretAccessKey,
        token: spec.keys.sessionToken,
        region: spec.keys.region,
        service: spec.keys.service,
      };
      const p = Bun.spawn([python, "-B", SCRIPT, "sign"], { stdin: new TextEncoder().encode(JSON.stringify(input)), stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
      if (code !== 0) throw new Error(`aws-upstream.py sign: ${err}`);
      return JSON.parse(out);
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
