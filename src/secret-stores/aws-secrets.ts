// AWS Secrets Manager (issue 36): GetSecretValue over the AWS JSON 1.1 protocol (POST /, X-Amz-Target
// secretsmanager.GetSecretValue), signed with the broker's own SigV4 signer (egress/sigv4.ts
// signAwsRequest, given a plan built here) and sent through storeHttp: the upstream TLS client and the
// network guard. Credentials: keys the connection holds, or the standard environment: static keys
// (AWS_ACCESS_KEY_ID…) or a web-identity token file exchanged with STS AssumeRoleWithWebIdentity (the
// file read again at each exchange, the answer kept until shortly before it expires).
// Errors name the host, the secret's path and a code from a fixed list, never text the store wrote.

import { readFile as fsReadFile } from "node:fs/promises";
import { signAwsRequest, type MintedPlan } from "../egress/index.ts";
import { Secret } from "../secret.ts";
import { jsonObject, storeHttp, type StoreAnswer, type StoreHttpDeps } from "./store-http.ts";
import { SecretStoreError, type SecretAddress, type SecretRead, type SecretStoreClient } from "./types.ts";

export type AwsAuth =
  | { readonly kind: "keys"; readonly accessKeyId: Secret; readonly secretAccessKey: Secret; readonly sessionToken?: Secret }
  | { readonly kind: "environment" };

export interface AwsConnection {
  readonly region: string;
  /** Default https://secretsmanager.<region>.amazonaws.com. */
  readonly endpoint?: string;
  /** STS for web identity; default https://sts.<region>.amazonaws.com. */
  readonly stsEndpoint?: string;
  readonly auth: AwsAuth;
}

export interface AwsClientOptions {
  /** The environment read for `auth.kind: "environment"` (default process.env), at every read. */
  readonly env?: Record<string, string | undefined>;
  readonly now?: () => number;
  /** Reads the web-identity token file (default fs). */
  readonly readFile?: (path: string) => Promise<string>;
}

/** Temporary credentials are renewed this long before they expire. */
export const AWS_CREDENTIALS_MARGIN_MS = 5 * 60_000;

/** Error codes repeated in messages as is (AWS's __type names); any other code is not quoted. */
const KNOWN_CODES: ReadonlySet<string> = new Set([
  "ResourceNotFoundException",
  "AccessDeniedException",
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignature",
  "MissingAuthenticationTokenException",
  "ExpiredTokenException",
  "InvalidClientTokenId",
  "SignatureDoesNotMatch",
  "DecryptionFailure",
  "InvalidParameterException",
  "InvalidRequestException",
  "InternalServiceError",
  "ThrottlingException",
  "InvalidIdentityToken",
  "IDPRejectedClaim",
  "IDPCommunicationError",
  "ExpiredToken",
  "AccessDenied",
  "MalformedPolicyDocument",
  "RegionDisabledException",
]);
const DENIED_CODES: ReadonlySet<string> = new Set([
  "AccessDeniedException",
  "UnrecognizedClientException",
  "InvalidSignatureException",
  "IncompleteSignature",
  "MissingAuthenticationTokenException",
  "ExpiredTokenException",
  "InvalidClientTokenId",
  "SignatureDoesNotMatch",
  "DecryptionFailure",
  "InvalidIdentityToken",
  "IDPRejectedClaim",
  "ExpiredToken",
  "AccessDenied",
]);

const VERSION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A version is a VersionId when it looks like one (AWS makes them UUIDs), otherwise a stage name (AWSCURRENT…). */
export function versionSelector(version: string): { VersionId: string } | { VersionStage: string } {
  return VERSION_ID.test(version) ? { VersionId: version } : { VersionStage: version };
}

interface Keys {
  readonly accessKeyId: Secret;
  readonly secretAccessKey: Secret;
  readonly sessionToken?: Secret;
}

export function createAwsSecretsClient(deps: StoreHttpDeps, conn: AwsConnection, opts: AwsClientOptions = {}): SecretStoreClient {
  const now = opts.now ?? Date.now;
  const readFile = opts.readFile ?? ((p: string) => fsReadFile(p, "utf8"));
  const endpoint = new URL(conn.endpoint ?? `https://secretsmanager.${conn.region}.amazonaws.com`);
  const stsEndpoint = new URL(conn.stsEndpoint ?? `https://sts.${conn.region}.amazonaws.com`);
  const host = endpoint.host;
  const port = Number(endpoint.port || 443);
  /** SECRET: what went out as is: session tokens and web-identity tokens (the secret key only signs). */
  const sent: Secret[] = [];
  const noteSent = (s: Secret | undefined) => {
    if (s && !sent.some((x) => x.reveal() === s.reveal())) sent.push(s);
  };
  let assumed: { keys: Keys; renewAt: number } | undefined;
  let assuming: Promise<Keys> | undefined;

  async function keys(): Promise<Keys> {
    if (conn.auth.kind === "keys") return conn.auth;
    const env = opts.env ?? process.env;
    const id = env.AWS_ACCESS_KEY_ID;
    const secret = env.AWS_SECRET_ACCESS_KEY;
    if (id && secret) {
      const token = env.AWS_SESSION_TOKEN;
      return { accessKeyId: new Secret(id), secretAccessKey: new Secret(secret), ...(token && { sessionToken: new Secret(token) }) };
    }
    const tokenFile = env.AWS_WEB_IDENTITY_TOKEN_FILE;
    const roleArn = env.AWS_ROLE_ARN;
    if (!tokenFile || !roleArn)
      throw new SecretStoreError(
        `AWS Secrets Manager ${host}: no credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN)`,
        "invalid",
      );
    if (assumed && now() < assumed.renewAt) return assumed.keys;
    assuming ??= assumeRole(tokenFile, roleArn, env.AWS_ROLE_SESSION_NAME).finally(() => {
      assuming = undefined;
    });
    return assuming;
  }

  async function assumeRole(tokenFile: string, roleArn: string, sessionName: string | undefined): Promise<Keys> {
    let token: string;
    try {
      token = (await readFile(tokenFile)).trim();
    } catch {
      throw new SecretStoreError(`AWS STS: the web identity token file ${tokenFile} cannot be read`, "invalid");
    }
    if (!token) throw new SecretStoreError(`AWS STS: the web identity token file ${tokenFile} is empty`, "invalid");
    const webToken = new Secret(token);
    noteSent(webToken); // before it goes: a refused exchange's token is a needle too
    const form = new URLSearchParams({
      Action: "AssumeRoleWithWebIdentity",
      Version: "2011-06-15",
      RoleArn: roleArn,
      RoleSessionName: sessionName || `broker-${now()}`,
      // reveal: the token is the request's credential (the exchange is unsigned by design)
      WebIdentityToken: webToken.reveal(),
    });
    const answer = await storeHttp(deps, {
      method: "POST",
      url: new URL("/", stsEndpoint).href,
      headers: [
        ["content-type", "application/x-www-form-urlencoded; charset=utf-8"],
        ["accept", "text/xml"],
      ],
      body: new TextEncoder().encode(form.toString()),
    });
    const xml = new TextDecoder().decode(answer.body);
    if (answer.status !== 200) {
      const code = /<Code>([A-Za-z]+)<\/Code>/.exec(xml)?.[1];
      throw errorFor(`AWS STS ${stsEndpoint.host}: AssumeRoleWithWebIdentity for ${roleArn}`, answer.status, code);
    }
    const creds = /<Credentials>([\s\S]*?)<\/Credentials>/.exec(xml)?.[1] ?? "";
    const field = (name: string) => {
      const v = new RegExp(`<${name}>([^<]*)</${name}>`).exec(creds)?.[1];
      return v === undefined ? undefined : unescapeXml(v);
    };
    const accessKeyId = field("AccessKeyId");
    const secretAccessKey = field("SecretAccessKey");
    const sessionToken = field("SessionToken");
    const expiration = Date.parse(field("Expiration") ?? "");
    if (!accessKeyId || !secretAccessKey || !sessionToken || Number.isNaN(expiration))
      throw new SecretStoreError(`AWS STS ${stsEndpoint.host}: AssumeRoleWithWebIdentity answered without credentials`, "invalid", answer.status);
    const k: Keys = { accessKeyId: new Secret(accessKeyId), secretAccessKey: new Secret(secretAccessKey), sessionToken: new Secret(sessionToken) };
    assumed = { keys: k, renewAt: Math.max(now(), expiration - AWS_CREDENTIALS_MARGIN_MS) };
    return k;
  }

  async function getSecretValue(address: SecretAddress): Promise<StoreAnswer> {
    const k = await keys();
    noteSent(k.sessionToken);
    const body = new TextEncoder().encode(JSON.stringify({ SecretId: address.path, ...(address.version && versionSelector(address.version)) }));
    const inputs = new Map<string, Secret>([
      ["access_key_id", k.accessKeyId],
      ["secret_access_key", k.secretAccessKey],
      ...(k.sessionToken ? [["session_token", k.sessionToken] as [string, Secret]] : []),
    ]);
    const plan: MintedPlan = {
      type: "aws_sigv4",
      fields: { region: conn.region, service: "secretsmanager" },
      inputs,
      fingerprint: "secret-store:aws",
    };
    const path = endpoint.pathname || "/";
    const signed = await signAwsRequest(
      plan,
      { host: endpoint.hostname.replace(/^\[|\]$/g, ""), port },
      {
        method: "POST",
        target: path,
        headers: [
          ["content-type", "application/x-amz-json-1.1"],
          ["x-amz-target", "secretsmanager.GetSecretValue"],
        ],
        body: new Blob([body]).stream(),
        bodyLength: body.byteLength,
      },
      now(),
    );
    return storeHttp(deps, { method: "POST", url: new URL(signed.target, endpoint).href, headers: signed.headers, body });
  }

  return {
    async read(address: SecretAddress): Promise<SecretRead> {
      const what = `AWS Secrets Manager ${host}: ${address.path}${address.version ? ` (version ${address.version})` : ""}`;
      const answer = await getSecretValue(address);
      const json = jsonObject(answer);
      if (answer.status !== 200) {
        const raw = typeof json?.__type === "string" ? json.__type : (answer.headers.find(([n]) => n.toLowerCase() === "x-amzn-errortype")?.[1] ?? "");
        const code = raw.split("#").pop()?.split(":")[0];
        const err = errorFor(what, answer.status, code);
        if (err.kind === "denied") assumed = undefined; // temporary credentials refused: exchange the token again next time
        throw err;
      }
      if (!json) throw new SecretStoreError(`${what}: the answer is not a JSON object`, "invalid", answer.status);
      const version = typeof json.VersionId === "string" ? json.VersionId : "";
      let text: string;
      if (typeof json.SecretString === "string") {
        text = json.SecretString;
      } else if (typeof json.SecretBinary === "string") {
        try {
          text = new TextDecoder("utf-8", { fatal: true }).decode(Buffer.from(json.SecretBinary, "base64"));
        } catch {
          throw new SecretStoreError(`${what}: the binary secret is not UTF-8 text`, "invalid", answer.status);
        }
      } else {
        throw new SecretStoreError(`${what}: the answer holds neither SecretString nor SecretBinary`, "invalid", answer.status);
      }
      if (address.field === undefined) return { value: new Secret(text), version };
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new SecretStoreError(`${what}: the secret is not a JSON object, so it has no field ${address.field}`, "invalid");
      }
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
        throw new SecretStoreError(`${what}: the secret is not a JSON object, so it has no field ${address.field}`, "invalid");
      const value = (parsed as Record<string, unknown>)[address.field];
      if (value === undefined || !Object.hasOwn(parsed, address.field)) throw new SecretStoreError(`${what}: no field ${address.field}`, "not_found");
      if (typeof value !== "string") throw new SecretStoreError(`${what}: the field ${address.field} is not a string`, "invalid");
      return { value: new Secret(value), version };
    },
    sentValues: () => [...sent],
  };
}

function errorFor(what: string, status: number, code: string | undefined): SecretStoreError {
  const named = code && KNOWN_CODES.has(code) ? ` (${code})` : "";
  if (code === "ResourceNotFoundException") return new SecretStoreError(`${what}: not found${named}`, "not_found", status);
  if (code && DENIED_CODES.has(code)) return new SecretStoreError(`${what}: access denied${named}`, "denied", status);
  if (status >= 500) return new SecretStoreError(`${what}: the store failed with HTTP ${status}${named}`, "unreachable", status);
  if (status === 401 || status === 403) return new SecretStoreError(`${what}: access denied (HTTP ${status})${named}`, "denied", status);
  return new SecretStoreError(`${what}: refused with HTTP ${status}${named}`, "invalid", status);
}

function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" })[e]!);
}
