// The ClientHello reader of `vault run --contain`'s redirection: the server name a real TLS client
// sends (node:tls here), none for an IP literal, "more" until the record is whole, null for what is
// not TLS or is malformed.

import { expect, test } from "bun:test";
import { createServer } from "node:net";
import { connect } from "node:tls";
import { parseClientHello } from "../../../src/cli/contain-redirect.ts";

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
