// Credentials by reference with the compiled binary (issue 36, acceptance): for each of the four stores
// (HashiCorp Vault KV v2 by AppRole and by token, AWS Secrets Manager by access keys, Google Secret Manager by a
// service-account key, Azure Key Vault by client credentials), each played by its test server from
// tests/helpers/secret-stores/, the owner creates a connection through the API, shares it with the vault, sets a
// credential by reference and a service for a local HTTPS upstream; an agent's real curl under `broker vault run`
// (the HTTPS_PROXY path) gets the stored value injected; a value rotated in the store is injected after one
// refresh interval; with the store stopped the last value serves through the grace, then 502
// credential_unavailable naming the reference. A second connection with a long interval shows the upstream's 401
// making the broker read the store again at once. No value, store token, secret id, secret key, private key or
// client secret appears in anything the agent, the owner's API answers, the server's log or the audit log show.
// The four stores run side by side (the waits are the refresh interval and the grace, not work).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { startAwsSecretsServer } from "../helpers/secret-stores/aws-server.ts";
import { startAzureServer } from "../helpers/secret-stores/azure-server.ts";
import {
  pollUntil,
  requireCurl,
  startRecordingUpstream,
  startStoreBroker,
  VAULT,
  type CurlAnswer,
  type RecordingUpstream,
  type StoreAgent,
  type StoreBroker,
} from "../helpers/secret-stores/e2e-broker.ts";
import { startGoogleServer } from "../helpers/secret-stores/google-server.ts";
import { startVaultServer } from "../helpers/secret-stores/vault-server.ts";

const REFRESH_S = 10;
const GRACE_S = 10;
const hasCurl = requireCurl();

/** One running store as a test uses it. */
interface StoreInstance {
  /** The store's CA for BROKER_UPSTREAM_CA_FILE (Vault's goes in its connection's ca_pem instead). */
  readonly caPem?: string;
  /** POST /v1/secret-stores's kind, settings and auth. */
  readonly connection: Record<string, unknown>;
  /** The reference past `<connection>:`. */
  readonly ref: string;
  /** Writes a new version holding `value`. */
  set(value: string): void;
  /** Makes the store unreachable (its listener closed, its connections cut). */
  stop(): Promise<void>;
  /** SECRET: what the broker signs in with, and what the store issued to it. */
  secrets(): string[];
  /** The store saw only requests it authenticated (signatures, assertions, logins verified). */
  checkAuthenticated(): void;
}

interface StoreCase {
  readonly kind: "vault" | "aws" | "google" | "azure";
  /** `main`: the connection of the rotation and outage test; `refused`: the one of the 401 test. */
  start(use: "main" | "refused"): Promise<StoreInstance>;
  /** The service's auth for the credential key, and where the upstream finds the value. */
  readonly service: { auth: (key: string) => Record<string, unknown>; header: string; prefix: string };
}

const bearer = { auth: (key: string) => ({ type: "bearer", token: key }), header: "authorization", prefix: "Bearer " };

const CASES: StoreCase[] = [
  {
    kind: "vault",
    service: bearer,
    async start(use) {
      const vault = await startVaultServer();
      const roleId = `role-${crypto.randomUUID()}`;
      const secretId = `secret-id-${crypto.randomUUID()}`;
      const token = `hvs.${crypto.randomUUID().replaceAll("-", "")}`;
      vault.addAppRole(roleId, secretId, { ttlSeconds: 600, allow: ["secret/data/team/"] });
      vault.addToken(token, { allow: ["secret/data/team/"] });
      const auth = use === "main" ? { method: "approle", role_id: roleId, secret_id: secretId } : { method: "token", token };
      return {
        connection: { kind: "vault", address: vault.address, ca_pem: vault.pki.caPem, auth },
        ref: "team/api#token",
        set: (value) => void vault.put("team/api", { token: value, note: "rotated by the test" }),
        stop: () => vault.stop(),
        secrets: () => [roleId, secretId, token, ...vault.issued],
        checkAuthenticated() {
          expect(vault.counts.reads).toBeGreaterThan(0);
          if (use === "main") expect(vault.counts.logins).toBeGreaterThan(0);
          // Every read carried a token the server issued or was given.
          for (const r of vault.requests.filter((q) => q.method === "GET")) expect([token, ...vault.issued]).toContain(String(r.headers["x-vault-token"]));
        },
      };
    },
  },
  {
    kind: "aws",
    service: { auth: (key) => ({ type: "header", header: "X-Api-Key", token: key }), header: "x-api-key", prefix: "" },
    async start() {
      const keys = {
        accessKeyId: `AKIA${crypto.randomUUID().replaceAll("-", "").slice(0, 16).toUpperCase()}`,
        secretAccessKey: `aws-secret-${crypto.randomUUID()}`,
      };
      const aws = await startAwsSecretsServer({ region: "eu-west-1", keys: [keys] });
      return {
        caPem: aws.pki.caPem,
        connection: {
          kind: "aws",
          region: "eu-west-1",
          endpoint: `https://127.0.0.1:${aws.port}`,
          auth: { method: "keys", access_key_id: keys.accessKeyId, secret_access_key: keys.secretAccessKey },
        },
        ref: "prod/payments-api#api_key",
        set: (value) => void aws.put("prod/payments-api", JSON.stringify({ api_key: value, owner: "payments" })),
        stop: async () => aws.stop(),
        secrets: () => [keys.secretAccessKey],
        checkAuthenticated() {
          // Every request's SigV4 signature was recomputed by the server and matched.
          expect(aws.counts.getSecretValue).toBeGreaterThan(0);
          expect(aws.counts.refused).toBe(0);
        },
      };
    },
  },
  {
    kind: "google",
    service: bearer,
    async start() {
      const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
      const privatePem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
      const project = "broker-e2e-project";
      const clientEmail = `broker-reader@${project}.iam.gserviceaccount.com`;
      const keyId = crypto.randomUUID().replaceAll("-", "");
      const google = await startGoogleServer({ project, clientEmail, keyId, publicKey });
      const keyFile = JSON.stringify({
        type: "service_account",
        project_id: project,
        private_key_id: keyId,
        private_key: privatePem,
        client_email: clientEmail,
        client_id: "109876543210987654321",
        token_uri: google.tokenUri,
      });
      // Any 64-character line of the key's base64 would show a leak of the key in any framing.
      const keyLines = privatePem.split("\n").filter((l) => l.length === 64);
      return {
        caPem: google.pki.caPem,
        connection: { kind: "google", project, endpoint: google.endpoint, auth: { method: "service_account_key", key: keyFile } },
        ref: "payments-api-token",
        set: (value) => void google.addVersion("payments-api-token", value),
        stop: () => google.close(),
        secrets: () => [...keyLines, ...google.issued, ...google.assertions],
        checkAuthenticated() {
          // The token endpoint verified each assertion with jose; every access carried a token it issued.
          expect(google.counters.tokensIssued).toBeGreaterThan(0);
          expect(google.counters.tokenRefusals).toBe(0);
          expect(google.counters.unauthenticated).toBe(0);
          expect(google.counters.accessed).toBeGreaterThan(0);
        },
      };
    },
  },
  {
    kind: "azure",
    service: { auth: (key) => ({ type: "header", header: "X-Api-Key", token: key, prefix: "Token " }), header: "x-api-key", prefix: "Token " },
    async start() {
      const az = await startAzureServer();
      return {
        caPem: az.pki.caPem,
        connection: {
          kind: "azure",
          vault_url: az.url,
          authority: az.url,
          auth: { method: "client_credentials", tenant: az.tenant, client_id: az.clientId, client_secret: az.clientSecret },
        },
        ref: "payments-api-key",
        set: (value) => void az.setSecret("payments-api-key", value),
        stop: () => az.close(),
        secrets: () => [az.clientSecret, ...az.issued],
        checkAuthenticated() {
          // Only correctly formed client-credentials requests get a token; every read carried one.
          expect(az.counters.tokensIssued).toBeGreaterThan(0);
          expect(az.counters.tokenRefusals).toBe(0);
          expect(az.counters.unauthorized).toBe(0);
          expect(az.counters.secretReads).toBeGreaterThan(0);
        },
      };
    },
  },
];

interface Prepared {
  readonly c: StoreCase;
  readonly main: StoreInstance;
  readonly refused: StoreInstance;
  readonly upstream: RecordingUpstream;
  readonly refusedUpstream: RecordingUpstream;
  agent: StoreAgent;
}

let broker: StoreBroker;
const prepared = new Map<string, Prepared>();
/** Every credential value the tests put in a store: never to be seen. */
const values: string[] = [];
/** Everything the agents got back (curl's output and the CLI's), for the leak check. */
const agentSaw: string[] = [];

const newValue = (label: string) => {
  const v = `${label}-${crypto.randomUUID()}`;
  values.push(v);
  return v;
};

beforeAll(async () => {
  if (!hasCurl) return;
  for (const c of CASES) {
    const [main, refused, upstream, refusedUpstream] = await Promise.all([
      c.start("main"),
      c.start("refused"),
      startRecordingUpstream(c.service.header, c.service.prefix),
      startRecordingUpstream(c.service.header, c.service.prefix),
    ]);
    prepared.set(c.kind, { c, main, refused, upstream, refusedUpstream, agent: undefined as unknown as StoreAgent });
  }
  const cas = [...prepared.values()].flatMap((p) => [p.main.caPem, p.refused.caPem, p.upstream.caPem, p.refusedUpstream.caPem]).filter((x): x is string => !!x);
  broker = await startStoreBroker({ cas });
  // Every connection exists before the tests run side by side: a change to one connection makes the broker drop
  // the values of every shared one (see secret-store-connection-change.test.ts), which would race the first reads.
  for (const p of prepared.values()) {
    p.agent = await broker.agent(`${p.c.kind}-agent`);
    await connect(p, p.main, `${p.c.kind}-main`, REFRESH_S);
    // An interval far longer than the test: only the 401 can bring the new value in time.
    await connect(p, p.refused, `${p.c.kind}-refused`, 3600);
  }
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  for (const p of prepared.values()) {
    await Promise.allSettled([p.main.stop(), p.refused.stop(), p.upstream.upstream.close(), p.refusedUpstream.upstream.close()]);
  }
});

/** The agent's request, kept for the leak check. */
async function agentCurl(p: Prepared, url: string): Promise<CurlAnswer> {
  const r = await p.agent.curl(url);
  agentSaw.push(r.response, r.stderr);
  return r;
}

/** Creates the owner connection and shares it with the vault. */
async function connect(p: Prepared, store: StoreInstance, name: string, refreshSeconds: number): Promise<void> {
  const created = await broker.api("POST", "/v1/secret-stores", { name, refresh_seconds: refreshSeconds, grace_seconds: GRACE_S, ...store.connection });
  expect([created.status, created.text]).toEqual([201, expect.any(String)]);
  expect(created.body).toMatchObject({ name, kind: p.c.kind, vault: null, refresh_seconds: refreshSeconds, grace_seconds: GRACE_S });
  const shared = await broker.api("PUT", `/v1/secret-stores/${name}/vaults/${VAULT}`);
  expect([shared.status, shared.body?.shared_with]).toEqual([200, [VAULT]]);
}

/** Sets `key` by reference through the connection, and a service for `upstream` that sends it. */
async function wire(p: Prepared, store: StoreInstance, name: string, key: string, upstream: RecordingUpstream): Promise<string> {
  const ref = `${name}:${store.ref}`;
  const set = await broker.api("PUT", `/v1/vaults/${VAULT}/credentials/${key}`, { ref });
  expect([set.status, set.text]).toEqual([200, expect.any(String)]);
  // The broker read the store once before answering, and says how that went.
  expect(set.body.reference).toMatchObject({ text: ref, connection: name, last_error: null });
  expect(set.body.reference.last_refresh).toEqual(expect.any(String));
  const service = await broker.api("POST", `/v1/vaults/${VAULT}/services`, { host: upstream.host, auth: p.c.service.auth(key) });
  expect([service.status, service.text]).toEqual([201, expect.any(String)]);
  return ref;
}

interface AuditRecord {
  status: number;
  credential_keys: string[];
  credential_refs: string[];
}

/** The vault's audit records for the upstream's host, once `count` are written (they are written behind the requests). */
async function auditOf(upstream: RecordingUpstream, count: number): Promise<AuditRecord[]> {
  let records: AuditRecord[] = [];
  await pollUntil(5000, async () => {
    const logs = await broker.api("GET", `/v1/vaults/${VAULT}/logs?limit=500&host=${encodeURIComponent(upstream.host)}`);
    expect(logs.status).toBe(200);
    records = logs.body.logs;
    return records.length >= count ? true : undefined;
  });
  expect(records.length).toBe(count);
  return records;
}

async function credentialView(key: string) {
  const r = await broker.api("GET", `/v1/vaults/${VAULT}/credentials/${key}`);
  expect(r.status).toBe(200);
  expect(r.body.value).toBeUndefined();
  return r.body.reference as { text: string; last_refresh: string | null; version_seen: string | null; last_error: string | null };
}

describe.concurrent.skipIf(!hasCurl)("a credential held in a secret store, under broker vault run", () => {
  for (const c of CASES) {
    test(`${c.kind}: injected, rotated after one interval, served through the grace, then 502 credential_unavailable`, async () => {
      const p = prepared.get(c.kind)!;
      const { main: store, upstream } = p;
      const key = `${c.kind.toUpperCase()}_API_KEY`;
      const name = `${c.kind}-main`;
      const v1 = newValue(`${c.kind}-first`);
      store.set(v1);
      const ref = await wire(p, store, name, key, upstream);
      const url = (path: string) => `https://${upstream.host}${path}`;

      // The stored value is injected; the upstream's echo of it reaches the agent redacted.
      const first = await agentCurl(p, url("/first"));
      expect([first.exitCode, first.status, first.stderr]).toEqual([0, 200, ""]);
      expect(upstream.values.at(-1)).toBe(v1);
      expect(first.body).toContain("[redacted]");

      const firstVersion = (await credentialView(key)).version_seen;
      expect(firstVersion).toEqual(expect.any(String));

      // Rotated in the store: the next request after one refresh interval carries the new value.
      const v2 = newValue(`${c.kind}-second`);
      const rotatedAt = Date.now();
      store.set(v2);
      const from = upstream.values.length;
      const rotated = await pollUntil((REFRESH_S + 3) * 1000, async () => {
        const r = await agentCurl(p, url("/after-rotation"));
        expect([r.exitCode, r.status]).toEqual([0, 200]);
        return upstream.values.at(-1) === v2 ? Date.now() : undefined;
      });
      const during = upstream.values.slice(from);
      expect(rotated).toBeDefined();
      expect(rotated! - rotatedAt).toBeLessThanOrEqual((REFRESH_S + 3) * 1000);
      // The old value until the new one: nothing else.
      expect(during.slice(0, -1).every((v) => v === v1)).toBe(true);
      const afterRotation = await credentialView(key);
      expect(afterRotation).toMatchObject({ text: ref, last_error: null });
      expect(afterRotation.version_seen).toEqual(expect.any(String));
      expect(afterRotation.version_seen).not.toBe(firstVersion);

      // The store stops. Its last value serves through the grace past its interval, then requests get 502.
      await store.stop();
      const stoppedAt = Date.now();
      const lastRead = Date.parse((await credentialView(key)).last_refresh!);
      expect(lastRead).toBeLessThanOrEqual(stoppedAt);
      const runsOut = lastRead + (REFRESH_S + GRACE_S) * 1000;
      // Past the refresh interval, within the grace: still the last value.
      await Bun.sleep(Math.max(0, lastRead + REFRESH_S * 1000 + 500 - Date.now()));
      const graced = await agentCurl(p, url("/in-grace"));
      expect([graced.exitCode, graced.status]).toEqual([0, 200]);
      expect(upstream.values.at(-1)).toBe(v2);
      expect(upstream.times.at(-1)!).toBeGreaterThan(lastRead + REFRESH_S * 1000);
      expect(upstream.times.at(-1)!).toBeLessThan(runsOut);
      const failing = await credentialView(key);
      expect(failing.last_error).toEqual(expect.any(String)); // the failed reads are shown, in words
      expect(failing.last_refresh).toBe(new Date(lastRead).toISOString());

      const refusal = await pollUntil(runsOut - Date.now() + 4000, async () => {
        const calls = upstream.values.length;
        const r = await agentCurl(p, url("/until-502"));
        // Refused: nothing reached the upstream.
        if (r.status !== 200) return { r, at: Date.now(), reached: upstream.values.length - calls };
        // Served until the value runs out (give or take the one-second sweep that notices it).
        expect(upstream.values.at(-1)).toBe(v2);
        expect(upstream.times.at(-1)!).toBeLessThan(runsOut + 1500);
        return undefined;
      });
      expect(refusal).toBeDefined();
      const { r: gone, at, reached } = refusal!;
      expect(at).toBeGreaterThanOrEqual(runsOut);
      expect([gone.status, reached]).toEqual([502, 0]);
      const envelope = JSON.parse(gone.body);
      expect(envelope.error).toBe("credential_unavailable");
      expect(envelope.message).toEqual(expect.any(String));
      expect(envelope.message).toContain(ref);
      for (const v of [v1, v2]) expect(gone.response).not.toContain(v);
      // Fail closed from then on.
      const again = await agentCurl(p, url("/still-gone"));
      expect(again.status).toBe(502);
      expect(JSON.parse(again.body).error).toBe("credential_unavailable");

      // The audit log names the reference of every injected request, never a value.
      // (Every request the upstream answered, and the two refused ones.)
      const records = await auditOf(upstream, upstream.values.length + 2);
      expect(records.filter((l) => l.status === 502).length).toBe(2);
      const injected = records.filter((l) => l.status === 200);
      expect(injected.length).toBe(upstream.values.length);
      for (const l of injected) expect([l.credential_keys, l.credential_refs]).toEqual([[key], [ref]]);

      // The connection and the credential list name the reference, never a value or the store's auth secrets.
      const conn = await broker.api("GET", `/v1/secret-stores/${name}`);
      expect(conn.status).toBe(200);
      expect(conn.body.references).toEqual([{ vault: VAULT, key, reference: expect.objectContaining({ text: ref }) }]);
      const list = await broker.api("GET", `/v1/vaults/${VAULT}/credentials`);
      expect(list.status).toBe(200);
      expect(list.body.credentials.find((x: { key: string }) => x.key === key)).toMatchObject({ key, reference: { text: ref } });
      store.checkAuthenticated();
    }, 90_000);

    test(`${c.kind}: an upstream's 401 to the old value makes the broker read the store again at once`, async () => {
      const p = prepared.get(c.kind)!;
      const { refused: store, refusedUpstream: upstream } = p;
      const key = `${c.kind.toUpperCase()}_REFUSED_KEY`;
      const name = `${c.kind}-refused`;
      const r1 = newValue(`${c.kind}-refused-first`);
      store.set(r1);
      const ref = await wire(p, store, name, key, upstream);
      const url = `https://${upstream.host}/refused`;
      const first = await agentCurl(p, url);
      expect([first.exitCode, first.status]).toEqual([0, 200]);
      expect(upstream.values.at(-1)).toBe(r1);

      const r2 = newValue(`${c.kind}-refused-second`);
      store.set(r2);
      upstream.refuse.add(r1);
      const rotatedAt = Date.now();
      const stale = await agentCurl(p, url);
      expect(stale.status).toBe(401);
      expect(upstream.values.at(-1)).toBe(r1);
      const from = upstream.values.length;
      const fresh = await pollUntil(5000, async () => {
        const r = await agentCurl(p, url);
        return r.status === 200 ? r : undefined;
      });
      expect(fresh?.status).toBe(200);
      expect(upstream.values.at(-1)).toBe(r2);
      expect(Date.now() - rotatedAt).toBeLessThan(10_000);
      // At most one more refusal while the read was under way.
      expect(upstream.values.slice(from, -1).filter((v) => v === r1).length).toBeLessThanOrEqual(1);
      // The refused request and the ones around it are audited under the reference.
      const records = await auditOf(upstream, upstream.values.length);
      expect(records.map((l) => l.status).sort()).toEqual([200, 200, 401, ...Array(upstream.values.length - 3).fill(401)].sort());
      for (const l of records) expect(l.credential_refs).toEqual([ref]);
      store.checkAuthenticated();
    }, 60_000);
  }
});

describe.skipIf(!hasCurl)("nothing secret is seen", () => {
  test("no value, store token, secret id, secret key, private key or client secret in any answer, output or log line", async () => {
    const secrets = [...values, ...[...prepared.values()].flatMap((p) => [...p.main.secrets(), ...p.refused.secrets()])];
    expect(values.length).toBe(CASES.length * 4);
    expect(secrets.every((s) => s.length >= 16)).toBe(true);
    // Read once more now, so every view is in what was seen.
    for (const p of prepared.values()) {
      await broker.api("GET", `/v1/secret-stores/${p.c.kind}-main`);
      await broker.api("GET", `/v1/secret-stores/${p.c.kind}-refused`);
      await broker.api("GET", `/v1/vaults/${VAULT}/logs?limit=500&host=${encodeURIComponent(p.upstream.host)}`);
      await broker.api("GET", `/v1/vaults/${VAULT}/logs?limit=500&host=${encodeURIComponent(p.refusedUpstream.host)}`);
    }
    await broker.api("GET", "/v1/secret-stores");
    await broker.api("GET", `/v1/vaults/${VAULT}/credentials`);
    const places: [string, string][] = [
      ["the agents' curl output", agentSaw.join("\n")],
      ["the owner's API answers and the CLI", broker.seen.join("\n")],
      ["the server's log", broker.server.logs()],
    ];
    const found: string[] = [];
    for (const [where, text] of places) for (const s of secrets) if (text.includes(s)) found.push(`${where}: ${s.slice(0, 24)}…`);
    expect(found).toEqual([]);
    expect(agentSaw.length).toBeGreaterThan(0);
  });
});
