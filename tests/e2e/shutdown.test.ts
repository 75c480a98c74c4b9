// Graceful shutdown of `broker server` (a subprocess from source, SQLite store): a SIGTERM in the
// middle of two SSE streams (one on /proxy, one inside a CONNECT tunnel) lets both finish within the
// grace time while new connections are refused; the audit records are in the store after a restart;
// a second SIGTERM exits at once.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { cleanEnv, collectOutput, tempDir } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

const ROOT = join(import.meta.dir, "..", "..");
const EVENTS = 10;
let upstream: TestUpstream;
let hostPort: string;
let env: Record<string, string>;
let caPem: string;

interface Broker {
  readonly proc: ReturnType<typeof Bun.spawn>;
  readonly api: string;
  readonly proxyPort: number;
  logs(): string;
}

async function startBroker(): Promise<Broker> {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), "server"], { env, cwd: ROOT, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const out = collectOutput(proc);
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await Bun.sleep(25)) {
    const m = /"event":"listening","api":"(http:\/\/[^"]+)","proxy":"[^"]*:(\d+)"/.exec(out.text());
    if (m) return { proc, api: m[1]!, proxyPort: Number(m[2]), logs: out.text };
    if (proc.exitCode !== null) break;
  }
  proc.kill("SIGKILL");
  throw new Error(`broker did not start:\n${out.text()}`);
}

async function call(b: Broker, method: string, path: string, body: unknown, token = ""): Promise<any> {
  const res = await fetch(`${b.api}${path}`, {
    method,
    headers: { "content-type": "application/json", ...(token && { authorization: `Bearer ${token}` }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** Reads a streamed body; `started` resolves at its first chunk. */
function readStream(res: Promise<Response>): { started: Promise<void>; done: Promise<{ status: number; text: string }> } {
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  const done = res.then(async (r) => {
    const reader = r.body!.getReader();
    let text = "";
    for (let c = await reader.read(); !c.done; c = await reader.read()) {
      text += new TextDecoder().decode(c.value);
      markStarted();
    }
    return { status: r.status, text };
  });
  return { started, done };
}

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(false)));
    s.once("error", () => resolve(true));
  });

let user: string;
let session: string;
const SECRET = `sk-shutdown-${crypto.randomUUID()}`;
const PASSWORD = "correct horse battery";

/** Fails naming `where` and which value (never printing it) when the credential, a token or the password, or its base64, is in `text`. */
function expectNothingSecret(where: string, text: string): void {
  const values: Record<string, string> = {
    credential: SECRET,
    password: PASSWORD,
    ...(user && { "user token": user }),
    ...(session && { "session token": session }),
  };
  for (const [name, v] of Object.entries(values)) {
    const found = [v, Buffer.from(v).toString("base64")].some((form) => text.includes(form));
    expect(`${name} in ${where}: ${found ? "present" : "absent"}`).toBe(`${name} in ${where}: absent`);
  }
}

beforeAll(async () => {
  upstream = await startUpstream(
    (req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      const tick = setInterval(() => {
        res.write(`data: ${i++}\n\n`);
        if (i === EVENTS) clearInterval(tick), res.end();
      }, 200);
      res.on("close", () => clearInterval(tick));
    },
    { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } },
  );
  hostPort = `127.0.0.2:${upstream.port}`;
  const dir = tempDir("broker-shutdown-");
  writeFileSync(join(dir, "upstream-ca.pem"), upstream.pki.caPem);
  env = cleanEnv({
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_NETWORK_ALLOWLIST: "127.0.0.2",
    BROKER_UPSTREAM_CA_FILE: join(dir, "upstream-ca.pem"),
    BROKER_RATELIMIT_PROFILE: "off",
    BROKER_SHUTDOWN_GRACE_S: "10",
  });
});
afterAll(async () => {
  await upstream?.close();
});

const allEvents = Array.from({ length: EVENTS }, (_, i) => `data: ${i}\n\n`).join("");

describe("graceful shutdown", () => {
  test("SIGTERM mid-stream: /proxy and tunnel SSE streams finish, new connections are refused, audit survives a restart", async () => {
    const b = await startBroker();
    try {
      user = (await call(b, "POST", "/v1/auth/register", { email: "owner@example.com", password: PASSWORD })).token;
      await call(b, "POST", "/v1/vaults", { name: "v" }, user);
      await call(b, "PUT", "/v1/vaults/v/credentials/API_KEY", { value: SECRET }, user);
      await call(b, "POST", "/v1/vaults/v/services", { host: hostPort, auth: { type: "bearer", token: "API_KEY" } }, user);
      session = (await call(b, "POST", "/v1/sessions", { vault: "v", role: "proxy" }, user)).token;
      caPem = await (await fetch(`${b.api}/v1/ca.pem`)).text();

      const explicit = readStream(fetch(`${b.api}/proxy/${hostPort}/explicit-sse`, { headers: { authorization: `Bearer ${session}` } }));
      const proxy = `http://${session}:v@127.0.0.1:${b.proxyPort}`;
      const tunnelled = readStream(fetch(`https://${hostPort}/tunnel-sse`, { proxy, tls: { ca: caPem } } as RequestInit));
      await Promise.all([explicit.started, tunnelled.started]);

      b.proc.kill("SIGTERM");
      await Bun.sleep(200);
      expect(await refused(Number(new URL(b.api).port))).toBe(true);
      expect(await refused(b.proxyPort)).toBe(true);

      expect(await explicit.done).toEqual({ status: 200, text: allEvents });
      expect(await tunnelled.done).toEqual({ status: 200, text: allEvents });
      expect(await b.proc.exited).toBe(0);
      const logs = b.logs();
      expect(logs).toMatch(/"event":"shutting_down","reason":"SIGTERM","grace_s":10,"requests_in_flight":1/);
      expect(logs).toMatch(
        /"event":"shutdown_complete".*"requests_open":1,"requests_cut":0,"tunnel_connections_open":1,"tunnel_connections_cut":0,"audit_unwritten":0/,
      );
    } finally {
      b.proc.kill("SIGKILL");
    }
    await b.proc.exited;
    await Bun.sleep(100); // the last output lines still in the pipes
    expectNothingSecret("the first instance's logs", b.logs());

    const again = await startBroker();
    try {
      const { logs } = await call(again, "GET", "/v1/vaults/v/logs?limit=100", undefined, user);
      const paths = logs.filter((l: any) => l.status === 200).map((l: any) => `${l.ingress} ${l.path}`);
      expect(paths).toContain("explicit /explicit-sse");
      expect(paths).toContain("transparent /tunnel-sse");
      expectNothingSecret("the audit records", JSON.stringify(logs));
    } finally {
      again.proc.kill("SIGKILL");
      await again.proc.exited;
    }
    await Bun.sleep(100);
    expectNothingSecret("the restarted instance's logs", again.logs());
  }, 20_000);

  test("SIGTERM mid-stream: an HTTP/2 stream inside a tunnel (curl --http2) finishes too", async () => {
    const b = await startBroker();
    try {
      const caFile = join(tempDir("broker-shutdown-h2-"), "ca.pem");
      writeFileSync(caFile, caPem);
      const proxy = `http://${session}:v@127.0.0.1:${b.proxyPort}`;
      const curl = Bun.spawn(["curl", "-sS", "-N", "--http2", "-w", "\n%{http_version}", "--proxy", proxy, "--cacert", caFile, `https://${hostPort}/h2-sse`], {
        stdout: "pipe",
        stderr: "pipe",
      });
      const out = collectOutput(curl);
      for (const deadline = Date.now() + 10_000; !out.text().includes("data: 0") && Date.now() < deadline; ) await Bun.sleep(25);
      b.proc.kill("SIGTERM");
      expect(await curl.exited).toBe(0);
      expect(out.text()).toBe(`${allEvents}\n2`);
      expect(await b.proc.exited).toBe(0);
      expect(b.logs()).toMatch(/"event":"shutdown_complete".*"tunnel_connections_open":1,"tunnel_connections_cut":0/);
    } finally {
      b.proc.kill("SIGKILL");
    }
    await b.proc.exited;
    await Bun.sleep(100);
    expectNothingSecret("the HTTP/2 instance's logs", b.logs());
  }, 20_000);

  test("a second SIGTERM exits at once, cutting what is in flight", async () => {
    const b = await startBroker();
    try {
      const stream = readStream(fetch(`${b.api}/proxy/${hostPort}/cut`, { headers: { authorization: `Bearer ${session}` } }));
      await stream.started;
      // Handled from now on: the cut stream rejects while the test still awaits the process.
      const outcome = stream.done.then(
        (r) => r.text,
        () => "cut",
      );
      b.proc.kill("SIGTERM");
      await Bun.sleep(100);
      const sent = Date.now();
      b.proc.kill("SIGTERM");
      expect(await b.proc.exited).toBe(143);
      expect(Date.now() - sent).toBeLessThan(1000);
      expect(b.logs()).toContain('"event":"shutdown_forced"');
      expect(await outcome).not.toBe(allEvents);
    } finally {
      b.proc.kill("SIGKILL");
    }
    await b.proc.exited;
    await Bun.sleep(100); // the last output lines still in the pipes
    expectNothingSecret("the forced-exit instance's logs", b.logs());
  }, 15_000);
});
