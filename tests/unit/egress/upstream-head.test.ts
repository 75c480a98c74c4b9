import { describe, expect, test } from "bun:test";
import type { Connection } from "../../../src/egress/connection.ts";
import { WireError } from "../../../src/http/http1.ts";
import { ClosedBeforeHead, readResponseHead } from "../../../src/egress/upstream-head.ts";

/** A connection that hands out the given pieces one read at a time (and keeps what is unread). */
function fakeConnection(pieces: (string | Uint8Array)[]): Connection & { rest(): string } {
  const queue = pieces.map((p) => (typeof p === "string" ? Buffer.from(p, "latin1") : p));
  return {
    read: async () => queue.shift() ?? null,
    unread: (chunk) => void (chunk.byteLength && queue.unshift(chunk)),
    write: async () => {},
    idleTimeout: () => {},
    close: () => {},
    closed: false,
    get buffered() {
      return queue.reduce((n, c) => n + c.byteLength, 0);
    },
    key: "test",
    rest: () => Buffer.concat(queue).toString("latin1"),
  };
}

const bytewise = (text: string) => [...text].map((c) => c);

describe("readResponseHead", () => {
  test("a head paced one byte at a time, after interim answers, leaves the body on the connection", async () => {
    const conn = fakeConnection(
      bytewise("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-A: b\r\n\r\nbody"),
    );
    const head = await readResponseHead(conn);
    expect({ status: head.status, text: head.statusText, headers: head.headers }).toEqual({
      status: 200,
      text: "OK",
      headers: [
        ["Content-Length", "4"],
        ["X-A", "b"],
      ],
    });
    expect(conn.rest()).toBe("body");
  });

  test("the head and body in one piece, and a head whose blank line is split across reads", async () => {
    const one = fakeConnection(["HTTP/1.1 204 No Content\r\nA: 1\r\n\r\nnext"]);
    expect((await readResponseHead(one)).status).toBe(204);
    expect(one.rest()).toBe("next");
    const split = fakeConnection(["HTTP/1.1 200 OK\r\nA: 1\r", "\n", "\r", "\nrest"]);
    expect((await readResponseHead(split)).headers).toEqual([["A", "1"]]);
    expect(split.rest()).toBe("rest");
  });

  test("a 64 KiB head paced in 7-byte pieces is read whole (searched on from where the last search stopped)", async () => {
    const text = `HTTP/1.1 200 OK\r\n${"X-Pad: " + "a".repeat(60_000)}\r\n\r\n`;
    const pieces: string[] = [];
    for (let i = 0; i < text.length; i += 7) pieces.push(text.slice(i, i + 7));
    const head = await readResponseHead(fakeConnection(pieces));
    expect(head.headers[0]![1].length).toBe(60_000);
  });

  test("statuses below 100 and above 599 are wire errors; too large a head and an early close fail", async () => {
    for (const status of ["000", "099", "600", "999"]) {
      await expect(readResponseHead(fakeConnection([`HTTP/1.1 ${status} Odd\r\n\r\n`]))).rejects.toBeInstanceOf(WireError);
    }
    await expect(readResponseHead(fakeConnection(["HTTP/1.1 101 Switching Protocols\r\n\r\n"]))).rejects.toBeInstanceOf(WireError);
    expect((await readResponseHead(fakeConnection(["HTTP/1.1 101 Switching Protocols\r\n\r\n"]), { switching: true })).status).toBe(101);
    await expect(readResponseHead(fakeConnection(bytewise(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(200)}`)), { maxBytes: 100 })).rejects.toBeInstanceOf(WireError);
    await expect(readResponseHead(fakeConnection(["HTTP/1.1 200 OK\r\n"]))).rejects.toBeInstanceOf(ClosedBeforeHead);
  });
});
