// Reading an upstream's response head off a connection, for the upstream client and WebSocket
// upgrades alike: bounded in size, interim answers (100, 103) skipped, a 101 only for a caller that
// asked to switch protocols. Bytes after the head stay on the connection for the body or the relay.

import type { Connection } from "./connection.ts";
import { findHeadEnd, parseResponseHead, WireError, type ResponseHead } from "../http/index.ts";

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
  // One buffer grown by doubling, searched only where new bytes could complete the blank line: a
  // head paced out a few bytes at a time costs linear work, not a copy and a rescan per read.
  let buf: Uint8Array = new Uint8Array(0);
  let filled = 0;
  for (;;) {
    const chunk = await conn.read();
    if (chunk === null) throw new ClosedBeforeHead("connection closed before a response");
    opts.onBytes?.();
    const searched = filled;
    if (filled === 0) buf = chunk;
    else {
      if (filled + chunk.byteLength > buf.byteLength) buf = grown(buf, filled, filled + chunk.byteLength);
      buf.set(chunk, filled);
    }
    filled += chunk.byteLength;
    const end = findHeadEnd(buf.subarray(0, filled), searched);
    if (end < 0) {
      if (filled > max) throw new WireError("response head too large");
      continue;
    }
    const head = parseResponseHead(buf.subarray(0, end));
    conn.unread(buf.subarray(end, filled));
    buf = new Uint8Array(0);
    filled = 0;
    // A status outside 100-599 is no HTTP status: /proxy could not build a Response from it, and the
    // tunnel would write the agent a status line it cannot read.
    if (head.status < 100 || head.status > 599) throw new WireError("unsupported status");
    if (head.status === 101 && opts.switching) return head;
    if (head.status >= 100 && head.status < 200 && head.status !== 101) continue; // interim responses (100, 103)
    if (head.status === 101) throw new WireError("unsupported status");
    return head;
  }
}

/** A copy of the first `filled` bytes with room for at least `need` (twice as much, so growth is amortized). */
function grown(buf: Uint8Array, filled: number, need: number): Uint8Array {
  const out = new Uint8Array(Math.max(need, 2 * buf.byteLength, 1024));
  out.set(buf.subarray(0, filled), 0);
  return out;
}
