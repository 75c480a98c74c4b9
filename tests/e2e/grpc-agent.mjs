// An agent using @grpc/grpc-js as any gRPC user would, run by Node (not Bun) under `broker vault run`
// for tunnel-grpc.test.ts. Nothing broker-specific in here: grpc-js finds the proxy in grpc_proxy (which
// vault run sets), sends CONNECT with Proxy-Authorization from the URL's user info, and verifies the
// server with createSsl()'s default roots (GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, also set by vault run).
//
// argv[2] is a JSON config {proto, calls: [{name, target, service, method, kind, requests, metadata?,
// channelOptions?, parallel?, messageBytes?}]}; kind is unary | serverStream | clientStream | bidi, or
// pingPong: a bidi call that sends each request only after the reply to the one before has arrived.
// `cancelAfter: N` cancels the call once N replies have arrived (it then ends CANCELLED).
// `parallel: N` starts N copies at once on one channel (results "name#0"…); `messageBytes: N` makes
// each request's message N generated characters, and replies then read "sha256:<hex>:<length>".
// The calls run one after another; one JSON object is printed:
// {sessionToken, results: {name: {code, details, headers, trailers, replies}}}.

import * as grpc from "@grpc/grpc-js";
import { createHash } from "node:crypto";
import * as protoLoader from "@grpc/proto-loader";

const cfg = JSON.parse(process.argv[2]);
// Same options as tests/helpers/grpc-server.ts (PROTO_OPTIONS).
const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(cfg.proto, { keepCase: true, longs: Number, enums: String, defaults: true }));
const credentials = grpc.credentials.createSsl();
const clients = new Map();

function clientFor(target, service, options = {}) {
  const key = `${target} ${service} ${JSON.stringify(options)}`;
  if (!clients.has(key)) clients.set(key, new pkg.echo.v1[service](target, credentials, options));
  return clients.get(key);
}

/** `bytes` deterministic characters (a repeating alphabet), so the server and the test can check them. */
function generated(bytes) {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  return alphabet.repeat(Math.ceil(bytes / alphabet.length)).slice(0, bytes);
}

const digest = (text) => `sha256:${createHash("sha256").update(text).digest("hex")}:${text.length}`;

function toMetadata(entries = {}) {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(entries)) md.add(k, v);
  return md;
}

/** Metadata as {key: [values]}, binary values base64. */
function plain(md) {
  if (!md) return {};
  const out = {};
  for (const [k, values] of Object.entries(md.toJSON())) out[k] = values.map((v) => (typeof v === "string" ? v : Buffer.from(v).toString("base64")));
  return out;
}

function run(spec) {
  const client = clientFor(spec.target, spec.service, spec.channelOptions);
  const requests = spec.messageBytes ? spec.requests.map((r) => ({ ...r, message: generated(spec.messageBytes) })) : spec.requests;
  const fn = client[spec.method].bind(client);
  const metadata = toMetadata(spec.metadata);
  const options = { deadline: Date.now() + 30_000 };
  return new Promise((resolve) => {
    const out = { code: -1, details: "", headers: {}, trailers: {}, replies: [] };
    let finished = false;
    const finish = (status) => {
      if (finished) return;
      finished = true;
      out.code = status.code;
      out.details = status.details;
      out.trailers = plain(status.metadata);
      resolve(out);
    };
    const onReply = (r) => {
      out.replies.push(spec.messageBytes ? { ...r, message: digest(r.message) } : r);
      if (out.replies.length === spec.cancelAfter) call.cancel();
    };
    let call;
    if (spec.kind === "unary" || spec.kind === "clientStream") {
      const callback = (err, r) => {
        if (err) finish(err);
        else onReply(r);
      };
      call = spec.kind === "unary" ? fn(requests[0], metadata, options, callback) : fn(metadata, options, callback);
    } else {
      call = spec.kind === "serverStream" ? fn(requests[0], metadata, options) : fn(metadata, options);
      // A stream is done when its status came and its replies were all read (end) or it failed (error).
      let status;
      let drained = false;
      const settle = () => status && drained && finish(status);
      call.on("data", onReply);
      call.on("end", () => ((drained = true), settle()));
      call.on("error", (err) => ((drained = true), (status ??= err), settle()));
      call.on("status", (s) => ((status = s), settle()));
    }
    call.on("metadata", (md) => (out.headers = plain(md)));
    if (spec.kind === "unary" || spec.kind === "clientStream") call.on("status", (s) => finish(s));
    if (spec.kind === "clientStream" || spec.kind === "bidi") {
      for (const r of requests) call.write(r);
      call.end();
    }
    if (spec.kind === "pingPong") {
      let next = 0;
      const send = () => (next < requests.length ? call.write(requests[next++]) : call.end());
      call.on("data", send);
      send();
    }
  });
}

const results = {};
for (const spec of cfg.calls) {
  if (!spec.parallel) results[spec.name] = await run(spec);
  else (await Promise.all(Array.from({ length: spec.parallel }, () => run(spec)))).forEach((r, i) => (results[`${spec.name}#${i}`] = r));
}
for (const c of clients.values()) c.close();
process.stdout.write(`${JSON.stringify({ sessionToken: process.env.BROKER_SESSION_TOKEN ?? null, results })}\n`);
