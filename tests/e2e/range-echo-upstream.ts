// An upstream that honestly supports Range (RFC 9110 §14) over a body that echoes the Authorization
// it received, as static file servers and object stores do, plus a hostile one that answers in pieces
// nobody asked for. Used by ranges-echo.test.ts; with a scan of each 206 alone, two ranged requests
// (or one multi-range one) would hand the agent an injected value in pieces.
//
//   GET /file           ECHO_AT bytes of ".", then the Authorization, then "." to ECHO_BODY_BYTES;
//                       one range: 206 + Content-Range; several: 206 multipart/byteranges; none: 200
//   GET /hostile?kind=  a piece of that body whatever was asked: "206" (with Content-Range),
//                       "multipart" (200 multipart/byteranges) or "content-range" (200 + Content-Range)
//   GET /replay         /file for the last Authorization any request brought (a request bin that
//                       serves what it logged to whoever asks, with Range)
// Plus the agent's side: every byte an answer gives, placed at its offset, whatever its shape.

import type { IncomingMessage, ServerResponse } from "node:http";

/** Where the echoed Authorization starts: "Bearer " is 7 bytes, so the value itself starts at 81. */
export const ECHO_AT = 74;
export const ECHO_BODY_BYTES = 400;
const BOUNDARY = "range-echo-boundary";

/** The body /file serves for an Authorization (what a whole 200 holds before redaction). */
export function rangeEchoBody(auth: string): Buffer {
  const head = ".".repeat(ECHO_AT) + auth;
  return Buffer.from(head + ".".repeat(Math.max(0, ECHO_BODY_BYTES - head.length)), "latin1");
}

/** The ranges of a Range header, resolved against `size` (undefined: not one the server honours). */
function parseRanges(value: string, size: number): [number, number][] | undefined {
  const m = /^bytes=(.+)$/i.exec(value.trim());
  if (!m) return undefined;
  const out: [number, number][] = [];
  for (const spec of m[1]!.split(",")) {
    const r = /^\s*(\d*)-(\d*)\s*$/.exec(spec);
    if (!r || (r[1] === "" && r[2] === "")) return undefined;
    const [first, last] =
      r[1] === "" ? [Math.max(0, size - Number(r[2])), size - 1] : [Number(r[1]), r[2] === "" ? size - 1 : Math.min(Number(r[2]), size - 1)];
    if (first <= last && first < size) out.push([first, last]);
  }
  return out;
}

function multipart(body: Buffer, ranges: [number, number][]): Buffer {
  const parts = ranges.map(([a, b]) =>
    Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\nContent-Type: text/plain\r\nContent-Range: bytes ${a}-${b}/${body.length}\r\n\r\n`),
      body.subarray(a, b + 1),
      Buffer.from("\r\n"),
    ]),
  );
  return Buffer.concat([...parts, Buffer.from(`--${BOUNDARY}--\r\n`)]);
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  res.writeHead(status, { ...headers, "content-length": String(body.length) });
  res.end(body);
}

let logged = "";

export function rangeEchoHandler(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "https://upstream.test");
  if (req.headers.authorization) logged = req.headers.authorization;
  const body = rangeEchoBody(url.pathname === "/replay" ? logged : String(req.headers.authorization ?? ""));
  const piece = body.subarray(ECHO_AT + 7, ECHO_AT + 7 + 20);
  if (url.pathname === "/hostile") {
    const cr = `bytes ${ECHO_AT + 7}-${ECHO_AT + 26}/${body.length}`;
    switch (url.searchParams.get("kind")) {
      case "206":
        return send(res, 206, { "content-type": "text/plain", "content-range": cr }, piece);
      case "multipart":
        return send(res, 200, { "content-type": `multipart/byteranges; boundary=${BOUNDARY}` }, multipart(body, [[ECHO_AT + 7, ECHO_AT + 26]]));
      case "content-range":
        return send(res, 200, { "content-type": "text/plain", "content-range": cr }, piece);
    }
  }
  const range = req.headers.range;
  const ranges = range === undefined ? undefined : parseRanges(range, body.length);
  if (!ranges) return send(res, 200, { "content-type": "text/plain", "accept-ranges": "bytes" }, body);
  if (ranges.length === 0) return send(res, 416, { "content-range": `bytes */${body.length}` }, Buffer.alloc(0));
  if (ranges.length === 1) {
    const [a, b] = ranges[0]!;
    return send(res, 206, { "content-type": "text/plain", "content-range": `bytes ${a}-${b}/${body.length}` }, body.subarray(a, b + 1));
  }
  send(res, 206, { "content-type": `multipart/byteranges; boundary=${BOUNDARY}` }, multipart(body, ranges));
}

/** An answer as the agent read it. */
export interface AgentAnswer {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Every byte the agent got, at its offset in the upstream's representation: a 200 from 0, a 206 at its
 * Content-Range, each part of a multipart/byteranges at its own. What a patient agent can assemble.
 */
export function reassemble(answers: AgentAnswer[]): string {
  const at = new Map<number, string>();
  const place = (from: number, bytes: Buffer) => bytes.forEach((b, i) => at.set(from + i, String.fromCharCode(b)));
  for (const a of answers) {
    const boundary = /multipart\/byteranges;\s*boundary=("?)([^";]+)\1/i.exec(a.headers["content-type"] ?? "")?.[2];
    if (boundary) {
      for (const part of a.body.toString("latin1").split(`--${boundary}`)) {
        const [head, ...rest] = part.split("\r\n\r\n");
        const first = /content-range:\s*bytes (\d+)-/i.exec(head ?? "")?.[1];
        if (first !== undefined) place(Number(first), Buffer.from(rest.join("\r\n\r\n").replace(/\r\n$/, ""), "latin1"));
      }
    } else if (a.status === 206) {
      const first = /bytes (\d+)-/.exec(a.headers["content-range"] ?? "")?.[1];
      if (first !== undefined) place(Number(first), a.body);
    } else if (a.status === 200) {
      place(0, a.body);
    }
  }
  const end = Math.max(-1, ...at.keys()) + 1;
  let text = "";
  for (let i = 0; i < end; i++) text += at.get(i) ?? "\0";
  return text;
}

/**
 * Where 4-character pieces of `value`, or 6-character pieces of its base64 at each alignment, occur
 * in `text`: named by their offset in the value (a failure never prints the value itself).
 */
export function piecesOf(value: string, text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i + 4 <= value.length; i++) if (text.includes(value.slice(i, i + 4))) found.push(`value[${i}..${i + 4})`);
  for (const pad of ["", "x", "xy"]) {
    // The characters that depend on the padding's bytes are left out.
    const b64 = Buffer.from(pad + value)
      .toString("base64")
      .replace(/=+$/, "")
      .slice(pad.length ? 4 : 0, -2);
    for (let i = 0; i + 6 <= b64.length; i++) if (text.includes(b64.slice(i, i + 6))) found.push(`base64 (${pad.length} before) [${i}..${i + 6})`);
  }
  return found;
}
