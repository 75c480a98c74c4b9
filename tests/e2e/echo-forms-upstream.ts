// A hostile upstream for the echo-forms tests (issue 31 item 5): it takes the credential the broker
// injected (Bearer, Basic or a custom header), turns it into one of the forms servers quote values in
// (FORMS), and sends it back in the body (plain, gzip, or in many small pieces) or in a header.
// GET /form/<index in FORMS>?at=body|gzip|chunks|header&rid=<n> (and /trick/<i>, echo-forms-tricks.ts).
// Served over HTTP/1.1 byte for byte (startRawH1Upstream) and over HTTP/2 (startFormsH2Upstream).
// What it sent is kept in `sent` by rid, so a test can check the echo really happened (the e2e tests
// cannot pass because nothing was echoed).

import { createSecureServer, type Http2ServerRequest, type Http2ServerResponse } from "node:http2";
import type { AddressInfo } from "node:net";
import { createServer as createTlsServer, type TLSSocket } from "node:tls";
import { createHash } from "node:crypto";
import zlib from "node:zlib";
import type { TestPki } from "../helpers/pki.ts";

export const BEFORE = "The upstream kept this line before the echo.";
export const AFTER = "And this line after it, also intact.";
export const AROUND_HEADER = ["x-around", "intact-marker"] as const;

export const PLACES = ["body", "gzip", "chunks", "header"] as const;
/** Where the echo goes; "custom" is a form's own `render` (several channels at once). */
export type Place = (typeof PLACES)[number] | "custom";
const BODY_PLACES: readonly Place[] = ["body", "gzip", "chunks"];
const HEADER_ONLY: readonly Place[] = ["header"];

/** What a hostile upstream learns from the request: the value and the texts it may quote. */
export interface Subjects {
  /** SECRET: the bare credential value. */
  readonly value: string;
  /** `Bearer <value>` */
  readonly bearer: string;
  /** `<user>:<value>` (the Basic username when there is one, else "user"). */
  readonly userpass: string;
}

export interface Form {
  readonly id: string;
  readonly places: readonly Place[];
  /** Needs a value of at least 13 characters (masked-key texts). */
  readonly longOnly?: boolean;
  /** The echo text; several for header lines of one name. */
  echo(s: Subjects): string | string[];
  /** The body's charset and encoder, for forms that are a text encoding (UTF-16). */
  readonly charset?: string;
  encode?(text: string): Buffer;
  /** The echo is a byte string (each character one byte), not text to send as UTF-8. */
  readonly bytes?: boolean;
  /** For place "custom": the whole answer. */
  render?(s: Subjects): Rendered;
  /**
   * How a hostile agent puts the pieces back together from everything it received (status line,
   * headers, trailers and body as one text), when the form spreads the value over several channels.
   */
  reassemble?(received: string): string;
}

/** One answer: header lines in order, the plain body, and what else carries text. */
export interface Rendered {
  headers: [string, string][];
  body: Buffer;
  contentType: string;
  trailers?: [string, string][];
  /** HTTP/1.1 reason phrase. */
  statusMessage?: string;
  /** The body as separate writes this many ms apart (server-sent events). */
  pieces?: Buffer[];
  gapMs?: number;
}

/** Every table the upstream answers from, by path prefix: /form/<i>, /trick/<i>. */
export const TABLES = new Map<string, readonly Form[]>();

const FILLERS = ["", "\x01", "ab"];

function b64(bytes: Buffer, url: boolean, padded: boolean): string {
  let s = bytes.toString(url ? "base64url" : "base64");
  if (url && padded) s += "=".repeat((4 - (s.length % 4)) % 4);
  if (!padded) s = s.replace(/=+$/, "");
  return s;
}

const hex2 = (n: number, upper: boolean, width = 2) => {
  const h = n.toString(16).padStart(width, "0");
  return upper ? h.toUpperCase() : h;
};

/** An index in the second half of the value whose character code has a letter in hex (so the case of the escape shows). */
function pickChar(v: string): number {
  for (let i = Math.floor(v.length / 2); i < v.length; i++) if (/[a-f]/.test(v.charCodeAt(i).toString(16))) return i;
  return Math.floor(v.length / 2);
}

const swapCase = (s: string) => s.replace(/[a-zA-Z]/g, (c) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()));
const mapChars = (s: string, f: (c: string, i: number) => string) => [...s].map(f).join("");

function utf16(text: string, bigEndian: boolean, bom: boolean): Buffer {
  const le = Buffer.from((bom ? "\ufeff" : "") + text, "utf16le");
  return bigEndian ? Buffer.from(le).swap16() : le;
}

function base64Forms(): Form[] {
  const out: Form[] = [];
  for (const subject of ["value", "bearer", "userpass"] as const) {
    for (const url of [false, true]) {
      for (const padded of [true, false]) {
        for (const [align, fill] of FILLERS.entries()) {
          out.push({
            id: `${url ? "base64url" : "base64"} of ${subject === "value" ? "the bare value" : subject === "bearer" ? "'Bearer <value>'" : "'user:<value>'"}, alignment ${align}, ${padded ? "padded" : "unpadded"}`,
            places: [...PLACES],
            echo: (s) => b64(Buffer.from(fill + s[subject]), url, padded),
          });
        }
      }
    }
  }
  return out;
}

const INVISIBLES: [string, string][] = [
  ["soft hyphen U+00AD", "\u00ad"],
  ["zero-width space U+200B", "\u200b"],
  ["zero-width non-joiner U+200C", "\u200c"],
  ["zero-width joiner U+200D", "\u200d"],
  ["word joiner U+2060", "\u2060"],
  ["BOM / zero-width no-break space U+FEFF", "\ufeff"],
];

function invisibleForms(): Form[] {
  return INVISIBLES.flatMap(([name, ch]): Form[] => [
    { id: `${name} inserted once`, places: [...PLACES], echo: (s) => s.value.slice(0, s.value.length >> 1) + ch + s.value.slice(s.value.length >> 1) },
    { id: `${name} inserted every 3 characters`, places: [...PLACES], echo: (s) => s.value.replace(/(...)(?!$)/g, `$1${ch}`) },
  ]);
}

/** A random subset (about half, at least two) of the characters, percent-encoded. */
function percentSome(v: string): string {
  const pick = [...v].map(() => Math.random() < 0.5);
  pick[1] = true;
  pick[v.length - 2] = true;
  return mapChars(v, (c, i) => (pick[i] ? `%${hex2(c.charCodeAt(0), Math.random() < 0.5)}` : c));
}

export const FORMS: readonly Form[] = [
  ...base64Forms(),
  { id: "hex of the value, lower case", places: [...PLACES], echo: (s) => Buffer.from(s.value).toString("hex") },
  { id: "hex of the value, upper case", places: [...PLACES], echo: (s) => Buffer.from(s.value).toString("hex").toUpperCase() },
  { id: "every character percent-encoded, upper hex", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `%${hex2(c.charCodeAt(0), true)}`) },
  { id: "every character percent-encoded, lower hex", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `%${hex2(c.charCodeAt(0), false)}`) },
  { id: "a random subset of characters percent-encoded", places: [...PLACES], echo: (s) => percentSome(s.value) },
  {
    id: "HTML: one character as &#NN;",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c, i) => (i === pickChar(s.value) ? `&#${c.charCodeAt(0)};` : c)),
  },
  {
    id: "HTML: one character as &#xHH;",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c, i) => (i === pickChar(s.value) ? `&#x${hex2(c.charCodeAt(0), false)};` : c)),
  },
  { id: "HTML: every character as &#NN;", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `&#${c.charCodeAt(0)};`) },
  { id: "HTML: every character as &#xHH;", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `&#x${hex2(c.charCodeAt(0), false)};`) },
  {
    id: "HTML: every character as &#000NN; (leading zeros)",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c) => `&#${String(c.charCodeAt(0)).padStart(5, "0")};`),
  },
  {
    id: "HTML: every character as &#x00HH; (leading zeros, upper hex)",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c) => `&#x${hex2(c.charCodeAt(0), true, 4)};`),
  },
  {
    id: "JSON: one character as \\uXXXX, lower hex",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c, i) => (i === pickChar(s.value) ? `\\u${hex2(c.charCodeAt(0), false, 4)}` : c)),
  },
  {
    id: "JSON: one character as \\uXXXX, upper hex",
    places: [...PLACES],
    echo: (s) => mapChars(s.value, (c, i) => (i === pickChar(s.value) ? `\\u${hex2(c.charCodeAt(0), true, 4)}` : c)),
  },
  { id: "JSON: every character as \\uXXXX, lower hex", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `\\u${hex2(c.charCodeAt(0), false, 4)}`) },
  { id: "JSON: every character as \\uXXXX, upper hex", places: [...PLACES], echo: (s) => mapChars(s.value, (c) => `\\u${hex2(c.charCodeAt(0), true, 4)}`) },
  ...(
    [
      ["utf-16le", false, false],
      ["utf-16be", true, false],
      ["utf-16le", false, true],
      ["utf-16be", true, true],
    ] as const
  ).map(
    ([charset, be, bom]): Form => ({
      id: `UTF-16${be ? "BE" : "LE"} text ${bom ? "with" : "without"} BOM (charset=${bom ? "utf-16" : charset})`,
      places: BODY_PLACES,
      echo: (s) => s.bearer,
      charset: bom ? "utf-16" : charset,
      encode: (text) => utf16(text, be, bom),
    }),
  ),
  { id: "the value upper-cased", places: [...PLACES], echo: (s) => s.value.toUpperCase() },
  { id: "the value with its case flipped", places: [...PLACES], echo: (s) => swapCase(s.value) },
  ...invisibleForms(),
  {
    id: "split over two header lines of one name",
    places: HEADER_ONLY,
    echo: (s) => [s.value.slice(0, s.value.length >> 1), s.value.slice(s.value.length >> 1)],
  },
  {
    id: "split over three header lines of one name",
    places: HEADER_ONLY,
    echo: (s) => {
      const t = Math.ceil(s.value.length / 3);
      return [s.value.slice(0, t), s.value.slice(t, 2 * t), s.value.slice(2 * t)];
    },
  },
  {
    id: "masked key: first 12 characters then '...'",
    places: [...PLACES],
    longOnly: true,
    echo: (s) => `Incorrect API key provided: ${s.value.slice(0, 12)}...`,
  },
  { id: "masked key: the last 12 characters", places: [...PLACES], longOnly: true, echo: (s) => `Incorrect API key provided: ...${s.value.slice(-12)}` },
  {
    id: "masked key: 12 characters from the middle",
    places: [...PLACES],
    longOnly: true,
    echo: (s) => `Incorrect API key provided: ${s.value.slice(9, 21)}...`,
  },
];

TABLES.set("form", FORMS);

/** The value a hostile upstream reads from the request the broker sent it. */
export function subjectsOf(headers: Record<string, string | string[] | undefined>): Subjects | undefined {
  const auth = String(headers.authorization ?? "");
  let value: string | undefined;
  let user = "user";
  if (/^Bearer /i.test(auth)) value = auth.slice(7);
  else if (/^Basic /i.test(auth)) {
    const plain = Buffer.from(auth.slice(6), "base64").toString("utf8");
    user = plain.slice(0, plain.indexOf(":"));
    value = plain.slice(plain.indexOf(":") + 1);
  } else if (headers["x-api-key"]) value = String(headers["x-api-key"]).replace(/^Token /, "");
  return value ? { value, bearer: `Bearer ${value}`, userpass: `${user}:${value}` } : undefined;
}

/** What the upstream sent for a request id: its header lines and its plain body. */
export const sent = new Map<string, { headers: string; body: Buffer }>();

/** Header text carried as the latin1 reading of its UTF-8 bytes (how a server puts non-ASCII in a header). */
const headerText = (s: string) => Buffer.from(s, "utf8").toString("latin1");

/** What the upstream answers for one case: header lines (the echo's and a marker) and the plain body. */
export function renderCase(form: Form, subjects: Subjects, at: Place): Rendered {
  if (at === "custom") return form.render!(subjects);
  const echo = form.echo(subjects);
  const headers: [string, string][] = [[AROUND_HEADER[0], AROUND_HEADER[1]]];
  let text = `${BEFORE}\n${AFTER}\n`;
  const asHeader = (t: string) => (form.bytes ? t : headerText(t));
  if (at === "header") {
    const lines = Array.isArray(echo) ? echo.map((e, i) => (i === 0 ? `you sent: ${e}` : e)) : [`you sent: ${echo}`];
    for (const l of lines) headers.push(["x-echo", asHeader(l)]);
  } else text = `${BEFORE}\nyou sent: ${echo as string}\n${AFTER}\n`;
  const body = form.encode ? form.encode(text) : Buffer.from(text, form.bytes ? "latin1" : "utf8");
  return { headers, body, contentType: `text/plain; charset=${form.charset ?? "utf-8"}` };
}

/** The answer for a request, or why there is none (an unknown case, or no credential injected). */
function answerFor(
  path: string,
  headers: Record<string, string | string[] | undefined>,
): { r: Rendered; at: Place; wire: Buffer; lines: [string, string][] } | string {
  const url = new URL(path, "https://upstream.test");
  const m = /^\/(\w+)\/(\d+)$/.exec(url.pathname);
  const form = m ? TABLES.get(m[1]!)?.[Number(m[2])] : undefined;
  const at = (url.searchParams.get("at") ?? "body") as Place;
  const subjects = subjectsOf(headers);
  if (!form || !subjects || !form.places.includes(at))
    return `no such case, or no credential (form ${form ? "found" : "unknown"}, credential ${subjects ? "found" : "missing"})`;
  const r = renderCase(form, subjects, at);
  const rid = url.searchParams.get("rid");
  const all = [...r.headers, ...(r.trailers ?? [])].map(([k, v]) => `${k}: ${v}`);
  if (rid) sent.set(rid, { headers: [`HTTP/1.1 200 ${r.statusMessage ?? "OK"}`, ...all].join("\n"), body: r.body });
  let wire = r.body;
  const lines: [string, string][] = [...r.headers, ["content-type", r.contentType]];
  if (at === "gzip") {
    wire = zlib.gzipSync(r.body);
    lines.push(["content-encoding", "gzip"]);
  }
  if (r.trailers) lines.push(["trailer", [...new Set(r.trailers.map(([k]) => k))].join(", ")]);
  return { r, at, wire, lines };
}

/** The HTTP/2 upstream's handler (node:http2 compatibility API; same-named lines are grouped by name). */
export function formsHandler(req: Http2ServerRequest, res: Http2ServerResponse): void {
  const a = answerFor(req.url ?? "/", req.headers as Record<string, string>);
  if (typeof a === "string") {
    res.statusCode = 404;
    return void res.end(a);
  }
  const streamed = a.at === "chunks" || a.r.trailers || a.r.pieces;
  const byName = new Map<string, string[]>();
  for (const [k, v] of [...a.lines, ...(streamed ? [] : [["content-length", String(a.wire.byteLength)] as [string, string]])])
    byName.set(k, [...(byName.get(k) ?? []), v]);
  for (const [k, v] of byName) res.setHeader(k, v.length === 1 ? v[0]! : v);
  res.writeHead(200);
  void (async () => {
    const parts = a.r.pieces ?? (a.at === "chunks" ? smallPieces(a.wire) : [a.wire]);
    for (const [i, p] of parts.entries()) {
      if (i > 0) await Bun.sleep(a.r.gapMs ?? (i % 3 === 0 ? 1 : 0));
      res.write(p);
    }
    if (a.r.trailers) {
      const t: Record<string, string | string[]> = {};
      for (const [k, v] of a.r.trailers) t[k] = t[k] === undefined ? v : [t[k]!].flat().concat(v);
      res.addTrailers(t as Record<string, string>);
    }
    res.end();
  })();
}

/** The body in pieces of 1 to 4 bytes. */
function smallPieces(body: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0, i = 0; at < body.length; i++) {
    const n = 1 + (i % 4);
    out.push(body.subarray(at, at + n));
    at += n;
  }
  return out;
}

/**
 * An HTTP/1.1 TLS upstream writing its answers byte for byte: header lines in the order given (a
 * server library would group same-named ones), any reason phrase, chunked trailers, pieces apart in
 * time (each its own TLS record). Keep-alive; requests are GETs without bodies.
 */
export async function startRawH1Upstream(pki: TestPki): Promise<{ port: number; close(): Promise<void> }> {
  const open = new Set<TLSSocket>();
  const server = createTlsServer({ cert: pki.certPem, key: pki.keyPem, ALPNProtocols: ["http/1.1"] }, (sock) => {
    open.add(sock);
    sock.on("close", () => open.delete(sock));
    let buf = Buffer.alloc(0);
    let busy = false;
    sock.on("error", () => {});
    const pump = async () => {
      if (busy) return;
      busy = true;
      for (let end = buf.indexOf("\r\n\r\n"); end >= 0 && !sock.destroyed; end = buf.indexOf("\r\n\r\n")) {
        const head = buf.subarray(0, end).toString("latin1");
        buf = buf.subarray(end + 4);
        const [requestLine, ...rest] = head.split("\r\n");
        const headers: Record<string, string> = {};
        for (const l of rest) headers[l.slice(0, l.indexOf(":")).trim().toLowerCase()] = l.slice(l.indexOf(":") + 1).trim();
        await answerRaw(sock, requestLine!.split(" ")[1] ?? "/", headers);
      }
      busy = false;
    };
    sock.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      void pump();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A WebSocket frame from the server (unmasked). */
export function wsFrame(opcode: number, payload: string | Buffer, fin = true): Buffer {
  const data = Buffer.from(payload);
  const head = data.length < 126 ? Buffer.from([0, data.length]) : Buffer.from([0, 126, data.length >> 8, data.length & 255]);
  head[0] = (fin ? 0x80 : 0) | opcode;
  return Buffer.concat([head, data]);
}

/**
 * /ws/<scenario>: an upgrade answered with 101, then the scenario's messages (WS_SCENARIOS), 20 ms
 * apart, then a close frame.
 */
async function answerWebSocket(sock: TLSSocket, path: string, headers: Record<string, string>): Promise<void> {
  const subjects = subjectsOf(headers);
  const scenario = WS_SCENARIOS[decodeURIComponent(path.slice(4))];
  if (!subjects || !scenario) return void sock.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
  const accept = createHash("sha1").update(`${headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest("base64");
  sock.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
  for (const f of scenario(subjects)) {
    await Bun.sleep(20);
    sock.write(f);
  }
  await Bun.sleep(20);
  sock.end(wsFrame(8, Buffer.from([0x03, 0xe8])));
}

/**
 * What the WebSocket upstream sends after the 101, by scenario name: frames, in order. (Pieces one
 * message each, and double percent-encoding, are README limits: WS_NOT_COVERED in echo-forms-tricks.ts.)
 */
export const WS_SCENARIOS: Record<string, (s: Subjects) => Buffer[]> = {
  /** The value whole, base64-encoded, in one text message (held: the positive control). */
  "base64 in one message (the control: held)": (s) => [wsFrame(1, `${BEFORE} ${Buffer.from(s.bearer).toString("base64")} ${AFTER}`)],
};

async function answerRaw(sock: TLSSocket, path: string, headers: Record<string, string>): Promise<void> {
  if (path.startsWith("/ws/")) return answerWebSocket(sock, path, headers);
  const a = answerFor(path, headers);
  if (typeof a === "string") return void sock.write(`HTTP/1.1 404 Not Found\r\ncontent-length: ${Buffer.byteLength(a)}\r\n\r\n${a}`);
  const chunked = a.at === "chunks" || a.r.trailers || a.r.pieces;
  const lines = [
    ...a.lines,
    chunked ? (["transfer-encoding", "chunked"] as [string, string]) : (["content-length", String(a.wire.byteLength)] as [string, string]),
  ];
  sock.write(Buffer.from(`HTTP/1.1 200 ${a.r.statusMessage ?? "OK"}\r\n${lines.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`, "latin1"));
  if (!chunked) return void sock.write(a.wire);
  const parts = a.r.pieces ?? smallPieces(a.wire);
  for (const [i, p] of parts.entries()) {
    if (i > 0 && (a.r.gapMs || i % 3 === 0)) await Bun.sleep(a.r.gapMs ?? 1);
    sock.write(Buffer.concat([Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from("\r\n")]));
  }
  sock.write(Buffer.from(`0\r\n${(a.r.trailers ?? []).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`, "latin1"));
}

/** An HTTP/2-only TLS upstream answering with `formsHandler`. */
export async function startFormsH2Upstream(pki: TestPki): Promise<{ port: number; close(): Promise<void> }> {
  const server = createSecureServer({ cert: pki.certPem, key: pki.keyPem, allowHTTP1: false });
  server.on("session", (s) => s.on("error", () => {}));
  server.on("request", (req: Http2ServerRequest, res: Http2ServerResponse) => {
    req.on("error", () => {});
    res.on("error", () => {});
    req.resume();
    req.on("end", () => formsHandler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
