// Server-to-client WebSocket frames (RFC 6455 §5) on an injected upgrade: a push-based parser that
// re-frames every message through a streaming redactor, so no injected value reaches the agent in
// a frame. Pure (no sockets). Anything it cannot scan is an error, never bytes passed through.

import { compileNeedles, createRedactor, redactWhole, type NeedleSet, type Redactor } from "./redact.ts";

export class WebSocketProtocolError extends Error {}

/** Control frames carry at most this many payload bytes (RFC 6455 §5.5). */
export const MAX_CONTROL_PAYLOAD = 125;

const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;
const KNOWN_OPCODES = new Set([OP_CONTINUATION, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG]);

interface FrameHead {
  readonly fin: boolean;
  readonly opcode: number;
  readonly length: number;
  /** Bytes the head took on the wire. */
  readonly size: number;
}

export interface FrameScanner {
  /** Upstream bytes in; the redacted frames the agent may read out. Throws WebSocketProtocolError. */
  push(chunk: Uint8Array): Uint8Array;
}

/**
 * Parses a frame head, or returns null while it is incomplete. Server frames are never masked, and
 * no extension is negotiated on a scanned connection, so a mask or any RSV bit is refused: a
 * compressed (RSV1) payload would hide the value from the scan.
 */
export function parseFrameHead(buf: Uint8Array): FrameHead | null {
  if (buf.length < 2) return null;
  const b0 = buf[0]!;
  const b1 = buf[1]!;
  const opcode = b0 & 0x0f;
  if (b0 & 0x70) throw new WebSocketProtocolError("frame uses RSV bits no extension negotiated");
  if (b1 & 0x80) throw new WebSocketProtocolError("server frame is masked");
  if (!KNOWN_OPCODES.has(opcode)) throw new WebSocketProtocolError(`reserved opcode ${opcode}`);
  const len7 = b1 & 0x7f;
  const size = len7 === 126 ? 4 : len7 === 127 ? 10 : 2;
  if (buf.length < size) return null;
  const view = new DataView(buf.buffer, buf.byteOffset, size);
  let length = len7;
  if (len7 === 126) length = view.getUint16(2);
  if (len7 === 127) {
    const high = view.getUint32(2);
    if (high > 0x1fffff) throw new WebSocketProtocolError("frame length out of range"); // beyond 2^53, or the reserved top bit
    length = high * 2 ** 32 + view.getUint32(6);
  }
  const fin = (b0 & 0x80) !== 0;
  if (opcode >= OP_CLOSE && (!fin || length > MAX_CONTROL_PAYLOAD)) throw new WebSocketProtocolError("fragmented or oversized control frame");
  return { fin, opcode, length, size };
}

/** One unmasked server frame, with the shortest length encoding. */
export function encodeFrame(fin: boolean, opcode: number, payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const size = n < 126 ? 2 : n < 0x10000 ? 4 : 10;
  const out = new Uint8Array(size + n);
  const view = new DataView(out.buffer);
  out[0] = (fin ? 0x80 : 0) | opcode;
  if (n < 126) out[1] = n;
  else if (n < 0x10000) {
    out[1] = 126;
    view.setUint16(2, n);
  } else {
    out[1] = 127;
    view.setUint32(2, Math.floor(n / 2 ** 32));
    view.setUint32(6, n >>> 0);
  }
  out.set(payload, size);
  return out;
}

/** A close frame the broker itself sends (e.g. 1011 when the upstream's frames cannot be scanned). */
export function encodeCloseFrame(code: number, reason: string): Uint8Array {
  const text = Buffer.from(reason, "utf8").subarray(0, MAX_CONTROL_PAYLOAD - 2);
  const payload = new Uint8Array(2 + text.length);
  new DataView(payload.buffer).setUint16(0, code);
  payload.set(text, 2);
  return encodeFrame(true, OP_CLOSE, payload);
}

/**
 * Redacts a control frame's payload and keeps it within 125 bytes ("[redacted]" can be longer than
 * what it replaced). A close reason that no longer fits is dropped rather than cut, since it must
 * stay valid UTF-8; ping and pong payloads are opaque bytes, so they are truncated.
 */
export function redactControlPayload(opcode: number, payload: Uint8Array, needles: NeedleSet): Uint8Array {
  if (opcode === OP_CLOSE && payload.length >= 2) {
    const reason = redactWhole(payload.subarray(2), needles);
    if (reason.length > MAX_CONTROL_PAYLOAD - 2) return payload.slice(0, 2);
    return Buffer.concat([payload.subarray(0, 2), reason]);
  }
  const out = redactWhole(payload, needles);
  return out.length > MAX_CONTROL_PAYLOAD ? out.subarray(0, MAX_CONTROL_PAYLOAD) : out;
}

interface Message {
  readonly opcode: number;
  readonly redactor: Redactor;
  /** Whether a frame of this message went out already (later ones are continuations). */
  started: boolean;
}

/**
 * Streaming re-framer. Each data frame's payload goes through one redactor per message (so a value
 * split across frames or TCP chunks is still caught) and comes out as soon as it is safe: the first
 * frame keeps the opcode, later ones are continuations, and the held-back tail leaves with FIN.
 * Nothing is buffered beyond a frame head, a control payload and the redactor's tail.
 */
export function createFrameScanner(set: NeedleSet): FrameScanner {
  const needles = compileNeedles(set);
  let pendingHead: Uint8Array = new Uint8Array(0);
  let frame: FrameHead | undefined;
  let remaining = 0;
  let control: Uint8Array[] = [];
  let message: Message | undefined;
  let closed = false;

  function startFrame(head: FrameHead) {
    if (head.opcode === OP_TEXT || head.opcode === OP_BINARY) {
      if (message) throw new WebSocketProtocolError("new message before the previous one finished");
      message = { opcode: head.opcode, redactor: createRedactor(needles), started: false };
    } else if (head.opcode === OP_CONTINUATION && !message) {
      throw new WebSocketProtocolError("continuation frame outside a message");
    }
    frame = head;
    remaining = head.length;
    control = [];
  }

  function emitData(out: Uint8Array[], m: Message, data: Uint8Array, fin: boolean) {
    if (!fin && data.length === 0) return;
    out.push(encodeFrame(fin, m.started ? OP_CONTINUATION : m.opcode, data));
    m.started = true;
  }

  /** Consumes payload bytes of the current frame; finishes the frame when they are all in. */
  function takePayload(out: Uint8Array[], bytes: Uint8Array) {
    const f = frame!;
    remaining -= bytes.length;
    const done = remaining === 0;
    if (f.opcode >= OP_CLOSE) {
      if (bytes.length) control.push(bytes.slice());
      if (!done) return;
      out.push(encodeFrame(true, f.opcode, redactControlPayload(f.opcode, Buffer.concat(control), needles)));
      if (f.opcode === OP_CLOSE) closed = true;
    } else {
      const m = message!;
      let data = bytes.length ? m.redactor.push(bytes) : bytes;
      if (done && f.fin) {
        const tail = m.redactor.flush();
        if (tail.length) data = Buffer.concat([data, tail]);
        message = undefined;
      }
      emitData(out, m, data, done && f.fin);
    }
    if (done) frame = undefined;
  }

  return {
    push(chunk) {
      const out: Uint8Array[] = [];
      let i = 0;
      // Nothing may follow a close frame (RFC 6455 §5.5.1): drop it rather than scan it.
      while (!closed && (i < chunk.length || (frame && remaining === 0))) {
        if (!frame) {
          const take = chunk.subarray(i, i + 10 - pendingHead.length);
          const buf = pendingHead.length ? Buffer.concat([pendingHead, take]) : take;
          const head = parseFrameHead(buf);
          if (!head) {
            pendingHead = buf.slice();
            i += take.length;
            continue;
          }
          i += head.size - pendingHead.length;
          pendingHead = new Uint8Array(0);
          startFrame(head);
          continue;
        }
        const n = Math.min(remaining, chunk.length - i);
        takePayload(out, chunk.subarray(i, i + n));
        i += n;
      }
      return out.length === 1 ? out[0]! : Buffer.concat(out);
    },
  };
}
