// A gRPC server (@grpc/grpc-js) over TLS on 127.0.0.1 for the gRPC-through-the-tunnel tests (issue 19),
// serving tests/helpers/grpc-echo.proto: unary, server-streaming, client-streaming and bidirectional
// echo methods plus a second service (Admin) for rules tests. It records the metadata every call
// arrived with, and answers as each request asks (see EchoRequest): replies, a status code with
// details, header and trailing metadata, and the echo of a request metadata value (the credential).
// It never sends anything a request did not ask for.
//
// startCompressingGrpcServer is the other kind of upstream: a raw node:http2 gRPC endpoint that answers
// every call with one gzip-compressed EchoReply (grpc-encoding: gzip, as grpc-go servers may send) whose
// `echoed` field holds the call's authorization metadata, for the credential-echo test.

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { createSecureServer, type IncomingHttpHeaders, type ServerHttp2Stream } from "node:http2";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { createTestPki, type TestPki } from "./pki.ts";

export const GRPC_PROTO = join(import.meta.dir, "grpc-echo.proto");
/** proto-loader options shared with the agent (tests/e2e/grpc-agent.mjs). */
export const PROTO_OPTIONS: protoLoader.Options = { keepCase: true, longs: Number, enums: String, defaults: true };

export interface EchoRequest {
  message?: string;
  count?: number;
  fail_code?: number;
  fail_details?: string;
  headers?: Record<string, string>;
  trailers?: Record<string, string>;
  echo_metadata?: string;
  echo_in?: ("header" | "trailer" | "message" | "details")[];
}

export interface EchoReply {
  message: string;
  index: number;
  echoed: string;
}

export interface GrpcCallRecord {
  /** "/echo.v1.Echo/Unary" and the like. */
  readonly method: string;
  /** Every metadata entry the call arrived with: lower-case key → values (binary ones base64). */
  readonly metadata: Record<string, string[]>;
  /** The request messages, in order (filled as they arrive). */
  readonly requests: EchoRequest[];
  /** Whether the client's cancellation (RST_STREAM) reached the server. */
  cancelled: boolean;
}

export interface GrpcEchoServer {
  readonly port: number;
  readonly pki: TestPki;
  readonly calls: GrpcCallRecord[];
  /** The calls to one method ("/echo.v1.Echo/Unary"). */
  callsTo(method: string): GrpcCallRecord[];
  close(): Promise<void>;
}

type Handler = grpc.UntypedHandleCall;

export async function startGrpcEchoServer(opts: { pki?: TestPki } = {}): Promise<GrpcEchoServer> {
  const pki = opts.pki ?? (await createTestPki());
  const calls: GrpcCallRecord[] = [];
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(GRPC_PROTO, PROTO_OPTIONS)) as any;
  const server = new grpc.Server();

  const record = (call: { getPath(): string; metadata: grpc.Metadata }): GrpcCallRecord => {
    const metadata: Record<string, string[]> = {};
    for (const [key, values] of Object.entries(call.metadata.toJSON())) {
      metadata[key] = values.map((v) => (typeof v === "string" ? v : Buffer.from(v).toString("base64")));
    }
    const rec: GrpcCallRecord = { method: call.getPath(), metadata, requests: [], cancelled: false };
    (call as unknown as NodeJS.EventEmitter).on("cancelled", () => (rec.cancelled = true));
    calls.push(rec);
    return rec;
  };

  const unary: Handler = (call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) => {
    const rec = record(call);
    rec.requests.push(call.request);
    const plan = planFor(call.request, call.metadata);
    sendHeaders(call, plan);
    if (plan.status) return callback(plan.status);
    callback(null, reply(call.request.message ?? "", 0, plan), plan.trailers);
  };

  const serverStream: Handler = async (call: grpc.ServerWritableStream<EchoRequest, EchoReply>) => {
    const rec = record(call);
    rec.requests.push(call.request);
    const plan = planFor(call.request, call.metadata);
    sendHeaders(call, plan);
    if (call.request.count === -1) {
      // Bounded (10 minutes) so a cancellation that never arrives cannot keep the server busy forever.
      for (let i = 0; i < 60_000 && !rec.cancelled; i++) {
        call.write(reply(`${call.request.message ?? ""} #${i}`, i, plan));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      if (!rec.cancelled) finishStream(call, plan);
      return;
    }
    for (let i = 0; i < (call.request.count ?? 0); i++) call.write(reply(`${call.request.message ?? ""} #${i}`, i, plan));
    finishStream(call, plan);
  };

  const clientStream: Handler = (call: grpc.ServerReadableStream<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) => {
    const rec = record(call);
    call.on("data", (req: EchoRequest) => rec.requests.push(req));
    call.on("error", () => {});
    call.on("end", () => {
      const first = rec.requests[0] ?? {};
      const plan = planFor(first, call.metadata);
      sendHeaders(call, plan);
      if (plan.status) return callback(plan.status);
      callback(null, reply(rec.requests.map((r) => r.message ?? "").join(","), rec.requests.length, plan), plan.trailers);
    });
  };

  const bidi: Handler = (call: grpc.ServerDuplexStream<EchoRequest, EchoReply>) => {
    const rec = record(call);
    let plan: Plan | undefined;
    call.on("error", () => {});
    call.on("data", (req: EchoRequest) => {
      rec.requests.push(req);
      if (!plan) {
        plan = planFor(req, call.metadata);
        sendHeaders(call, plan);
      }
      call.write(reply(`echo: ${req.message ?? ""}`, rec.requests.length - 1, plan));
    });
    call.on("end", () => finishStream(call, plan ?? planFor({}, call.metadata)));
  };

  server.addService(pkg.echo.v1.Echo.service, { Unary: unary, ServerStream: serverStream, ClientStream: clientStream, Bidi: bidi });
  server.addService(pkg.echo.v1.Admin.service, { Delete: unary });
  const creds = grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(pki.certPem), private_key: Buffer.from(pki.keyPem) }], false);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))));
  return {
    port,
    pki,
    calls,
    callsTo: (method) => calls.filter((c) => c.method === method),
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        // Calls still open (a client that went away mid-stream) must not hold the test run.
        setTimeout(() => (server.forceShutdown(), resolve()), 2000).unref();
      }),
  };
}

interface Plan {
  headers: grpc.Metadata | undefined;
  trailers: grpc.Metadata;
  echoed: string;
  status: Partial<grpc.StatusObject> | undefined;
}

/** What the call sends back besides its replies, from the (first) request and the call's metadata. */
function planFor(req: EchoRequest, metadata: grpc.Metadata): Plan {
  const where = new Set(req.echo_in ?? []);
  const value = req.echo_metadata ? metadata.get(req.echo_metadata.toLowerCase()).map(String).join(", ") : "";
  const headerEntries = Object.entries(req.headers ?? {});
  if (where.has("header")) headerEntries.push(["x-echo", value]);
  const headers = headerEntries.length ? toMetadata(headerEntries) : undefined;
  const trailers = toMetadata(Object.entries(req.trailers ?? {}));
  if (where.has("trailer")) trailers.set("x-echo-trailer", value);
  let status: Partial<grpc.StatusObject> | undefined;
  if (req.fail_code || where.has("details")) {
    const details = where.has("details") ? `${req.fail_details ?? ""} echo: ${value}` : (req.fail_details ?? "");
    status = { code: req.fail_code || grpc.status.FAILED_PRECONDITION, details, metadata: trailers };
  }
  return { headers, trailers, echoed: where.has("message") ? value : "", status };
}

function toMetadata(entries: [string, string][]): grpc.Metadata {
  const md = new grpc.Metadata();
  for (const [k, v] of entries) md.add(k, v);
  return md;
}

function reply(message: string, index: number, plan: Plan): EchoReply {
  return { message, index, echoed: plan.echoed };
}

function sendHeaders(call: { sendMetadata(md: grpc.Metadata): void }, plan: Plan): void {
  if (plan.headers) call.sendMetadata(plan.headers);
}

function finishStream(call: grpc.ServerWritableStream<EchoRequest, EchoReply> | grpc.ServerDuplexStream<EchoRequest, EchoReply>, plan: Plan): void {
  // grpc-js's way for a stream to end with a status: an "error" event carrying {code, details, metadata}.
  if (plan.status) call.emit("error", plan.status);
  else call.end(plan.trailers);
}

export interface CompressingGrpcServer {
  readonly port: number;
  /** Every call: its :path and request headers (lower-case names). */
  readonly calls: { path: string; headers: Record<string, string | string[] | undefined> }[];
  close(): Promise<void>;
}

/** Any gRPC call → one gzip-compressed EchoReply {message: "compressed", echoed: <authorization>}, grpc-status 0. */
export async function startCompressingGrpcServer(opts: { pki: TestPki }): Promise<CompressingGrpcServer> {
  const calls: CompressingGrpcServer["calls"] = [];
  const server = createSecureServer({ cert: opts.pki.certPem, key: opts.pki.keyPem });
  server.on("session", (s) => s.on("error", () => {}));
  server.on("stream", (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    stream.on("error", () => {});
    calls.push({ path: String(headers[":path"]), headers: { ...headers } });
    stream.resume();
    stream.on("end", () => {
      const auth = String(headers.authorization ?? "");
      const reply = Buffer.concat([protoString(1, "compressed"), protoString(3, auth)]);
      const gz = gzipSync(reply);
      const prefix = Buffer.alloc(5);
      prefix.writeUInt8(1, 0); // compressed flag
      prefix.writeUInt32BE(gz.byteLength, 1);
      stream.respond({ ":status": 200, "content-type": "application/grpc", "grpc-encoding": "gzip" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.concat([prefix, gz]));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A protobuf length-delimited field (wire type 2) holding `text`. */
function protoString(field: number, text: string): Buffer {
  const bytes = Buffer.from(text, "utf8");
  const len: number[] = [];
  for (let n = bytes.byteLength; ; n >>>= 7) {
    if (n < 0x80) {
      len.push(n);
      break;
    }
    len.push((n & 0x7f) | 0x80);
  }
  return Buffer.concat([Buffer.from([(field << 3) | 2, ...len]), bytes]);
}
