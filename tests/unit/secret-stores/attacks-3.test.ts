// Attacks on shares narrowed to path prefixes (issue 36), at unit level: can a reference that the share's
// check (policy/secret-reference.ts pathAllowed, asked by workflows/secret-stores.ts and by the registry)
// lets through make a store read anything outside the prefixes? For each store kind, every attack text goes
// through the same steps as a real reference: parseReference, pathAllowed, then the kind's client with a
// recording upstream standing in for the network. Either a step refuses it before anything is sent, or the
// request that leaves names exactly the path the check saw, read the way the store reads it (the URL path
// normalised as a WHATWG URL parser does, dot segments and %2e included, then each segment percent-decoded;
// the AWS body's SecretId). Also: the AWS stand-in shows an ARN and a name reach the same secret, so a
// prefix written one way refuses the other (fail closed), never lets prod through.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { compileNetPolicy, createUpstream, type Upstream } from "../../../src/egress/index.ts";
import type { HeaderList } from "../../../src/http/index.ts";
import { parseReference, pathAllowed } from "../../../src/policy/index.ts";
import { createAwsSecretsClient } from "../../../src/secret-stores/aws-secrets.ts";
import { createAzureKeyVaultClient } from "../../../src/secret-stores/azure-keyvault.ts";
import { createGoogleSecretsClient } from "../../../src/secret-stores/google-secrets.ts";
import type { StoreHttpDeps } from "../../../src/secret-stores/store-http.ts";
import { SecretStoreError, type SecretStoreClient } from "../../../src/secret-stores/types.ts";
import { createVaultKvClient } from "../../../src/secret-stores/vault-kv.ts";
import { Secret } from "../../../src/secret.ts";
import { startAwsSecretsServer, type AwsSecretsServer } from "../../helpers/secret-stores/aws-server.ts";

interface Sent {
  readonly host: string;
  readonly method: string;
  readonly target: string;
  readonly headers: HeaderList;
  readonly body: string;
}

/** A recording stand-in for the network: answers each request with `answer(req)`, never dials. */
function recordingDeps(answer: (req: Sent) => { status: number; body: unknown }): { deps: StoreHttpDeps; sent: Sent[] } {
  const sent: Sent[] = [];
  const upstream: Upstream = {
    async send(dest, req) {
      const body = req.body ? new TextDecoder().decode(await new Response(req.body).arrayBuffer()) : "";
      const s: Sent = { host: dest.host, method: req.method, target: req.target, headers: req.headers, body };
      sent.push(s);
      const a = answer(s);
      return { status: a.status, statusText: "", headers: [["content-type", "application/json"]], body: new TextEncoder().encode(JSON.stringify(a.body)) };
    },
    open: () => Promise.reject(new Error("not used")),
    openPlain: () => Promise.reject(new Error("not used")),
    close() {},
  };
  const deps: StoreHttpDeps = {
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: [] }),
    resolver: async () => ["192.0.2.1"],
  };
  return { deps, sent };
}

/** A URL's path as a server sees it: WHATWG-normalised (dot segments, %2e and %2E count), then each segment decoded. */
function servedPath(target: string): string[] {
  return new URL(target, "https://store.test").pathname.split("/").map((s) => decodeURIComponent(s));
}

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const PRIVATE_PEM = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
const AZURE_VERSION = "0123456789abcdef0123456789abcdef";

interface Kind {
  readonly name: string;
  readonly prefixes: readonly string[];
  /** Builds a client on a recording network, and says which secret (its store's name) a request reads. */
  make(): { client: SecretStoreClient; sent: Sent[]; reads(req: Sent): string | undefined };
  /** Texts that must be refused somewhere, or read exactly what the check saw. */
  readonly attacks: readonly [text: string, version?: string][];
  /** What a vault with the share may read. */
  readonly allowed: readonly [text: string, version?: string][];
}

const KV_ANSWER = { data: { data: { v: "the-value" }, metadata: { version: 3 } } };

const KINDS: Kind[] = [
  {
    name: "vault",
    prefixes: ["team-a/"],
    make() {
      const { deps, sent } = recordingDeps(() => ({ status: 200, body: KV_ANSWER }));
      const client = createVaultKvClient(deps, { address: "https://vault.test:8200", auth: { kind: "token", token: new Secret("hvs.t") } });
      return {
        client,
        sent,
        reads(req) {
          const u = new URL(req.target, "https://vault.test");
          // Only a version number may follow; anything else in the query is a request the check never saw.
          if (u.search !== "" && !/^\?version=\d+$/.test(u.search)) return `query:${u.search}`;
          const parts = servedPath(req.target);
          if (parts.slice(0, 4).join("/") !== "/v1/secret/data") return `outside the mount: ${parts.join("/")}`;
          return parts.slice(4).join("/");
        },
      };
    },
    attacks: [
      ["corp:team-a/../prod/db#v"],
      ["corp:team-a/./../prod/db#v"],
      ["corp:team-a/x/../../prod/db#v"],
      ["corp:team-a%2F..%2Fprod/db#v"],
      ["corp:team-a/%2e%2e/prod/db#v"],
      ["corp:team-a/%2E%2E/prod/db#v"],
      ["corp:team-a/.%2e/prod/db#v"],
      ["corp:team-a/..%2fprod/db#v"],
      ["corp:team-a/..%5cprod/db#v"],
      ["corp:team-a\\..\\prod\\db#v"],
      ["corp:team-a/..\\..\\prod/db#v"],
      ["corp:team-a//../prod/db#v"],
      ["corp:team-a/x/#v"],
      ["corp:team-a/db?version=1#v"],
      ["corp:team-a/db%3Fx=1#v"],
      ["corp:team-a/..;/prod/db#v"],
      ["corp:team-a/;/../prod/db#v"],
      ["corp:team-a/%00/../prod#v"],
      ["corp:team-a/\u2024\u2024/prod/db#v"], // one dot leader: looks like ".."
      ["corp:team-a/\uff0e\uff0e/prod/db#v"], // full-width full stops
      ["corp:team\u2010a/db#v"], // a hyphen look-alike
      ["corp:TEAM-A/db#v"],
      ["corp:/team-a/../prod/db#v"],
      ["corp: team-a/db#v"],
      ["corp:team-a/db#../../prod/db"],
      ["corp:team-a/db#v", "1/../../prod"],
      ["corp:team-a/db#v", "1&version=2"],
      ["corp:team-a/db#v", "1#x"],
      ["corp:team-a/db#v", "../../../sys/raw/x"],
      ["corp:team-a/db#v#x"],
    ],
    allowed: [["corp:team-a/db#v"], ["corp:team-a/db#v", "2"], ["corp:team-a/deep/er/db"]],
  },
  {
    name: "aws",
    prefixes: ["team-a/"],
    make() {
      const { deps, sent } = recordingDeps(() => ({ status: 200, body: { SecretString: '{"v":"the-value"}', VersionId: "v1" } }));
      const client = createAwsSecretsClient(deps, {
        region: "eu-west-1",
        endpoint: "https://secretsmanager.test",
        auth: { kind: "keys", accessKeyId: new Secret("AKIDEXAMPLE"), secretAccessKey: new Secret("secret-key") },
      });
      return {
        client,
        sent,
        reads(req) {
          if (new URL(req.target, "https://x.test").pathname !== "/") return `another path: ${req.target}`;
          const body = JSON.parse(req.body) as { SecretId?: unknown };
          return typeof body.SecretId === "string" ? body.SecretId : "no SecretId";
        },
      };
    },
    attacks: [
      ["corp:team-a/../prod/db#v"],
      ["corp:team-a/./x#v"],
      ["corp:arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbCdEf#v"],
      ["corp:arn:aws:secretsmanager:eu-west-1:123456789012:secret:team-a/db#v"],
      ["corp:arn:aws:secretsmanager:eu-west-1:999999999999:secret:team-a/db#v"],
      ["corp:TEAM-A/db#v"],
      ["corp:team-a%2F..%2Fprod/db#v"],
      ["corp:team-a/db#v", "../../prod/db"],
      ["corp:team-a/db#v", '","SecretId":"prod/db'],
      ["corp:team-a/db\\u0022,\\u0022SecretId\\u0022:\\u0022prod/db#v"],
    ],
    allowed: [["corp:team-a/db#v"], ["corp:team-a/db", "AWSPREVIOUS"]],
  },
  {
    name: "google",
    prefixes: ["team-a-"],
    make() {
      const { deps, sent } = recordingDeps((req) => {
        if (req.host === "oauth.test") return { status: 200, body: { access_token: "ya29.token", expires_in: 3600, token_type: "Bearer" } };
        const id = /\/secrets\/([^/]+)\/versions\//.exec(new URL(req.target, "https://x.test").pathname)?.[1] ?? "x";
        return {
          status: 200,
          body: { name: `projects/my-project/secrets/${id}/versions/4`, payload: { data: Buffer.from('{"v":"the-value"}').toString("base64") } },
        };
      });
      const key = JSON.stringify({
        type: "service_account",
        client_email: "r@my-project.iam.gserviceaccount.com",
        private_key_id: "k1",
        private_key: PRIVATE_PEM,
      });
      const client = createGoogleSecretsClient(deps, {
        project: "my-project",
        serviceAccountKey: new Secret(key),
        endpoint: "https://secretmanager.test",
        tokenUri: "https://oauth.test/token",
      });
      return {
        client,
        sent,
        reads(req) {
          if (req.host === "oauth.test") return undefined; // the token request reads no secret
          const m = /^\/v1\/projects\/([^/]+)\/secrets\/([^/]+)\/versions\/([^/:]+):access$/.exec(servedPath(req.target).join("/"));
          if (!m || m[1] !== "my-project") return `elsewhere: ${req.target}`;
          return m[2]!;
        },
      };
    },
    attacks: [
      ["corp:team-a-x/../../other#v"],
      ["corp:team-a-x/versions/1#v"],
      ["corp:team-a-x:access#v"],
      ["corp:projects/other-project/secrets/team-a-x#v"],
      ["corp:team-a-%2e%2e#v"],
      ["corp:prod-db#v"],
      ["corp:team-a-x#v", "../../../other-project/secrets/prod-db/versions/1"],
      ["corp:team-a-x#v", "1:access?x="],
      ["corp:team-a-x#v", "latest/../../prod-db/versions/latest"],
    ],
    allowed: [["corp:team-a-db#v"], ["corp:team-a-db", "3"]],
  },
  {
    name: "azure",
    prefixes: ["team-a-"],
    make() {
      const { deps, sent } = recordingDeps((req) => {
        if (req.host === "login.test") return { status: 200, body: { access_token: "eyJ.token", expires_in: 3600, token_type: "Bearer" } };
        const name = /\/secrets\/([^/]+)\//.exec(new URL(req.target, "https://x.test").pathname)?.[1] ?? "x";
        const version = /\/secrets\/[^/]+\/([^/?]+)/.exec(new URL(req.target, "https://x.test").pathname)?.[1] ?? AZURE_VERSION;
        return { status: 200, body: { value: '{"v":"the-value"}', id: `https://kv.test/secrets/${name}/${version}` } };
      });
      const client = createAzureKeyVaultClient(deps, {
        vaultUrl: "https://kv.test",
        tenant: "contoso.onmicrosoft.com",
        clientId: "app",
        clientSecret: new Secret("client-secret"),
        authority: "https://login.test",
      });
      return {
        client,
        sent,
        reads(req) {
          if (req.host === "login.test") return undefined;
          const u = new URL(req.target, "https://kv.test");
          if (u.search !== "?api-version=7.4") return `query:${u.search}`;
          const m = /^\/secrets\/([^/]+)\/([^/]*)$/.exec(servedPath(req.target).join("/"));
          return m ? m[1]! : `elsewhere: ${req.target}`;
        },
      };
    },
    attacks: [
      ["corp:team-a-x/../prod#v"],
      ["corp:team-a-x/#v"],
      ["corp:team-a-%2e%2e/prod#v"],
      ["corp:team-a-x?api-version=1#v"],
      ["corp:prod-db#v"],
      ["corp:team-a-x#v", "../prod-db"],
      ["corp:team-a-x#v", "x?api-version=1"],
      ["corp:team-a-x#v", "%2e%2e"],
    ],
    allowed: [["corp:team-a-db#v"], ["corp:team-a-db", AZURE_VERSION]],
  },
];

/** Where an attack text stopped, or the secret the store was asked for. */
async function outcome(kind: Kind, text: string, version?: string): Promise<{ stopped: string } | { read: string; checked: string }> {
  const parsed = parseReference(text, version);
  if ("problem" in parsed) return { stopped: "grammar" };
  if (!pathAllowed(kind.prefixes, parsed.path)) return { stopped: "prefixes" };
  const { client, sent, reads } = kind.make();
  try {
    await client.read(parsed);
  } catch (err) {
    if (!(err instanceof SecretStoreError)) throw err;
    const secretReads = sent.map(reads).filter((r) => r !== undefined);
    if (secretReads.length === 0) return { stopped: `client (${err.kind})` };
    return { read: secretReads.join(" | "), checked: parsed.path };
  }
  const secretReads = sent.map(reads).filter((r): r is string => r !== undefined);
  return { read: secretReads.join(" | "), checked: parsed.path };
}

describe("a share narrowed to path prefixes: what pathAllowed let through is exactly what the store reads", () => {
  for (const kind of KINDS) {
    test(`${kind.name}: every attack text is stopped before any request, or reads exactly the path the check saw`, async () => {
      const leaks: string[] = [];
      const stages = new Set<string>();
      for (const [text, version] of kind.attacks) {
        const o = await outcome(kind, text, version);
        stages.add("stopped" in o ? o.stopped : "read");
        if ("stopped" in o) continue;
        if (o.read !== o.checked || !pathAllowed(kind.prefixes, o.read)) leaks.push(`${text}${version ? ` (version ${version})` : ""} → store read ${o.read}`);
      }
      expect(leaks).toEqual([]);
      // Not vacuous: the texts reach past the grammar, to the prefixes and to the client.
      expect(stages.has("prefixes")).toBe(true);
      expect([...stages].some((s) => s.startsWith("client") || s === "read")).toBe(true);
    });

    test(`${kind.name}: what the share allows is read as written`, async () => {
      for (const [text, version] of kind.allowed) {
        const path = (parseReference(text, version) as { path: string }).path;
        expect(await outcome(kind, text, version)).toEqual({ read: path, checked: path });
      }
    });
  }

  test("pathAllowed: a prefix is compared as written (case, ARN or name), and dot segments never pass", () => {
    expect(pathAllowed(["team-a/"], "team-a/db")).toBe(true);
    expect(pathAllowed(["team-a/"], "Team-A/db")).toBe(false);
    expect(pathAllowed(["team-a/"], "team-a/../prod")).toBe(false);
    expect(pathAllowed(["team-a/"], "team-a/./db")).toBe(false);
    expect(pathAllowed(["team-a/"], "team-a/x/..")).toBe(false);
    expect(pathAllowed(["team-a/"], "team-a/...")).toBe(true); // three dots: a name, not a dot segment, for every store
    expect(pathAllowed(["arn:aws:secretsmanager:eu-west-1:123456789012:secret:team-a/"], "team-a/db")).toBe(false);
    expect(pathAllowed(null, "anything/../at/all")).toBe(true); // not narrowed: the store's own policy is the fence
    // Documented: a prefix without its slash matches longer names too (the owner writes `payments/`).
    expect(pathAllowed(["team-a"], "team-ab/db")).toBe(true);
  });
});

describe("AWS: an ARN and a name name the same secret", () => {
  let aws: AwsSecretsServer;
  let upstream: Upstream;
  let client: SecretStoreClient;

  beforeAll(async () => {
    aws = await startAwsSecretsServer({ region: "eu-west-1", keys: [{ accessKeyId: "AKIDARNTEST0001", secretAccessKey: "arn-test-secret-key" }] });
    aws.put("team-a/db", JSON.stringify({ v: "team-a-value" }));
    aws.put("prod/db", JSON.stringify({ v: "prod-value" }));
    upstream = createUpstream({ ca: [aws.pki.caPem], connectTimeoutMs: 3000 });
    client = createAwsSecretsClient(
      { upstream, policy: compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] }), resolver: async () => ["127.0.0.1"] },
      {
        region: "eu-west-1",
        endpoint: aws.url,
        auth: { kind: "keys", accessKeyId: new Secret("AKIDARNTEST0001"), secretAccessKey: new Secret("arn-test-secret-key") },
      },
    );
  });

  afterAll(() => {
    aws?.stop();
    upstream?.close();
  });

  test("the stand-in (as Secrets Manager) answers the name, the full ARN and the ARN without its suffix with the same secret", async () => {
    const full = aws.arnOf("prod/db");
    for (const id of ["prod/db", full, full.slice(0, -7)]) expect((await client.read({ path: id, field: "v" })).value.reveal()).toBe("prod-value");
  });

  test("a share narrowed to the name prefix team-a/ refuses every ARN (prod's and team-a's own): fail closed, never prod", () => {
    for (const id of [aws.arnOf("prod/db"), aws.arnOf("prod/db").slice(0, -7), aws.arnOf("team-a/db"), aws.arnOf("team-a/db").slice(0, -7)])
      expect(pathAllowed(["team-a/"], id)).toBe(false);
    expect(pathAllowed(["team-a/"], "team-a/db")).toBe(true);
  });

  test("a share narrowed to an ARN prefix refuses the name form and another account's or region's ARN", () => {
    const prefix = aws.arnOf("team-a/").slice(0, -7); // arn:aws:secretsmanager:eu-west-1:<account>:secret:team-a/
    expect(pathAllowed([prefix], aws.arnOf("team-a/db"))).toBe(true);
    expect(pathAllowed([prefix], "team-a/db")).toBe(false);
    expect(pathAllowed([prefix], "prod/db")).toBe(false);
    expect(pathAllowed([prefix], aws.arnOf("prod/db"))).toBe(false);
    expect(pathAllowed([prefix], aws.arnOf("team-a/db").replace(":eu-west-1:", ":us-east-1:"))).toBe(false);
    expect(pathAllowed([prefix], aws.arnOf("team-a/db").replace(/:\d{12}:/, ":999999999999:"))).toBe(false);
  });
});
