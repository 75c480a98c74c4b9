// Reading an upstream's response head off a connection, for the upstream client and WebSocket
// upgrades alike: bounded in size, interim answers (100, 103) skipped, a 101 only for a caller that
// asked to switch protocols. Bytes after the head stay on the connection for the body or the relay.

import type { Connection } from "./connection.ts";
import { findHeadEnd, parseResponseHead, WireError, type ResponseHead } from "./http1.ts";

export const MAX_HEAD_BYTES = 64 * 1024;

/** The connection ended before a complete head (a stale keep-alive connection, or an upstream that hung up). */
export class ClosedBeforeHead extends Error {}

export interface HeadReading {
  /** Default MAX_HEAD_BYTES. */
  readonly maxBytes?: number;
  /** True for a WebSocket upgrade: a 101 is the answer; otherwise a 101 is a wire error. */
  readonly switching?: boolean;
  /** Told when any byte arrives (a request that got bytes back must not be replayed). */
  readonly onBytes?: () => void;
}

/** Throws ClosedBeforeHead, WireError (too large, malformed, unsupported status) or the connection's own error. */
export async function readResponseHead(conn: Connection, opts: HeadReading = {}): Promise<ResponseHead> {
  const max = opts.maxBytes ?? MAX_HEAD_BYTES;
  let buf: Uint8Array = new Uint8Array(0);
  for (;;) {
    const chunk = await conn.read();
    if (chunk === null) throw new ClosedBeforeHead("connection closed before a response");
    opts.onBytes?.();
    buf = concat(buf, chunk);
    const end = findHeadEnd(buf);
    if (end < 0) {
      if (buf.byteLength > max) throw new WireError("response head too large");
      continue;
    }
    const head = parseResponseHead(buf.subarray(0, end));
    conn.unread(buf.subarray(end));
    buf = new Uint8Array(0);
    if (head.status === 101 && opts.switching) return head;
    if (head.status >= 100 && head.status < 200 && head.status !== 101) continue; // interim responses (100, 103)
    if (head.status === 101 || head.status > 599) throw new WireError("unsupported status");
    return head;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.byteLength === 0) return b;
  const out = new Uint8Array(a.byteLength + b.byteLength);
  out.set(a, 0);
  out.set(b, a.byteLength);
  return out;
}
