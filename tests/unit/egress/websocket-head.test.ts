// The head of an injected WebSocket upgrade's answer: redaction of the 101's reason and header
// values (-bin values scanned decoded), and the extension checks that keep compressed frames away
// from the scanner.

import { expect, test } from "bun:test";
import { UndecodableResponse } from "../../../src/errors.ts";
import type { Connection } from "../../../src/egress/connection.ts";
import type { HeaderList } from "../../../src/http/http1.ts";
import { namesExtension, redactResponseHead, shapeRefusal, withoutExtensions } from "../../../src/egress/websocket-head.ts";

const SECRET = "sk-ws-head-42";

test("needles are replaced in the reason phrase and every header value; names are kept", () => {
  const head = redactResponseHead(
    {
      status: 101,
      statusText: `Switching ${SECRET}`,
      version: "1.1",
      headers: [
        ["Upgrade", "websocket"],
        ["X-Echo", `Bearer ${SECRET}`],
        ["X-Twice", `${SECRET},${SECRET}`],
      ],
    },
    [SECRET],
  );
  expect(head.statusText).toBe("Switching [redacted]");
  expect(head.headers).toEqual([
    ["Upgrade", "websocket"],
    ["X-Echo", "Bearer [redacted]"],
    ["X-Twice", "[redacted],[redacted]"],
  ]);
});

test("a non-ASCII needle is matched in the latin1 form a head is parsed in", () => {
  const secret = "clé-secrète";
  const latin1 = Buffer.from(secret, "utf8").toString("latin1");
  const head = redactResponseHead({ status: 101, statusText: "", version: "1.1", headers: [["X-Echo", latin1]] }, [secret]);
  expect(head.headers).toEqual([["X-Echo", "[redacted]"]]);
});

test("extensions: any named one is refused, and the request offer is dropped", () => {
  const h = (headers: [string, string][]) => ({ status: 101, statusText: "", version: "1.1" as const, headers });
  expect(namesExtension(h([["Sec-WebSocket-Extensions", "permessage-deflate"]]))).toBe(true);
  expect(namesExtension(h([["sec-websocket-extensions", " "]]))).toBe(false);
  expect(namesExtension(h([["Upgrade", "websocket"]]))).toBe(false);
  expect(
    withoutExtensions([
      ["Sec-WebSocket-Key", "k"],
      ["Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits"],
    ]),
  ).toEqual([["Sec-WebSocket-Key", "k"]]);
});

test("a header whose name holds the value is dropped, whatever its case", () => {
  const head = redactResponseHead(
    {
      status: 101,
      statusText: "",
      version: "1.1",
      headers: [
        ["Upgrade", "websocket"],
        [`X-${SECRET.toUpperCase()}`, "1"],
      ],
    },
    [SECRET],
  );
  expect(head.headers).toEqual([["Upgrade", "websocket"]]);
});

test("a -bin header is scanned decoded and encoded again; one that is not base64 refuses the upgrade", () => {
  const b64 = Buffer.from(`Bearer ${SECRET}`).toString("base64");
  const head = redactResponseHead({ status: 101, statusText: "", version: "1.1", headers: [["X-Echo-Bin", b64]] }, [SECRET]);
  expect(Buffer.from(head.headers[0]![1], "base64").toString()).toBe("Bearer [redacted]");
  const lenient = b64.replace(/(.{8})/g, "$1.");
  expect(() => redactResponseHead({ status: 101, statusText: "", version: "1.1", headers: [["X-Echo-Bin", lenient]] }, [SECRET])).toThrow(UndecodableResponse);
});

/** A connection that has nothing to read (a refusal's body is read only when it is handed on). */
const NO_BYTES = {
  read: async () => null,
  unread() {},
  write: async () => {},
  idleTimeout() {},
  close() {},
  closed: false,
  buffered: 0,
  key: "test",
} as unknown as Connection;

test("a refused upgrade answered partially (206, multipart/byteranges, a bytes Content-Range) fails closed when answers are scanned", () => {
  const partial: [number, HeaderList][] = [
    [
      206,
      [
        ["Content-Range", "bytes 74-84/400"],
        ["Content-Length", "0"],
      ],
    ],
    [
      200,
      [
        ["Content-Type", "Multipart/ByteRanges; boundary=b"],
        ["Content-Length", "0"],
      ],
    ],
    [
      200,
      [
        ["CONTENT-RANGE", "Bytes 0-10/400"],
        ["Content-Length", "0"],
      ],
    ],
  ];
  for (const [status, headers] of partial) {
    let done = 0;
    const refuse = () => shapeRefusal({ status, statusText: "x", version: "1.1", headers }, NO_BYTES, [SECRET], () => void done++);
    expect(refuse).toThrow(UndecodableResponse);
    expect(refuse).toThrow(
      "the upstream answered the WebSocket upgrade with a partial response the broker did not ask for, so it could not be checked for echoed credentials",
    );
    expect(done).toBe(0); // the caller audits the refusal
    // Nothing scanned (no value stored anywhere): handed on as it is, as egress() does.
    expect(shapeRefusal({ status, statusText: "x", version: "1.1", headers }, NO_BYTES, [], () => {}).status).toBe(status);
  }
  // Rows, not bytes (PostgREST): an ordinary answer.
  expect(
    shapeRefusal(
      {
        status: 403,
        statusText: "x",
        version: "1.1",
        headers: [
          ["Content-Range", "0-1/*"],
          ["Content-Length", "0"],
        ],
      },
      NO_BYTES,
      [SECRET],
      () => {},
    ).status,
  ).toBe(403);
});
