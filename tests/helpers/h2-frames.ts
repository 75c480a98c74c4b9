// A raw HTTP/2 client for attack tests: writes frames byte by byte (RFC 9113 §4.1) so a test can
// send what no well-behaved client library would (floods, resets, oversized header blocks), and
// reads back the frames the server answers with. HPACK here is literal-only (RFC 7541 §6.2.2),
// plus "indexed" references for the HPACK-bomb test.

import { connect as tlsConnect, type TLSSocket } from "node:tls";

export const FRAME = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const FLAG = { END_STREAM: 1, ACK: 1, END_HEADERS: 4 } as const;
export const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

export function frame(type: number, flags: number, streamId: number, payload: Uint8Array = new Uint8Array()): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.byteLength, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1); `first` holds the bits above the prefix. */
export function hpackInt(value: number, prefixBits: number, first = 0): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([first | value]);
  const out = [first | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return Buffer.from(out);
}

/** Header fields as HPACK literals without indexing (new names), no Huffman. */
export function hpackLiterals(fields: readonly [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of fields) {
    const n = Buffer.from(name, "latin1");
    const v = Buffer.from(value, "latin1");
    parts.push(Buffer.from([0x00]), hpackInt(n.byteLength, 7), n, hpackInt(v.byteLength, 7), v);
  }
  return Buffer.concat(parts);
}

/** A literal header field WITH incremental indexing (it enters the dynamic table, index 62 when newest). */
export function hpackIndexedLiteral(name: string, value: string): Buffer {
  const n = Buffer.from(name, "latin1");
  const v = Buffer.from(value, "latin1");
  return Buffer.concat([Buffer.from([0x40]), hpackInt(n.byteLength, 7), n, hpackInt(v.byteLength, 7), v]);
}

/** A reference to an entry of the header tables (RFC 7541 §6.1). */
export function hpackIndexed(index: number): Buffer {
  return hpackInt(index, 7, 0x80);
}

export function requestBlock(authority: string, path: string, method = "GET", extra: [string, string][] = []): Buffer {
  return hpackLiterals([[":method", method], [":scheme", "https"], [":authority", authority], [":path", path], ...extra]);
}

export function settingsFrame(settings: [number, number][] = []): Buffer {
  const payload = Buffer.alloc(settings.length * 6);
  settings.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return frame(FRAME.SETTINGS, 0, 0, payload);
}

export function rstFrame(streamId: number, code = 8): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, streamId, p);
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment);
  return frame(FRAME.WINDOW_UPDATE, 0, streamId, p);
}

export interface ReadFrame {
  readonly type: number;
  readonly flags: number;
  readonly streamId: number;
  readonly payload: Buffer;
}

/** GOAWAY's error code (RFC 9113 §6.8), or undefined for another frame. */
export function goawayCode(f: ReadFrame): number | undefined {
  return f.type === FRAME.GOAWAY ? f.payload.readUInt32BE(4) : undefined;
}

export interface RawH2 {
  readonly socket: TLSSocket;
  readonly frames: ReadFrame[];
  write(bytes: Uint8Array): boolean;
  /** Resolves once the connection has closed (either side), or after `ms`; true if closed. */
  closed(ms: number): Promise<boolean>;
  /** Waits until a frame matching `test` arrives (or `ms` passes). */
  waitFor(test: (f: ReadFrame) => boolean, ms: number): Promise<ReadFrame | undefined>;
  close(): void;
}

/**
 * Opens TLS to `connect` (a function returning a socket already through any proxy) offering only
 * h2, sends the preface and an empty SETTINGS, and collects every frame that comes back.
 */
export async function openRawH2(socket: TLSSocket): Promise<RawH2> {
  const frames: ReadFrame[] = [];
  let buf = Buffer.alloc(0);
  let ended = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of waiters) w();
  };
  socket.on("data", (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.byteLength >= 9) {
      const len = buf.readUIntBE(0, 3);
      if (buf.byteLength < 9 + len) break;
      frames.push({ type: buf[3]!, flags: buf[4]!, streamId: buf.readUInt32BE(5) & 0x7fffffff, payload: buf.subarray(9, 9 + len) });
      buf = buf.subarray(9 + len);
    }
    wake();
  });
  const end = () => {
    ended = true;
    wake();
  };
  socket.on("close", end);
  socket.on("end", end);
  socket.on("error", end);
  socket.write(Buffer.concat([PREFACE, settingsFrame()]));
  const waitUntil = (done: () => boolean, ms: number) =>
    new Promise<void>((resolve) => {
      if (done()) return resolve();
      const timer = setTimeout(finish, ms);
      function finish() {
        clearTimeout(timer);
        waiters.delete(check);
        resolve();
      }
      function check() {
        if (done()) finish();
      }
      waiters.add(check);
    });
  return {
    socket,
    frames,
    write: (bytes) => (ended ? false : socket.write(bytes)),
    async closed(ms) {
      await waitUntil(() => ended, ms);
      return ended;
    },
    async waitFor(test, ms) {
      await waitUntil(() => ended || frames.some(test), ms);
      return frames.find(test);
    },
    close: () => socket.destroy(),
  };
}

/** TLS over an existing stream (a CONNECT tunnel's socket), offering only h2. */
export function h2Tls(opts: { socket?: import("node:net").Socket; host: string; port?: number; ca: string | string[] }): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ socket: opts.socket, host: opts.host, port: opts.port, servername: opts.host, ca: opts.ca, ALPNProtocols: ["h2"] }, () => {
      if (s.alpnProtocol !== "h2") return reject(new Error(`server chose ${s.alpnProtocol || "no protocol"}, not h2`));
      resolve(s);
    });
    s.once("error", reject);
  });
}
