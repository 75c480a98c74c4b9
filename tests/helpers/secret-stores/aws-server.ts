// A stand-in for AWS Secrets Manager (and STS AssumeRoleWithWebIdentity), written from the API
// references: GetSecretValue over AWS JSON 1.1 (POST /, X-Amz-Target secretsmanager.GetSecretValue,
// application/x-amz-json-1.1; errors as {"__type", "message"} with x-amzn-ErrorType), secrets with
// versions and staging labels (AWSCURRENT, AWSPREVIOUS, custom), and STS's query protocol answering in
// XML. Every Secrets Manager request's SigV4 signature is recomputed here, independently of the broker's
// signer (canonical request, string to sign, signing key, as the SigV4 documentation lays them out).
// HTTPS on 127.0.0.1 with a throwaway CA; counters; a switch that makes it fail (500) and one that stops it.

import { createHash, createHmac, randomUUID } from "node:crypto";
import { createTestPki, type TestPki } from "../pki.ts";

export interface AwsServerKeys {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

export interface CapturedRequest {
  readonly method: string;
  /** Path and query as received. */
  readonly target: string;
  readonly headers: [string, string][];
  readonly body: string;
}

interface Version {
  readonly id: string;
  readonly string?: string;
  readonly binary?: Uint8Array;
  readonly stages: Set<string>;
  readonly created: number;
}

interface StoredSecret {
  readonly name: string;
  readonly arn: string;
  readonly versions: Version[];
}

export interface AwsSecretsServer {
  readonly port: number;
  readonly url: string;
  readonly pki: TestPki;
  readonly region: string;
  /** Requests by kind; `refused` counts bad signatures and unknown keys. */
  readonly counts: { getSecretValue: number; assumeRole: number; refused: number; total: number };
  /** Every request as received, last first when read with .at(-1). */
  readonly captured: CapturedRequest[];
  /** Creates the secret or adds a version to it: the new one becomes AWSCURRENT, the old AWSCURRENT AWSPREVIOUS. Returns the VersionId. */
  put(name: string, value: string | Uint8Array, stages?: string[]): string;
  /** Moves a staging label to a version. */
  stage(name: string, label: string, versionId: string): void;
  arnOf(name: string): string;
  /** Names this server refuses with AccessDeniedException. */
  readonly denied: Set<string>;
  /** Keys that may sign (added to by STS). */
  addKeys(keys: AwsServerKeys): void;
  /** Web identity tokens STS accepts, and the role ARN it accepts them for. */
  acceptWebIdentity(token: string, roleArn: string): void;
  /** Web identity tokens STS received, in order. */
  readonly webIdentityTokens: string[];
  /** How long STS credentials last (seconds, default 3600). */
  stsDurationSeconds: number;
  /** While true every request gets 500 InternalServiceError. */
  failing: boolean;
  /** Stops listening (connections are refused afterwards). */
  stop(): void;
}

const sha256 = (data: string | Uint8Array) => createHash("sha256").update(data).digest("hex");
const hmac = (key: string | Buffer, data: string) => createHmac("sha256", key).update(data).digest();

/** SigV4 UriEncode: unreserved bytes stay, others %XX upper-case; '/' kept in paths. */
function uriEncode(text: string, keepSlash: boolean): string {
  let out = "";
  for (const byte of Buffer.from(text, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) || (keepSlash && c === "/") ? c : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const AUTH_RE =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})$/;

type Refusal = { code: string; message: string };

/**
 * Recomputes the signature of a non-S3 request (the path encoded once more, as every service but S3
 * signs it); returns a refusal in AWS's words, or undefined when it verifies.
 */
export function verifySigV4(
  req: { method: string; target: string; headers: [string, string][]; body: Uint8Array },
  keysFor: (accessKeyId: string) => AwsServerKeys | undefined,
  expect: { region: string; service: string; now: number },
): Refusal | undefined {
  const get = (name: string) => req.headers.filter(([k]) => k.toLowerCase() === name).map(([, v]) => v);
  const authz = get("authorization");
  if (authz.length !== 1) return { code: "MissingAuthenticationTokenException", message: "Missing Authentication Token" };
  const m = AUTH_RE.exec(authz[0]!.trim());
  if (!m) return { code: "IncompleteSignatureException", message: "Authorization header requires Credential, SignedHeaders and Signature." };
  const [, accessKeyId, scopeDate, region, service, signedList, signature] = m as unknown as string[];
  const keys = keysFor(accessKeyId!);
  if (!keys) return { code: "UnrecognizedClientException", message: "The security token included in the request is invalid." };
  if (region !== expect.region || service !== expect.service)
    return { code: "InvalidSignatureException", message: `Credential should be scoped to a valid region and service.` };
  const tokens = get("x-amz-security-token");
  if ((keys.sessionToken ?? undefined) !== (tokens[0] ?? undefined) || tokens.length > 1)
    return { code: "UnrecognizedClientException", message: "The security token included in the request is invalid." };
  const signed = signedList!.split(";");
  if (!signed.includes("host") || !signed.includes("x-amz-date") || signed.join(";") !== [...new Set(signed)].sort().join(";"))
    return { code: "InvalidSignatureException", message: "The request signature we calculated does not match the signature you provided." };
  if (tokens.length && !signed.includes("x-amz-security-token"))
    return { code: "InvalidSignatureException", message: "The request signature we calculated does not match the signature you provided." };
  const amzDate = get("x-amz-date")[0] ?? "";
  const when = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (!when || scopeDate !== amzDate.slice(0, 8)) return { code: "IncompleteSignatureException", message: "Date must be in ISO-8601 'basic format'." };
  const t = Date.UTC(+when[1]!, +when[2]! - 1, +when[3]!, +when[4]!, +when[5]!, +when[6]!);
  if (Math.abs(t - expect.now) > 15 * 60_000) return { code: "InvalidSignatureException", message: "Signature expired." };

  const q = req.target.indexOf("?");
  const rawPath = q < 0 ? req.target : req.target.slice(0, q);
  const rawQuery = q < 0 ? "" : req.target.slice(q + 1);
  const canonicalPath = uriEncode(rawPath, true);
  const canonicalQuery = rawQuery
    .split("&")
    .filter(Boolean)
    .map((p) => {
      const eq = p.indexOf("=");
      const k = decodeURIComponent(eq < 0 ? p : p.slice(0, eq));
      const v = eq < 0 ? "" : decodeURIComponent(p.slice(eq + 1));
      return [uriEncode(k, false), uriEncode(v, false)] as const;
    })
    .sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : 1) : a[0] < b[0] ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
  const canonicalHeaders = signed
    .map((name) => {
      const values = get(name);
      if (values.length === 0) return undefined;
      return `${name}:${values.map((v) => v.trim().replace(/\s+/g, " ")).join(",")}\n`;
    })
    .join("");
  if (signed.some((name) => get(name).length === 0))
    return { code: "InvalidSignatureException", message: "The request signature we calculated does not match the signature you provided." };
  const canonical = [req.method, canonicalPath, canonicalQuery, canonicalHeaders, signedList, sha256(req.body)].join("\n");
  const scope = `${scopeDate}/${region}/${service}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(canonical)].join("\n");
  const kDate = hmac(`AWS4${keys.secretAccessKey}`, scopeDate!);
  const kSigning = hmac(hmac(hmac(kDate, region!), service!), "aws4_request");
  const expected = createHmac("sha256", kSigning).update(stringToSign).digest("hex");
  if (expected !== signature)
    return {
      code: "InvalidSignatureException",
      message:
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
    };
  return undefined;
}

export async function startAwsSecretsServer(opts: { region?: string; keys?: AwsServerKeys[]; now?: () => number } = {}): Promise<AwsSecretsServer> {
  const region = opts.region ?? "us-east-1";
  const now = opts.now ?? Date.now;
  const pki = await createTestPki({ dns: ["localhost"], ips: ["127.0.0.1"] });
  const keys = new Map<string, AwsServerKeys>((opts.keys ?? []).map((k) => [k.accessKeyId, k]));
  const secrets = new Map<string, StoredSecret>();
  const webIdentity = new Map<string, string>();
  const counts = { getSecretValue: 0, assumeRole: 0, refused: 0, total: 0 };
  const captured: CapturedRequest[] = [];
  const denied = new Set<string>();
  const webIdentityTokens: string[] = [];
  const account = "123456789012";
  const arnOf = (name: string) => `arn:aws:secretsmanager:${region}:${account}:secret:${name}-AbCdEf`;

  const jsonError = (status: number, code: string, message: string) =>
    new Response(JSON.stringify({ __type: code, message }), {
      status,
      headers: { "content-type": "application/x-amz-json-1.1", "x-amzn-errortype": code, "x-amzn-requestid": randomUUID() },
    });
  const xmlError = (status: number, code: string, message: string) =>
    new Response(
      `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>${code}</Code><Message>${message}</Message></Error><RequestId>${randomUUID()}</RequestId></ErrorResponse>`,
      { status, headers: { "content-type": "text/xml" } },
    );

  function find(id: string): StoredSecret | undefined {
    return secrets.get(id) ?? [...secrets.values()].find((s) => s.arn === id || id === s.arn.slice(0, -7));
  }

  function getSecretValue(body: string): Response {
    let input: Record<string, unknown>;
    try {
      input = JSON.parse(body);
    } catch {
      return jsonError(400, "SerializationException", "Start of structure or map found where not expected.");
    }
    const id = input.SecretId;
    if (typeof id !== "string" || id.length === 0 || id.length > 2048) return jsonError(400, "ValidationException", "1 validation error detected: SecretId");
    const secret = find(id);
    if (!secret) return jsonError(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.");
    if (denied.has(secret.name))
      return jsonError(400, "AccessDeniedException", `User is not authorized to perform: secretsmanager:GetSecretValue on resource: ${id}`);
    const versionId = input.VersionId;
    const stage = input.VersionStage ?? (versionId === undefined ? "AWSCURRENT" : undefined);
    const version = secret.versions.find((v) => (versionId === undefined || v.id === versionId) && (stage === undefined || v.stages.has(stage as string)));
    if (!version) return jsonError(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label or version.");
    return new Response(
      JSON.stringify({
        ARN: secret.arn,
        Name: secret.name,
        VersionId: version.id,
        ...(version.string !== undefined ? { SecretString: version.string } : { SecretBinary: Buffer.from(version.binary!).toString("base64") }),
        VersionStages: [...version.stages],
        CreatedDate: version.created / 1000,
      }),
      { headers: { "content-type": "application/x-amz-json-1.1", "x-amzn-requestid": randomUUID() } },
    );
  }

  function assumeRoleWithWebIdentity(form: URLSearchParams): Response {
    if (form.get("Version") !== "2011-06-15") return xmlError(400, "InvalidParameterValue", "Version");
    const token = form.get("WebIdentityToken") ?? "";
    const role = form.get("RoleArn") ?? "";
    const session = form.get("RoleSessionName") ?? "";
    if (!/^[\w+=,.@-]{2,64}$/.test(session)) return xmlError(400, "ValidationError", "RoleSessionName");
    webIdentityTokens.push(token);
    if (webIdentity.get(token) !== role) return xmlError(400, "InvalidIdentityToken", "Couldn't retrieve verification key from your identity provider");
    const issued: AwsServerKeys = {
      accessKeyId: `ASIA${randomUUID().replace(/-/g, "").slice(0, 16).toUpperCase()}`,
      secretAccessKey: randomUUID(),
      sessionToken: `sts-${randomUUID()}`,
    };
    keys.set(issued.accessKeyId, issued);
    const expiration = new Date(now() + server.stsDurationSeconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
    return new Response(
      `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:broker</SubjectFromWebIdentityToken>
    <Audience>sts.amazonaws.com</Audience>
    <AssumedRoleUser>
      <Arn>${role.replace(":role/", ":assumed-role/").replace("arn:aws:iam:", "arn:aws:sts:")}/${session}</Arn>
      <AssumedRoleId>AROACLKWSDQRAOEXAMPLE:${session}</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <SessionToken>${issued.sessionToken}</SessionToken>
      <SecretAccessKey>${issued.secretAccessKey}</SecretAccessKey>
      <Expiration>${expiration}</Expiration>
      <AccessKeyId>${issued.accessKeyId}</AccessKeyId>
    </Credentials>
    <Provider>www.amazon.com</Provider>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata>
    <RequestId>${randomUUID()}</RequestId>
  </ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`,
      { headers: { "content-type": "text/xml" } },
    );
  }

  const bun = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: pki.certPem, key: pki.keyPem },
    async fetch(req) {
      counts.total++;
      const url = new URL(req.url);
      const body = new Uint8Array(await req.arrayBuffer());
      const headers = [...req.headers.entries()] as [string, string][];
      const target = `${url.pathname}${url.search}`;
      captured.push({ method: req.method, target, headers, body: new TextDecoder().decode(body) });
      if (server.failing) return jsonError(500, "InternalServiceError", "An error occurred on the server side.");
      if (req.method !== "POST") return jsonError(404, "UnknownOperationException", "");
      const contentType = req.headers.get("content-type") ?? "";
      if (contentType.startsWith("application/x-www-form-urlencoded")) {
        const form = new URLSearchParams(new TextDecoder().decode(body));
        if (form.get("Action") !== "AssumeRoleWithWebIdentity") return xmlError(400, "InvalidAction", "Could not find operation");
        counts.assumeRole++;
        return assumeRoleWithWebIdentity(form);
      }
      if (contentType !== "application/x-amz-json-1.1") return jsonError(400, "SerializationException", "");
      const refusal = verifySigV4({ method: req.method, target, headers, body }, (id) => keys.get(id), { region, service: "secretsmanager", now: now() });
      if (refusal) {
        counts.refused++;
        return jsonError(400, refusal.code, refusal.message);
      }
      if (req.headers.get("x-amz-target") !== "secretsmanager.GetSecretValue") return jsonError(400, "UnknownOperationException", "");
      counts.getSecretValue++;
      return getSecretValue(new TextDecoder().decode(body));
    },
  });

  const server: AwsSecretsServer = {
    port: bun.port!,
    url: `https://localhost:${bun.port}`,
    pki,
    region,
    counts,
    captured,
    denied,
    webIdentityTokens,
    stsDurationSeconds: 3600,
    failing: false,
    put(name, value, stages = ["AWSCURRENT"]) {
      let s = secrets.get(name);
      if (!s) {
        s = { name, arn: arnOf(name), versions: [] };
        secrets.set(name, s);
      }
      const v: Version = {
        id: randomUUID(),
        ...(typeof value === "string" ? { string: value } : { binary: value }),
        stages: new Set(),
        created: now(),
      };
      s.versions.push(v);
      for (const label of stages) server.stage(name, label, v.id);
      return v.id;
    },
    stage(name, label, versionId) {
      const s = secrets.get(name)!;
      const current = label === "AWSCURRENT" ? s.versions.find((v) => v.stages.has("AWSCURRENT")) : undefined;
      for (const v of s.versions) {
        if (label === "AWSCURRENT") v.stages.delete("AWSPREVIOUS");
        v.stages.delete(label);
      }
      s.versions.find((v) => v.id === versionId)!.stages.add(label);
      if (current && current.id !== versionId) current.stages.add("AWSPREVIOUS");
    },
    arnOf,
    addKeys(k) {
      keys.set(k.accessKeyId, k);
    },
    acceptWebIdentity(token, roleArn) {
      webIdentity.set(token, roleArn);
    },
    stop() {
      bun.stop(true);
    },
  };
  return server;
}
