// Blind tunnels are bytes only, HTTP/2 or not: a host that is not a service is relayed end to end,
// so an agent speaking HTTP/2 negotiates h2 with the host itself (its own certificate, its own
// ALPN answer), and nothing is injected. An intercepted host in the same vault gets the broker's h2.

import { afterAll, beforeAll, expect, test } from "bun:test";
import * as http2 from "node:http2";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTestPki } from "../helpers/pki.ts";
import { requireBinary, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;
let server: http2.Http2SecureServer;
let authority: string;
let blindCaFile: string;
const received: { alpn: string; authorization: string | undefined }[] = [];

beforeAll(async () => {
  env = await startTunnelEnv();
  const pki = await createTestPki({ dns: ["blind-h2.test"], ips: [] });
  blindCaFile = join(env.dir, "blind-ca.pem");
  writeFileSync(blindCaFile, pki.caPem);
  server = http2.createSecureServer({ cert: pki.certPem, key: pki.keyPem, allowHTTP1: true });
  server.on("request", (req, res) => {
    received.push({ alpn: req.httpVersion, authorization: req.headers.authorization });
    res.end("from the host itself");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  env.broker.dns.set("blind-h2.test", ["127.0.0.1"]);
  authority = `blind-h2.test:${(server.address() as { port: number }).port}`;
}, 60_000);

afterAll(async () => {
  server?.close();
  await env?.stop();
});

async function curl(args: string[]) {
  const proc = Bun.spawn(["curl", "-sS", "-w", "\n%{http_version}", "--proxy", env.proxyUrl, ...args], {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, err, body: out.slice(0, out.lastIndexOf("\n")), version: out.slice(out.lastIndexOf("\n") + 1) };
}

test("curl --http2 to a host that is not a service: h2 with the host itself, its own certificate, nothing injected", async () => {
  if (!requireBinary("curl", "curl")) return;
  // Only the host's own CA is trusted here: an intercepted tunnel (the broker's leaf) would fail verification.
  const r = await curl(["--http2", "--cacert", blindCaFile, `https://${authority}/blind`]);
  expect({ code: r.code, err: r.err, body: r.body, version: r.version }).toEqual({ code: 0, err: "", body: "from the host itself", version: "2" });
  expect(received.at(-1)).toEqual({ alpn: "2.0", authorization: undefined });
  let record: { ingress: string; service: string | null; credential_keys: string[] } | undefined;
  for (let i = 0; i < 40 && !record; i++) {
    await Bun.sleep(100);
    record = (await env.broker.auditLogs()).find((l: { ingress: string; host: string }) => l.ingress === "blind" && l.host === authority);
  }
  expect(record).toMatchObject({ ingress: "blind", service: null, credential_keys: [] });
});

test("the same vault's intercepted host speaks h2 through the broker, with the credential injected", async () => {
  if (!requireBinary("curl", "curl")) return;
  const r = await curl(["--http2", "--cacert", env.caFile, `https://${env.authority}/intercepted`]);
  expect({ code: r.code, err: r.err, version: r.version }).toEqual({ code: 0, err: "", version: "2" });
  const seen = env.upstream.received.at(-1)!;
  expect(seen.url).toBe("/intercepted");
  expect(seen.rawHeaders.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", `Bearer ${env.secret}`]]);
  expect(r.body).not.toContain(env.secret);
});
