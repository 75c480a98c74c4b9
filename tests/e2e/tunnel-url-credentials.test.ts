// Credentials in the URL inside the transparent proxy: the agent calls https://maps.test/… and
// https://bot.test/… through CONNECT, the broker sets ?key= or places /bot<value> before the path,
// the recording upstream echoes the full URL back (header, Location, body plain, gzip and streamed),
// and the agent, the audit log and the server log never see the value. WebSocket upgrades place it
// too, with the 101 head and frames redacted.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { basicProxyAuth, openTunnel } from "./tunnel-fixture.ts";
import { PATH_ON_WIRE, PATH_SECRET, QUERY_ON_WIRE, QUERY_SECRET, startUrlCredentialEnv, type UrlCredentialEnv } from "./url-credential-upstream.ts";

let env: UrlCredentialEnv;
let proxyUrl: string;

beforeAll(async () => {
  env = await startUrlCredentialEnv();
  proxyUrl = `http://${env.broker.sessionToken}:${env.broker.vault}@${env.broker.proxyAddress}`;
});
afterAll(async () => {
  await env?.expectNoLeaks();
  await env?.stop();
});

async function get(authority: string, target: string, init: Record<string, unknown> = {}): Promise<{ res: Response; text: string }> {
  const res = await fetch(`https://${authority}${target}`, { proxy: proxyUrl, tls: { ca: env.caPem }, redirect: "manual", ...init } as RequestInit);
  const text = await res.text();
  env.seen.push(`${res.status} ${res.statusText}\n${[...res.headers].join("\n")}\n\n${text}`);
  return { res, text };
}

const lastUrl = () => env.upstream.received.at(-1)!.url;

describe("query parameter", () => {
  test("set once, the agent's own replaced; echoes in header, Location and body redacted", async () => {
    const { res, text } = await get(env.maps, "/redirect?key=agent-supplied&q=1&key=again");
    expect(res.status).toBe(302);
    expect(lastUrl()).toBe(`/redirect?q=1&key=${QUERY_ON_WIRE}`);
    expect(res.headers.get("location")).toBe(`https://${env.maps}/redirect?q=1&key=[redacted]`);
    expect(res.headers.get("x-echo-url")).toBe(`https://${env.maps}/redirect?q=1&key=[redacted]`);
    expect(JSON.parse(text).query).toEqual([
      ["q", "1"],
      ["key", "[redacted]"],
    ]);
  });

  test.each(["gzip", "stream", "gzip-stream"])("%s body", async (mode) => {
    const { res, text } = await get(env.maps, `/q?mode=${mode}`, { headers: { "accept-encoding": "gzip" } });
    expect(res.status).toBe(200);
    expect(text).toContain(`"url":"/q?mode=${mode}&key=[redacted]"`);
    expect(text).not.toContain(QUERY_SECRET);
  });
});

describe("path template", () => {
  test("placed exactly before the agent's path; echoes redacted", async () => {
    const { res, text } = await get(env.bot, "/files/redirect?offset=2");
    expect(res.status).toBe(302);
    expect(lastUrl()).toBe(`/bot${PATH_ON_WIRE}/files/redirect?offset=2`);
    expect(res.headers.get("location")).toBe(`https://${env.bot}/bot[redacted]/files/redirect?offset=2`);
    expect(JSON.parse(text).decoded).toBe("/bot[redacted]/files/redirect?offset=2");
  });

  test.each(["gzip", "stream", "gzip-stream"])("%s body", async (mode) => {
    const { text } = await get(env.bot, `/getUpdates?mode=${mode}`, { headers: { "accept-encoding": "gzip" } });
    expect(text).toContain(`"url":"/bot[redacted]/getUpdates?mode=${mode}"`);
    expect(text).not.toContain(PATH_SECRET);
  });

  test("with rules, the agent's path is checked and the template follows", async () => {
    expect((await get(env.ruled, "/getMe")).res.status).toBe(200);
    expect(lastUrl()).toBe(`/v1/${PATH_ON_WIRE}/api/getMe`);
    const refused = await get(env.ruled, "/v1/x/api/getMe");
    expect(refused.res.status).toBe(403);
    expect(refused.res.headers.get("x-broker-error")).toBe("request_not_allowed");
  });
});

test("a WebSocket upgrade gets the template in its request line; the 101 head and frames are redacted", async () => {
  const port = Number(env.broker.proxyAddress!.split(":").at(-1));
  const { conn } = await openTunnel(port, env.ws, basicProxyAuth(env.broker.sessionToken, env.broker.vault), { ca: env.caPem });
  conn.write(
    `GET /stream?x=1 HTTP/1.1\r\nHost: ${env.ws}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
  );
  const head = await conn.readResponse({ noBody: true });
  await conn.closesWithin(5000);
  const wire = `${head.head}\r\n\r\n${conn.buf.toString("latin1")}`;
  env.seen.push(wire);
  expect(env.wsReceived.at(-1)!.split("\r\n")[0]).toBe(`GET /bot${PATH_ON_WIRE}/stream?x=1 HTTP/1.1`);
  expect(head.status).toBe(101);
  expect(head.head).toStartWith("HTTP/1.1 101 Switching /bot[redacted]/stream?x=1");
  expect(head.headers["x-echo-url"]).toBe("/bot[redacted]/stream?x=1");
  expect(conn.buf.toString("latin1")).toContain("you asked for /bot[redacted]/stream?x=1 (/bot[redacted]/stream?x=1)");
});

test("audit records keep the agent's paths", async () => {
  await Bun.sleep(400);
  const records: { host: string; path: string; ingress: string }[] = await env.broker.auditLogs();
  const paths = records.filter((r) => r.ingress === "transparent").map((r) => `${r.host}${r.path}`);
  expect(paths).toEqual(
    expect.arrayContaining([`${env.maps}/redirect`, `${env.bot}/files/redirect`, `${env.ruled}/getMe`, `${env.ruled}/v1/x/api/getMe`, `${env.ws}/stream`]),
  );
});
