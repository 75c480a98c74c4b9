// HTTP/2 (issue 19): one connection, many streams in flight, directly to an h2 upstream (the baseline)
// and through the broker's CONNECT tunnel (CONNECT with Proxy-Authorization, then TLS with ALPN h2 to
// the broker's leaf, then HTTP/2 over that socket). The upstream is node:http2 in a process of its own
// (`bun bench/h2.ts --upstream`, certificate and key in the environment, port on stdout), offering h2
// only: whatever the broker forwards reaches it over HTTP/2. It counts the Authorization values it
// receives, so each broker repetition checks that every stream carried the injected credential.
// With --peers, the same load runs through mitmproxy (bench/mitmproxy.ts, HTTP/2 on both legs, the
// broker's header set by modify_headers) in the same repetitions, checked the same way.

import { connect as http2Connect, createSecureServer, type ClientHttp2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import { cpuMs } from "./broker.ts";
import type { LoadResult } from "./load.ts";
import { statsOf } from "./load.ts";
import { basicAuth, openTls, type Hop } from "./raw.ts";
import { metered, summarise, type Env, type Rep, type Row } from "./scenarios.ts";
import type { MitmproxyProc } from "./mitmproxy.ts";
import type { BenchPki } from "./pki.ts";
import { SMALL } from "./upstream.ts";

export interface H2Upstream {
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

/** The upstream process: GET /small (the same JSON as the HTTP/1.1 upstream), GET /__seen (Authorization counts). */
function serveUpstream(): void {
  const seen = new Map<string, number>();
  const body = Buffer.from(SMALL);
  const server = createSecureServer({ cert: process.env.H2_CERT!, key: process.env.H2_KEY!, ALPNProtocols: ["h2"], settings: { maxConcurrentStreams: 1000 } });
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    stream.on("error", () => {});
    const path = headers[":path"];
    if (path === "/__seen") {
      stream.respond({ ":status": 200, "content-type": "application/json" });
      return void stream.end(JSON.stringify(Object.fromEntries(seen)));
    }
    const auth = String(headers.authorization ?? "");
    seen.set(auth, (seen.get(auth) ?? 0) + 1);
    if (path !== "/small") {
      stream.respond({ ":status": 404 });
      return void stream.end("not found");
    }
    stream.respond({ ":status": 200, "content-type": "application/json", "content-length": body.length });
    stream.end(body);
  });
  server.on("sessionError", () => {});
  server.listen(0, "127.0.0.1", () => console.log(JSON.stringify({ port: (server.address() as { port: number }).port })));
  // The bench holds stdin open: when it goes away (even by crashing), so does the upstream.
  process.stdin.on("data", () => {});
  process.stdin.on("end", () => process.exit(0));
  process.stdin.on("close", () => process.exit(0));
}

if (import.meta.main && process.argv.includes("--upstream")) serveUpstream();

/** Starts the h2 upstream process and waits for its port. */
export async function startH2Upstream(pki: BenchPki): Promise<H2Upstream> {
  const proc = Bun.spawn([process.execPath, import.meta.path, "--upstream"], {
    env: { ...process.env, H2_CERT: pki.certPem, H2_KEY: pki.keyPem },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "inherit",
  });
  const reader = proc.stdout.getReader();
  let out = "";
  while (!out.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`h2 upstream exited before listening (${await proc.exited})`);
    out += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const port = (JSON.parse(out.split("\n")[0]!) as { port: number }).port;
  return {
    port,
    pid: proc.pid,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}

/** One TLS connection (through the proxy when `hop.connect`) offering h2 and http/1.1; an HTTP/2 session when h2 was chosen. */
export async function openH2(hop: Hop, authority: string): Promise<{ session?: ClientHttp2Session; alpn: string }> {
  const { tls } = await openTls({ ...hop, alpn: ["h2", "http/1.1"] });
  const alpn = tls.alpnProtocol || "none";
  if (alpn !== "h2") {
    tls.destroy();
    return { alpn };
  }
  const session = http2Connect(`https://${authority}`, { createConnection: () => tls });
  session.on("error", () => {}); // every stream still open fails on its own and is counted there
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no SETTINGS from the server within 10 s")), 10_000);
    session.once("remoteSettings", () => (clearTimeout(timer), resolve()));
    session.once("close", () => (clearTimeout(timer), reject(new Error("HTTP/2 session closed before SETTINGS"))));
  });
  return { session, alpn };
}

/**
 * `requests` GETs of `path` on one session, `streams` in flight at a time. A stream counts as an error
 * unless it ends normally with the expected body size; a non-2xx answer counts as non-2xx. Gives up
 * (counting what is left as errors) after `timeoutMs`.
 */
export async function runH2Load(
  session: ClientHttp2Session,
  authority: string,
  path: string,
  o: { requests: number; streams: number; expectBytes?: number; timeoutMs?: number },
): Promise<LoadResult> {
  const lat = new Float64Array(o.requests);
  let next = 0;
  let done = 0;
  let errors = 0;
  let non2xx = 0;
  let firstError: string | undefined;
  let expired = false;
  /** The streams in flight: each one's way to give up when the run times out. */
  const pending = new Set<(why?: string) => void>();
  const fail = (why: string) => {
    errors++;
    firstError ??= why;
  };
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      let status = 0;
      let bytes = 0;
      let head = "";
      let ended = false;
      let error: string | undefined;
      let req: ReturnType<ClientHttp2Session["request"]> | undefined;
      const finish = (why?: string) => {
        if (!pending.delete(finish)) return;
        lat[done++] = performance.now() - t0;
        if (!ended) fail(why ?? error ?? `stream closed before its end (status ${status || "none"}, RST code ${req?.rstCode ?? "?"})`);
        else if (status < 200 || status > 299) {
          non2xx++;
          firstError ??= `HTTP ${status}: ${head}`;
        } else if (o.expectBytes !== undefined && bytes !== o.expectBytes) fail(`body ${bytes} bytes, expected ${o.expectBytes}`);
        resolve();
      };
      pending.add(finish);
      try {
        req = session.request({ ":method": "GET", ":scheme": "https", ":authority": authority, ":path": path }, { endStream: true });
      } catch (err) {
        error = String(err);
        return finish();
      }
      req.on("response", (h: IncomingHttpHeaders) => (status = Number(h[":status"])));
      req.on("data", (c: Buffer) => {
        bytes += c.length;
        if (head.length < 200) head += c.toString("utf8", 0, Math.min(c.length, 200 - head.length));
      });
      req.on("end", () => (ended = true));
      req.on("error", (err: Error) => (error ??= String(err)));
      req.on("close", () => finish());
    });
  const timeoutMs = o.timeoutMs ?? 120_000;
  const timer = setTimeout(() => {
    expired = true;
    for (const finish of [...pending]) finish(`timed out after ${timeoutMs} ms`); // each counts as an error: it never ended
  }, timeoutMs);
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(o.streams, o.requests) }, async () => {
      while (next < o.requests) {
        next++;
        if (expired) fail(`timed out after ${timeoutMs} ms`);
        else await one();
      }
    }),
  );
  const elapsedMs = performance.now() - t0;
  clearTimeout(timer);
  return { requests: o.requests, errors, non2xx, elapsedMs, latencies: lat.slice(0, done), firstError };
}

/** The upstream's count of requests per Authorization value (asked directly, over HTTP/2). */
async function seenByUpstream(direct: Hop, authority: string): Promise<Record<string, number>> {
  const { session } = await openH2(direct, authority);
  if (!session) throw new Error("the h2 upstream did not negotiate h2");
  try {
    return await new Promise((resolve, reject) => {
      const req = session.request({ ":method": "GET", ":scheme": "https", ":authority": authority, ":path": "/__seen" }, { endStream: true });
      let text = "";
      req.setEncoding("utf8");
      req.on("data", (c: string) => (text += c));
      req.on("end", () => resolve(JSON.parse(text)));
      req.on("error", reject);
    });
  } finally {
    session.close();
  }
}

/** Opens one connection over `hop` and runs the load on it; a connection that cannot be opened fails every request. */
async function oneConnection(
  hop: Hop,
  authority: string,
  o: { requests: number; streams: number },
): Promise<LoadResult & { alpn: string; peerStreams?: number }> {
  const allFailed = (why: string, alpn: string) => ({
    requests: o.requests,
    errors: o.requests,
    non2xx: 0,
    elapsedMs: NaN,
    latencies: new Float64Array(0),
    firstError: why,
    alpn,
  });
  let opened: Awaited<ReturnType<typeof openH2>>;
  try {
    opened = await openH2(hop, authority);
  } catch (err) {
    return allFailed(`opening the connection: ${err}`, "none");
  }
  const { session, alpn } = opened;
  if (!session) return allFailed(`ALPN chose ${alpn}, not h2`, alpn);
  try {
    const peerStreams = session.remoteSettings.maxConcurrentStreams;
    const r = await runH2Load(session, authority, "/small", { ...o, expectBytes: Buffer.byteLength(SMALL) });
    return { ...r, alpn, peerStreams };
  } finally {
    session.close();
  }
}

/** What the upstream saw between two /__seen answers: streams carrying `value`, without Authorization, and with any other value. */
function seenDelta(before: Record<string, number>, after: Record<string, number>, value: string): { injected: number; bare: number; other: number } {
  const delta = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  const other = Object.keys(after)
    .filter((k) => k !== value && k !== "")
    .reduce((a, k) => a + delta(k), 0);
  return { injected: delta(value), bare: delta(""), other };
}

/**
 * The h2 row: one connection with `streams` streams in flight for `requests` GET /small, direct then
 * through the broker (then through mitmproxy, with --peers), `reps` times. Every failure counts in the
 * row: a connection that cannot be opened, or whose ALPN is not h2, fails all its requests; so does a
 * stream the upstream saw without the injected credential. mitmproxy is left out of the timed
 * repetitions (and the note says why) when its warm-up connection cannot be opened or does not
 * negotiate h2; once it runs, a stream it answered that reached the upstream without the header stops
 * the bench, as with Squid.
 */
export async function h2Scenario(env: Env, h2: H2Upstream, o: { requests: number; streams: number; reps: number; warm: number }): Promise<Row> {
  const { broker, upstreamCa } = env;
  const authority = `localhost:${h2.port}`;
  const direct: Hop = { port: h2.port, servername: "localhost", ca: upstreamCa };
  const viaBroker: Hop = {
    port: broker.proxyPort,
    connect: { authority, proxyAuth: basicAuth(broker.token, broker.vault) },
    servername: "localhost",
    ca: broker.caPem,
  };
  const mitm = env.peers?.mitmproxy;
  const name = `h2, 1 connection × ${o.streams} streams, /small`;
  // Warm-up, as warmUp gives each path other than the main one: the broker's HTTP/2 code is compiled by its JIT before the timed runs.
  const warmD = await oneConnection(direct, authority, { requests: o.warm, streams: o.streams });
  const warmB = await oneConnection(viaBroker, authority, { requests: o.warm, streams: o.streams });
  let warmErrors = warmD.errors + warmD.non2xx + warmB.errors + warmB.non2xx;
  let warmError = warmB.firstError ?? warmD.firstError;

  /** The load through mitmproxy with its CPU metered; throws unless every stream it answered reached the upstream with the broker's header, and nothing without it. */
  const viaMitmproxy = async (mp: MitmproxyProc, requests: number) => {
    const hop: Hop = { port: mp.port, connect: { authority, proxyAuth: "" }, servername: "localhost", ca: mp.caPem };
    const before = await seenByUpstream(direct, authority);
    const c0 = cpuMs(mp.pid);
    const value = await oneConnection(hop, authority, { requests, streams: o.streams });
    const cpu = cpuMs(mp.pid) - c0;
    const seen = seenDelta(before, await seenByUpstream(direct, authority), broker.authorization);
    const ok = requests - value.errors - value.non2xx;
    if (seen.injected < ok || seen.bare || seen.other)
      throw new Error(
        `mitmproxy did not inject the Authorization header: the upstream saw it on ${seen.injected} of ${ok} answered streams (${seen.bare} without Authorization, ${seen.other} with another value)\n${mp.logs().slice(-2000)}`,
      );
    return { value, cpu, injected: seen.injected, ok };
  };
  /** mitmproxy in the timed repetitions: unless its warm-up connection failed. */
  let timedMitm = mitm;
  let mitmSkipped: string | undefined;
  if (mitm) {
    const w = await viaMitmproxy(mitm, o.warm);
    if (w.value.alpn !== "h2") {
      timedMitm = undefined;
      mitmSkipped = `mitmproxy ${mitm.version} not measured: its warm-up connection failed (${w.value.firstError})`;
    } else {
      warmErrors += w.value.errors + w.value.non2xx;
      warmError ??= w.value.firstError && `mitmproxy: ${w.value.firstError}`;
    }
  }
  const reps: Rep[] = [];
  const injectedNotes: string[] = [];
  const mitmInjected: string[] = [];
  let peerStreams: number | undefined;
  let mitmStreams: number | undefined;
  for (let i = 0; i < o.reps; i++) {
    const d = await oneConnection(direct, authority, o);
    const before = await seenByUpstream(direct, authority);
    const b = await metered(broker.pid, () => oneConnection(viaBroker, authority, o));
    const seen = seenDelta(before, await seenByUpstream(direct, authority), broker.authorization);
    peerStreams ??= b.value.peerStreams;
    // Every 2xx stream through the broker must have reached the upstream with the injected credential, and nothing else may have.
    const ok = o.requests - b.value.errors - b.value.non2xx;
    let extra = 0;
    let why: string | undefined;
    if (seen.injected < ok || seen.bare || seen.other) {
      extra = Math.max(ok - seen.injected, 0) + seen.bare + seen.other;
      why = `the upstream saw the injected Authorization on ${seen.injected} of ${ok} answered streams (${seen.bare} without Authorization, ${seen.other} with another value)`;
    }
    injectedNotes.push(`${seen.injected}/${ok}`);
    const m = timedMitm ? await viaMitmproxy(timedMitm, o.requests) : undefined;
    if (m) {
      mitmStreams ??= m.value.peerStreams;
      mitmInjected.push(`${m.injected}/${m.ok}`);
    }
    reps.push({
      direct: statsOf(d),
      broker: statsOf(b.value),
      errors: d.errors + b.value.errors + extra + (m?.value.errors ?? 0),
      non2xx: d.non2xx + b.value.non2xx + (m?.value.non2xx ?? 0),
      requests: o.requests,
      cpuMs: b.cpu,
      peakRss: b.peak,
      growth: b.growth,
      firstError:
        b.value.firstError ??
        why ??
        (d.firstError ? `direct: ${d.firstError}` : undefined) ??
        (m?.value.firstError ? `mitmproxy: ${m.value.firstError}` : undefined),
      mitmproxy: m ? { ...statsOf(m.value), cpuMs: m.cpu } : undefined,
    });
  }
  if (warmErrors) reps[0] = { ...reps[0]!, errors: reps[0]!.errors + warmErrors, firstError: reps[0]!.firstError ?? `warm-up: ${warmError}` };
  const note = [
    `client node:http2 on one TLS connection each way, ALPN h2 (the broker speaks h2 to the upstream, which offers only h2); connection setup not timed`,
    `upstream saw the injected Authorization on ${injectedNotes.join(", ")} streams`,
    `broker's SETTINGS_MAX_CONCURRENT_STREAMS ${peerStreams ?? "–"}`,
    ...(timedMitm
      ? [
          `mitmproxy ${timedMitm.version} in the same repetitions (h2 on both legs, the header set by modify_headers): the upstream saw it on ${mitmInjected.join(", ")} streams; its SETTINGS_MAX_CONCURRENT_STREAMS ${mitmStreams ?? "–"}`,
        ]
      : []),
    ...(mitmSkipped ? [mitmSkipped] : []),
    `warm-up ${o.warm} streams each way first${warmErrors ? `, with ${warmErrors} errors or non-2xx (counted here)` : ""}`,
  ].join("; ");
  return summarise(name, reps, note);
}
