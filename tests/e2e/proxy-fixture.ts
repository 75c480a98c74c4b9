// Shared set-up for the explicit-proxy end-to-end tests: a broker started in-process (real
// listener on 127.0.0.1:0, real store in a temp dir), trusting a local HTTPS upstream's CA through
// config, with an injectable DNS table, plus helpers for the HTTP API and for leak checks.

import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:net";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer, type RunningServer, type StartOptions } from "../../src/app/start.ts";
import { CHEAP_KDF } from "../helpers/api.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

export interface Broker {
  readonly apiUrl: string;
  readonly server: RunningServer;
  /** host:port of the transparent proxy listener, when started with `tunnel`. */
  readonly proxyAddress: string | undefined;
  readonly logLines: string[];
  readonly vault: string;
  /** User session of the instance owner (admin of the vault). */
  readonly userToken: string;
  /** Scoped session for the vault (role proxy). */
  readonly sessionToken: string;
  /** host → answers; a function is called on every lookup (rebinding). Unknown hosts fail to resolve. */
  readonly dns: Map<string, string[] | (() => string[])>;
  readonly lookups: string[];
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; headers: Headers }>;
  setCredential(key: string, value: string): Promise<void>;
  addService(host: string, auth: Record<string, unknown>, extra?: Record<string, unknown>): Promise<void>;
  proxy(hostPort: string, pathAndQuery: string, init?: RequestInit & { decompress?: boolean }): Promise<Response>;
  auditLogs(): Promise<any[]>;
  stop(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * A local HTTPS upstream with a fixed JSON answer (it never reflects what it received) and a broker
 * trusting it, resolving upstream.test to it: proposals refuse IP literals, and the test cert covers
 * that name. `host` is "upstream.test:<port>".
 */
export async function startNamedUpstream(): Promise<{ upstream: TestUpstream; broker: Broker; host: string }> {
  const upstream = await startUpstream((_req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ data: "upstream says hello" }));
  });
  const broker = await startBroker({ caPem: upstream.pki.caPem });
  broker.dns.set("upstream.test", ["127.0.0.1"]);
  return { upstream, broker, host: `upstream.test:${upstream.port}` };
}

/**
 * A local HTTPS upstream that answers what it was asked ({done: url, method, bytes}) and a broker with
 * one bearer service for it, on credential `key` = `secret`, under `rules`. `hp` is "127.0.0.1:<port>".
 */
export async function startRuledUpstream(secret: string, rules: unknown, key = "STRIPE_KEY"): Promise<{ upstream: TestUpstream; broker: Broker; hp: string }> {
  const upstream = await startUpstream((req, res, body) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ done: req.url, method: req.method, bytes: body.length }));
  });
  const broker = await startBroker({ caPem: upstream.pki.caPem });
  const hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential(key, secret);
  await broker.addService(hp, { type: "bearer", token: key }, { rules });
  return { upstream, broker, hp };
}

/** A JSON call to the broker's API at `apiUrl` (bearer `token` when given); a body that is not JSON stays text. */
export async function callApi(
  apiUrl: string,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {}
  return { status: res.status, body: parsed, headers: res.headers };
}

export async function startBroker(opts: {
  caPem: string;
  env?: Record<string, string>;
  /** Also run the transparent proxy (optionally with test limits). */
  tunnel?: StartOptions["tunnel"];
  /** the server's clock (default Date.now) */
  now?: () => number;
}): Promise<Broker> {
  const dir = mkdtempSync(join(tmpdir(), "broker-proxy-e2e-"));
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, opts.caPem);
  const dns = new Map<string, string[] | (() => string[])>();
  const lookups: string[] = [];
  const log = createMemoryLogger();
  const config = loadConfig({
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
    BROKER_UPSTREAM_CA_FILE: caFile,
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_UPSTREAM_TIMEOUT_MS: "15000",
    ...opts.env,
  });
  const server = await startServer({
    config,
    log,
    masterPassword: undefined,
    passwordKdf: CHEAP_KDF, // no test on this fixture is about hashing cost
    now: opts.now,
    tunnel: opts.tunnel,
    resolver: async (host) => {
      lookups.push(host);
      const a = dns.get(host);
      if (!a) throw new Error(`test resolver: no answer for ${host}`);
      return typeof a === "function" ? a() : a;
    },
  });
  const apiUrl = server.apiUrl;

  const api = (method: string, path: string, body?: unknown, token?: string) => callApi(apiUrl, method, path, body, token);
  async function must(method: string, path: string, body: unknown, token: string, status: number) {
    const r = await api(method, path, body, token);
    if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  const reg = await must("POST", "/v1/auth/register", { email: "owner@example.com", password: "correct horse battery" }, "", 201);
  const userToken: string = reg.token;
  const vault = "proxy-e2e";
  await must("POST", "/v1/vaults", { name: vault }, userToken, 201);
  const sess = await must("POST", "/v1/sessions", { vault, role: "proxy" }, userToken, 201);
  const sessionToken: string = sess.token;

  const broker: Broker = {
    apiUrl,
    server,
    proxyAddress: server.proxyAddress,
    logLines: log.lines,
    vault,
    userToken,
    sessionToken,
    dns,
    lookups,
    api,
    async setCredential(key, value) {
      await must("PUT", `/v1/vaults/${vault}/credentials/${key}`, { value }, userToken, 200);
    },
    async addService(host, auth, extra = {}) {
      await must("POST", `/v1/vaults/${vault}/services`, { host, auth, ...extra }, userToken, 201);
    },
    proxy(hostPort, pathAndQuery, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has("authorization")) headers.set("authorization", `Bearer ${sessionToken}`);
      return fetch(`${apiUrl}/proxy/${hostPort}${pathAndQuery}`, { redirect: "manual", ...init, headers });
    },
    async auditLogs() {
      return (await must("GET", `/v1/vaults/${vault}/logs?limit=1000`, undefined, userToken, 200)).logs;
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    [Symbol.asyncDispose]() {
      return broker.stop();
    },
  };
  return broker;
}

/** Text of a response's status line, headers and body, for leak checks. */
export async function dumpResponse(res: Response): Promise<string> {
  const lines = [`${res.status} ${res.statusText}`];
  res.headers.forEach((v, k) => lines.push(`${k}: ${v}`));
  return `${lines.join("\n")}\n\n${await res.text()}`;
}

/** Asserts a secret appears nowhere the broker produced: the given outputs, log lines, audit records. */
export async function expectNoLeak(broker: Broker, secret: string, outputs: string[] = []): Promise<void> {
  const variants = [secret, Buffer.from(secret).toString("base64")];
  await Bun.sleep(400); // audit flushes every 250 ms
  const audit = JSON.stringify(await broker.auditLogs());
  for (const v of variants) {
    for (const o of outputs) if (o.includes(v)) throw new Error(`secret leaked in a response: ${o.slice(0, 200)}`);
    for (const l of broker.logLines) if (l.includes(v)) throw new Error(`secret leaked in a log line: ${l.slice(0, 200)}`);
    if (audit.includes(v)) throw new Error("secret leaked in the audit log");
  }
}

/** Envelope rule (architecture.md D1): JSON {error, message}, X-Broker-Error header equal to the code. */
export async function expectEnvelope(res: Response, status: number, code: string): Promise<any> {
  const body = await res.json().catch(() => undefined);
  if (res.status !== status || res.headers.get("x-broker-error") !== code || body?.error !== code || typeof body?.message !== "string") {
    throw new Error(`expected ${status} ${code}, got ${res.status} x-broker-error=${res.headers.get("x-broker-error")} ${JSON.stringify(body)}`);
  }
  return body;
}

/** Sends raw bytes to the broker and returns the raw response (connection closed by us after `waitMs`). */
export async function rawRequest(apiUrl: string, bytes: Uint8Array, waitMs = 1500): Promise<Buffer> {
  const { hostname, port } = new URL(apiUrl);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect({ host: hostname, port: Number(port) }, () => sock.write(bytes));
    sock.on("data", (d: Buffer) => chunks.push(d));
    sock.on("error", reject);
    sock.on("close", () => resolve(Buffer.concat(chunks)));
    setTimeout(() => sock.end(), waitMs);
  });
}

/** A port on 127.0.0.1 with nothing listening (bound, then closed). */
export async function findClosedPort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}
