// A frame guard in front of the HTTP/2 parser: reads the 9-byte frame headers of everything the
// peer sends (payloads are only skipped) and stops a connection that makes the broker work for
// nothing. It stands on both sides: before the agent-facing server (tunnel/h2.ts) and before the
// client of an upstream (upstream-h2.ts), whose parser a hostile upstream could flood the same way. Bun's parser already refuses oversized header lists, HPACK bombs, window overflows and
// PING/SETTINGS floods, but it lets a header block run on over endless empty CONTINUATION frames
// (the CVE-2024-27316 family) and accepts ~1,000 reset streams before it reacts (rapid reset,
// CVE-2023-44487). The guard keeps those bounds ours, whatever the runtime does.

import type { Duplex } from "node:stream";
import { coalescingSocket } from "./coalescing-socket.ts";

export interface FrameLimits {
  /** CONTINUATION frames one header block may use (a 64 KiB list needs 4 at the default frame size). */
  readonly maxContinuations: number;
  /** Encoded bytes one header block may take, over all its frames. */
  readonly maxHeaderBlockBytes: number;
  /** Streams the agent may reset at once, and per second after that. */
  readonly resetBurst: number;
  readonly resetsPerSecond: number;
  /** Frames that move no request forward (PING, SETTINGS, PRIORITY, RST_STREAM, tiny WINDOW_UPDATEs, empty DATA or header frames, unknown types). */
  readonly idleFrameBurst: number;
  readonly idleFramesPerSecond: number;
}

export const FRAME_LIMITS: FrameLimits = {
  maxContinuations: 16,
  maxHeaderBlockBytes: 80 * 1024,
  resetBurst: 100,
  resetsPerSecond: 10,
  idleFrameBurst: 1_000,
  idleFramesPerSecond: 100,
};

const PREFACE_BYTES = 24;
const TYPE = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 };
const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
/** A WINDOW_UPDATE that opens less than this is a dribble, not flow control. */
const SMALL_WINDOW_INCREMENT = 1024;

/** A token bucket: `burst` at once, refilled at `perSecond`. */
function bucket(burst: number, perSecond: number): () => boolean {
  let tokens = burst;
  let last = performance.now();
  return () => {
    const now = performance.now();
    tokens = Math.min(burst, tokens + ((now - last) * perSecond) / 1000);
    last = now;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}

/**
 * Reads frame headers as bytes pass and calls `onAbuse` once (then drops whatever else arrives) when
 * a limit is crossed. Needs only O(1) state: the frame in progress and two buckets.
 */
export function createFrameInspector(
  limits: FrameLimits,
  onAbuse: (reason: string) => void,
  side: "server" | "client" = "server",
): (chunk: Uint8Array) => boolean {
  // A server first reads the client's connection preface; a client reads frames from the start.
  let prefaceLeft = side === "server" ? PREFACE_BYTES : 0;
  const head = new Uint8Array(9);
  let headHave = 0;
  let payloadLeft = 0;
  let type = -1;
  let flags = 0;
  let length = 0;
  const increment = new Uint8Array(4);
  let incrementHave = 0;
  let inBlock = false;
  let continuations = 0;
  let blockBytes = 0;
  let abused = false;
  const reset = bucket(limits.resetBurst, limits.resetsPerSecond);
  const idle = bucket(limits.idleFrameBurst, limits.idleFramesPerSecond);
  const abuse = (reason: string) => {
    abused = true;
    onAbuse(reason);
  };

  const idleFrame = () => idle() || (abuse("too many frames that do no work"), false);

  /** A frame's header is complete: check what it costs. */
  const onHeader = () => {
    length = (head[0]! << 16) | (head[1]! << 8) | head[2]!;
    type = head[3]!;
    flags = head[4]!;
    payloadLeft = length;
    incrementHave = 0;
    if (inBlock && type !== TYPE.CONTINUATION) return; // the parser answers with PROTOCOL_ERROR
    switch (type) {
      case TYPE.HEADERS:
        inBlock = (flags & END_HEADERS) === 0;
        continuations = 0;
        blockBytes = length;
        if (length === 0 && inBlock) idleFrame();
        break;
      case TYPE.CONTINUATION:
        continuations++;
        blockBytes += length;
        if (continuations > limits.maxContinuations || blockBytes > limits.maxHeaderBlockBytes) return abuse("header block too long (CONTINUATION frames)");
        if (length === 0 && (flags & END_HEADERS) === 0) idleFrame();
        if (flags & END_HEADERS) inBlock = false;
        break;
      case TYPE.DATA:
        if (length === 0 && (flags & END_STREAM) === 0) idleFrame();
        break;
      case TYPE.RST_STREAM:
        if (!reset()) return abuse("too many streams reset (rapid reset)");
        idleFrame();
        break;
      case TYPE.PING:
      case TYPE.SETTINGS:
        if ((flags & ACK) === 0) idleFrame();
        break;
      case TYPE.WINDOW_UPDATE:
        if (length !== 4) idleFrame(); // malformed: the parser refuses it
        break;
      case TYPE.GOAWAY:
        break;
      default: // PRIORITY, PUSH_PROMISE (refused by the parser) and extension types, which receivers ignore
        idleFrame();
    }
  };

  return (chunk) => {
    let at = 0;
    while (at < chunk.byteLength && !abused) {
      if (prefaceLeft > 0) {
        const take = Math.min(prefaceLeft, chunk.byteLength - at);
        prefaceLeft -= take;
        at += take;
      } else if (payloadLeft > 0) {
        const take = Math.min(payloadLeft, chunk.byteLength - at);
        if (type === TYPE.WINDOW_UPDATE && length === 4) {
          increment.set(chunk.subarray(at, at + take), incrementHave);
          incrementHave += take;
          if (incrementHave === 4) {
            const value = ((increment[0]! & 0x7f) << 24) | (increment[1]! << 16) | (increment[2]! << 8) | increment[3]!;
            if (value < SMALL_WINDOW_INCREMENT) idleFrame();
          }
        }
        payloadLeft -= take;
        at += take;
      } else {
        const take = Math.min(9 - headHave, chunk.byteLength - at);
        head.set(chunk.subarray(at, at + take), headHave);
        headHave += take;
        at += take;
        if (headHave === 9) {
          headHave = 0;
          onHeader();
        }
      }
    }
    return !abused;
  };
}

/**
 * One side of an HTTP/2 connection, inspected: bytes pass unchanged both ways (the session's frames
 * coalesced), and once the inspector reports abuse nothing more from the peer reaches the parser.
 */
export function guardFrames(inner: Duplex, limits: FrameLimits, onAbuse: (reason: string) => void, side: "server" | "client" = "server"): Duplex {
  return coalescingSocket(inner, createFrameInspector(limits, onAbuse, side));
}
