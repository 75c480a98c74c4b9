// The upstream's answer to an injected WebSocket upgrade, before any frame: its head redacted (no
// reveal by echo in a 101), and a refused upgrade's body decoded (framing, content coding) and
// redacted. Never passes an upstream byte it could not scan to the agent.

import { BrokerError } from "../errors.ts";
import { REDACTED } from "../secret.ts";
import type { Connection } from "./connection.ts";
import { createBodyRecoder, parseCodings } from "./content-coding.ts";
import { headerValues, responseFraming, type HeaderList, type ResponseHead } from "./http1.ts";
import { createRedactor } from "./redact.ts";
import { bodyStream } from "./upstream-body.ts";

// Framing and connection management are ours on the agent's side (the refusal is re-framed).
const REFUSAL_DROP = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "content-length", "x-broker-error"]);

function redactText(text: string, needles: readonly string[]): string {
  let out = text;
  for (const n of needles) if (n && out.includes(n)) out = out.split(n).join(REDACTED);
  return out;
}

/**
 * The head with every needle replaced in the reason phrase and header values. Heads are latin1
 * on the wire and needles are matched in that form too, so a non-ASCII value is still caught.
 */
export function redactResponseHead(head: ResponseHead, needles: readonly string[]): ResponseHead {
  if (needles.length === 0) return head;
  const forms = [...new Set(needles.flatMap((n) => [n, Buffer.from(n, "utf8").toString("latin1")]))];
  return {
    ...head,
    statusText: redactText(head.statusText, forms),
    headers: head.headers.map(([k, v]): [string, string] => [k, redactText(v, forms)]),
  };
}

/** Whether a 101 names any extension: on a scanned connection that means frames we could not read. */
export function namesExtension(head: ResponseHead): boolean {
  return headerValues(head.headers, "sec-websocket-extensions").some((v) => v.trim() !== "");
}

/** Drops Sec-WebSocket-Extensions from an injected upgrade request, so the upstream cannot negotiate compression. */
export function withoutExtensions(headers: HeaderList): HeaderList {
  return headers.filter(([k]) => k.toLowerCase() !== "sec-websocket-extensions");
}

/**
 * A non-101 answer as a Response for the agent (the connection closes after it): the body read to
 * its framed end, decoded, redacted and encoded again like any injected response; a coding the
 * broker cannot decode throws UndecodableResponse. `done` runs once with the upstream body bytes
 * read and an audit error code (null when clean).
 */
export function shapeRefusal(head: ResponseHead, conn: Connection, needles: readonly string[], done: (bytesOut: number, error: string | null) => void): Response {
  const encoding = headerValues(head.headers, "content-encoding").join(",");
  const codings = needles.length ? parseCodings(encoding || null) : [];
  const headers = new Headers();
  for (const [k, v] of head.headers) if (!REFUSAL_DROP.has(k.toLowerCase())) headers.append(k, v);
  const upstream = bodyStream(conn, responseFraming(head, "GET"), async () => {});
  if (!upstream) {
    done(0, null);
    return new Response(null, { status: head.status, statusText: head.statusText, headers });
  }
  const redactor = needles.length ? createRedactor(needles) : undefined;
  const recoder = redactor && codings.length ? createBodyRecoder(codings, redactor) : undefined;
  const reader = upstream.getReader();
  let bytesOut = 0;
  let reported = false;
  const report = (error: string | null) => {
    if (!reported) (reported = true), done(bytesOut, error);
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        // Loop until something is enqueued: a pull that enqueues nothing is not called again.
        for (;;) {
          const { done: end, value } = await reader.read();
          if (end) {
            const rest = recoder ? await recoder.end() : redactor?.flush();
            if (rest?.length) ctrl.enqueue(rest);
            ctrl.close();
            return report(null);
          }
          bytesOut += value.byteLength;
          const out = recoder ? await recoder.push(value) : redactor ? redactor.push(value) : value;
          if (out.length) return ctrl.enqueue(out);
        }
      } catch (err) {
        report(err instanceof BrokerError ? err.code : "upstream_stream_error");
        recoder?.destroy();
        await reader.cancel().catch(() => {});
        ctrl.error(err);
      }
    },
    cancel(reason) {
      report("client_cancelled");
      recoder?.destroy();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: head.status, statusText: head.statusText, headers });
}
