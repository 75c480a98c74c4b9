// The ClientHello reader of `vault run --contain`'s redirection: the server name a real TLS client
// sends (node:tls here), none for an IP literal, "more" until the record is whole, null for what is
// not TLS or is malformed.

import { describe, expect, test } from "bun:test";
import { createServer } from "node:net";
import { connect } from "node:tls";
import { parseClientHello, refusalText } from "../../../src/cli/kit/contain-redirect.ts";

/** The first bytes a node:tls client sends for `servername`. */
async function clientHello(servername: string | undefined): Promise<Buffer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const first = new Promise<Buffer>((resolve) => server.once("connection", (s) => s.once("data", (d: Buffer) => (resolve(d), s.destroy()))));
  const c = connect({ host: "127.0.0.1", port: (server.address() as { port: number }).port, servername, rejectUnauthorized: false });
  c.on("error", () => {});
  const bytes = await first;
  c.destroy();
  server.close();
  return bytes;
}

test("a real ClientHello names its server; an IP literal sends none", async () => {
  expect(parseClientHello(await clientHello("api.example.com"))).toEqual({ serverName: "api.example.com" });
  expect(parseClientHello(await clientHello(undefined))).toEqual({});
});

test("a cut-off record asks for more; what is not a ClientHello is refused", async () => {
  const hello = await clientHello("api.example.com");
  expect(parseClientHello(hello.subarray(0, 3))).toBe("more");
  expect(parseClientHello(hello.subarray(0, hello.byteLength - 1))).toBe("more");
  expect(parseClientHello(Buffer.from("GET / HTTP/1.1\r\n\r\n"))).toBeNull();
  const bad = Buffer.from(hello);
  bad[5] = 0x02; // a ServerHello
  expect(parseClientHello(bad)).toBeNull();
});

describe("refusalText", () => {
  test("names the destination and the broker's code, message and where to propose access", () => {
    const envelope = { error: "forbidden", message: "no service for x.example:443", proposal_hint: { endpoint: "http://127.0.0.1:8080/v1/proposals" } };
    const chunked = `5a\r\n${JSON.stringify(envelope)}\r\n0\r\n\r\n`;
    for (const body of [JSON.stringify(envelope), chunked]) {
      expect(refusalText("x.example:443", { status: "403", body })).toBe(
        "broker: --contain: the broker refused a connection to x.example:443 that did not use HTTPS_PROXY " +
          "(HTTP 403 forbidden: no service for x.example:443 (to ask for access, file a proposal: POST http://127.0.0.1:8080/v1/proposals))\n",
      );
    }
  });

  test("no answer, or a body that is no envelope, still gives one clean line", () => {
    expect(refusalText("h:443", null)).toBe("broker: --contain: the broker refused a connection to h:443 that did not use HTTPS_PROXY (no answer)\n");
    const odd = refusalText("h:443", { status: "502", body: '{"message":"line\\nbreak\\u001b[31m"}' });
    expect(odd.split("\n")).toHaveLength(2);
    expect(odd).not.toContain("\u001b");
  });
});
