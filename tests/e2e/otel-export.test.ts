// Live export to an OpenTelemetry collector (issue 37), with the compiled binary: curl as the agent on
// both ingress paths (/proxy, and the tunnel over HTTP/1.1 and HTTP/2) sends a W3C traceparent; an
// OTLP/HTTP receiver decodes what the broker exports with the OpenTelemetry project's own protobuf
// definitions. One SERVER span per request, in the agent's trace, with its children; the upstream gets a
// traceparent naming the broker's upstream span; each audit record arrives as a log record; and the
// credential value, the query string and the session token are nowhere in any payload. The collector is
// HTTPS with a private CA, trusted only through BROKER_UPSTREAM_CA_FILE.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanEnv, isolatedBinary, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { startOtlpReceiver, type DecodedSpan, type OtlpReceiver } from "../helpers/otlp-receiver.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

const { bin, dir } = isolatedBinary();
const SECRET = `sk-otel-sentinel-${crypto.randomUUID()}`;
const QUERY = `q-otel-sentinel-${crypto.randomUUID()}`;
const COLLECTOR_KEY = `collector-key-${crypto.randomUUID()}`;
const config = join(tempDir("broker-cli-"), "config");
const SPAN_KIND = { INTERNAL: 1, SERVER: 2, CLIENT: 3 };

let collector: OtlpReceiver;
let upstream: TestUpstream;
let server: ServerProcess;
let session = "";
/** The owner's own session: on /proxy, the span names the owner; a `vault run`-style session names no one of its own. */
let owner = "";
let host = "";
let proxyUrl = "";
let brokerCaFile = "";

const hex = (n: number) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, "0")).join("");

async function cli(args: string[], stdin?: string): Promise<string> {
  const r = await runBinary(bin, args, { env: cleanEnv({ BROKER_CONFIG_DIR: config, BROKER_ADDR: server.url }), stdin, cwd: dir });
  if (r.exitCode !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.exitCode}\n${r.stderr}`);
  return r.stdout;
}

async function curl(args: string[]): Promise<string> {
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`curl ${args.join(" ")}: exit ${code}\n${err}`);
  return out;
}

async function until<T>(what: string, read: () => T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = read();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\nbroker logs:\n${server?.logs().slice(-3000)}`);
    await Bun.sleep(50);
  }
}

/** The traceparent the upstream received for the request whose path starts with `path`. */
function upstreamTraceparent(path: string): string | undefined {
  const r = upstream.received.find((x) => x.url.startsWith(path));
  const values = r?.rawHeaders.filter(([k]) => k.toLowerCase() === "traceparent").map(([, v]) => v) ?? [];
  expect(values.length).toBeLessThanOrEqual(1);
  return values[0];
}

beforeAll(async () => {
  collector = await startOtlpReceiver();
  upstream = await startUpstream();
  const caFile = join(tempDir(), "roots.pem");
  // The upstream's and the collector's CAs: the collector is trusted like any upstream, and not otherwise.
  writeFileSync(caFile, `${upstream.pki.caPem}\n${collector.pki.caPem}`);
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(tempDir(), "data"),
      BROKER_NETWORK_ALLOWLIST: "127.0.0.1",
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_RESOLVE: `upstream.test:${upstream.port}:127.0.0.1`,
      BROKER_RATELIMIT_PROFILE: "off",
      BROKER_OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${COLLECTOR_KEY}`,
      OTEL_SERVICE_NAME: "broker-e2e",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment.name=test",
    }),
    dir,
  );
  host = `upstream.test:${upstream.port}`;
  await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], "otel owner password\n");
  await cli(["vault", "create", "main"]);
  await cli(["vault", "use", "main"]);
  await cli(["credential", "set", "API_KEY"], SECRET);
  await cli(["service", "add", host, "--auth", "bearer", "--token", "API_KEY"]);
  owner = JSON.parse(await Bun.file(join(config, "cli.json")).text()).token as string;
  const res = await fetch(`${server.url}/v1/sessions`, {
    method: "POST",
    headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
    body: JSON.stringify({ vault: "main" }),
  });
  session = ((await res.json()) as { token: string }).token;
  const proxy = /"proxy":"([^"]+)"/.exec(server.logs())?.[1];
  proxyUrl = `http://${session}:main@${proxy}`;
  brokerCaFile = join(tempDir(), "broker-ca.pem");
  writeFileSync(brokerCaFile, await (await fetch(`${server.url}/v1/ca.pem`)).text());
});

afterAll(async () => {
  await server?.stop();
  await upstream?.close();
  await collector?.close();
});

interface Sent {
  readonly path: string;
  readonly traceId: string;
  readonly parentId: string;
  readonly ingress: "explicit" | "transparent";
  readonly protocol: "1.1" | "2";
}

describe("OTLP export from the compiled binary", () => {
  const sent: Sent[] = [];

  test("requests on /proxy and in the tunnel (HTTP/1.1 and HTTP/2) each give one span in the agent's trace", async () => {
    const cases = [
      { path: "/via-proxy", ingress: "explicit", protocol: "1.1" },
      { path: "/via-tunnel-h1", ingress: "transparent", protocol: "1.1" },
      { path: "/via-tunnel-h2", ingress: "transparent", protocol: "2" },
    ] as const;
    for (const c of cases) {
      const s: Sent = { ...c, traceId: hex(16), parentId: hex(8) };
      const traceHeaders = ["-H", `traceparent: 00-${s.traceId}-${s.parentId}-01`, "-H", "tracestate: congo=t61rcWkgMzE"];
      const url = `${c.path}/x?${QUERY}=${QUERY}`;
      const out =
        c.ingress === "explicit"
          ? await curl([...traceHeaders, "-H", `authorization: Bearer ${owner}`, "-H", "x-vault: main", `${server.url}/proxy/${host}${url}`])
          : await curl([...traceHeaders, c.protocol === "2" ? "--http2" : "--http1.1", "--proxy", proxyUrl, "--cacert", brokerCaFile, `https://${host}${url}`]);
      expect(JSON.parse(out).url).toStartWith(c.path);
      sent.push(s);
    }

    const spans = await until("three request spans and their children", () => {
      const all = collector.spans();
      return all.filter((x) => x.kind === SPAN_KIND.SERVER).length >= 3 && all.length >= 12 ? all : undefined;
    });
    for (const s of sent) {
      const servers = spans.filter((x) => x.kind === SPAN_KIND.SERVER && x.traceId === s.traceId);
      expect(servers).toHaveLength(1);
      const span = servers[0]!;
      expect(span.parentSpanId).toBe(s.parentId);
      expect(span.name).toBe(`GET ${host}`);
      expect(span.attributes).toMatchObject({
        "http.request.method": "GET",
        "server.address": "upstream.test",
        "server.port": upstream.port,
        "url.path": `${s.path}/x`,
        "http.response.status_code": 200,
        "network.protocol.version": s.protocol,
        "broker.ingress": s.ingress,
        "broker.vault": "main",
        "broker.service": host,
      });
      expect(span.attributes["broker.principal"]).toMatch(/^user:\d+$/);
      expect(span.attributes["broker.principal.name"]).toBe(s.ingress === "explicit" ? "owner@example.com" : undefined);
      expect(span.attributes["broker.added_ms"]).toBeGreaterThanOrEqual(0);
      expect(span.resource).toMatchObject({ "service.name": "broker-e2e", "deployment.environment.name": "test", "telemetry.sdk.language": "nodejs" });

      // Its children: the broker's time before dispatch, the upstream's, the broker's on the answer's head.
      const children = spans.filter((x) => x.parentSpanId === span.spanId);
      expect(children.map((c) => c.name).sort()).toEqual(["broker.request", "broker.response", "upstream"]);
      const up = children.find((c) => c.name === "upstream")!;
      expect(up.kind).toBe(SPAN_KIND.CLIENT);
      for (const c of children) {
        expect(c.traceId).toBe(s.traceId);
        expect(BigInt(c.startTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
        expect(BigInt(c.endTimeUnixNano)).toBeLessThanOrEqual(BigInt(span.endTimeUnixNano));
      }

      // The upstream's parent is the broker's upstream span, in the agent's trace; the agent's tracestate passes.
      expect(upstreamTraceparent(s.path)).toBe(`00-${s.traceId}-${up.spanId}-01`);
      const r = upstream.received.find((x) => x.url.startsWith(s.path))!;
      expect(r.rawHeaders.filter(([k]) => k.toLowerCase() === "tracestate").map(([, v]) => v)).toEqual(["congo=t61rcWkgMzE"]);
    }
  });

  test("a request without a traceparent starts a trace at the broker, and the upstream still joins it", async () => {
    const out = await curl(["-H", `authorization: Bearer ${session}`, `${server.url}/proxy/${host}/no-trace?${QUERY}`]);
    expect(JSON.parse(out).url).toStartWith("/no-trace");
    const span = await until("the span of the untraced request", () =>
      collector.spans().find((x) => x.kind === SPAN_KIND.SERVER && x.attributes["url.path"] === "/no-trace"),
    );
    expect(span.parentSpanId).toBe("");
    expect(sent.map((s) => s.traceId)).not.toContain(span.traceId);
    const up = await until("its upstream span", () => collector.spans().find((x) => x.parentSpanId === span.spanId && x.name === "upstream"));
    expect(upstreamTraceparent("/no-trace")).toBe(`00-${span.traceId}-${up.spanId}-01`);
  });

  test("every audit record arrives as a log record with the audit log's fields, in its request's trace", async () => {
    const logs = await until("four audit log records", () => (collector.logs().length >= 4 ? collector.logs() : undefined));
    expect(logs).toHaveLength(4);
    const serverSpans = collector.spans().filter((x) => x.kind === SPAN_KIND.SERVER);
    for (const s of sent) {
      const record = logs.find((l) => l.traceId === s.traceId);
      expect(record).toBeDefined();
      expect(record!.spanId).toBe(serverSpans.find((x) => x.traceId === s.traceId)!.spanId);
      expect(record!.attributes).toMatchObject({
        "broker.audit.vault": "main",
        "broker.audit.ingress": s.ingress,
        "broker.audit.method": "GET",
        "broker.audit.host": host,
        "broker.audit.path": `${s.path}/x`,
        "broker.audit.service": host,
        "broker.audit.credential_keys": ["API_KEY"],
        "broker.audit.credential_refs": [],
        "broker.audit.status": 200,
        "broker.audit.contained": false,
      });
      expect(record!.attributes["broker.audit.principal"]).toMatch(/^user:\d+$/);
      expect(record!.body).toBe(`GET ${host}${s.path}/x 200`);
      expect(record!.resource["service.name"]).toBe("broker-e2e");
    }
    // The database has the same records (the export is beside the write, not instead of it).
    const table = await cli(["logs", "--json"]);
    expect((JSON.parse(table) as unknown[]).length).toBe(4);
  });

  test("the collector gets its headers; no payload, and no log line, holds the credential, the query, the session token or the collector's key", async () => {
    expect(collector.exports.length).toBeGreaterThanOrEqual(2);
    for (const e of collector.exports) {
      expect(e.headers.get("authorization")).toBe(`Bearer ${COLLECTOR_KEY}`);
      expect(e.headers.get("content-type")).toBe("application/x-protobuf");
      const payload = `${new TextDecoder().decode(e.raw)}\n${Buffer.from(e.raw).toString("latin1")}\n${JSON.stringify(e.body)}`;
      for (const sentinel of [SECRET, QUERY, session, owner, COLLECTOR_KEY]) expect(payload).not.toContain(sentinel);
    }
    // The upstream did get the credential: the export left it out, it was there to leave out.
    expect(upstream.received.every((r) => r.rawHeaders.some(([k, v]) => k.toLowerCase() === "authorization" && v === `Bearer ${SECRET}`))).toBe(true);
    for (const sentinel of [SECRET, COLLECTOR_KEY]) expect(server.logs()).not.toContain(sentinel);
  });

  test("records still queued at SIGTERM reach the collector before the process exits", async () => {
    const before = collector.logs().length;
    await curl(["-H", `authorization: Bearer ${session}`, `${server.url}/proxy/${host}/last-before-shutdown`]);
    // Stopped at once: the batch's 1 s wait has not run out, so only the shutdown's flush can send it.
    const t0 = Date.now();
    expect(await server.stop()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000); // nothing of the export holds the process once it has sent
    const logs = collector.logs();
    expect(logs.length).toBe(before + 1);
    expect(logs.at(-1)!.attributes["broker.audit.path"]).toBe("/last-before-shutdown");
    expect(collector.spans().some((x: DecodedSpan) => x.attributes["url.path"] === "/last-before-shutdown")).toBe(true);
  });
});
