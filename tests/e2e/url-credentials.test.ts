// Credentials in the URL through /proxy: a 'query' service sets ?key= (replacing what the agent
// sent, never duplicating it) and a 'path' service places /bot<value> before the agent's path,
// exactly. The recording upstream gets the value; the agent never reads it, whatever the upstream
// echoes (the full URL in a header, a Location, a body: plain, gzip, streamed across chunks), and
// neither do the audit log or the server log. Rules see the agent's path, never the credential's.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gunzipSync } from "node:zlib";
import { dumpResponse, expectEnvelope } from "./proxy-fixture.ts";
import { PATH_ON_WIRE, PATH_SECRET, QUERY_ON_WIRE, QUERY_SECRET, RULES, startUrlCredentialEnv, type UrlCredentialEnv } from "./url-credential-upstream.ts";

let env: UrlCredentialEnv;

beforeAll(async () => {
  env = await startUrlCredentialEnv();
});
afterAll(async () => {
  await env?.expectNoLeaks();
  await env?.stop();
});

async function call(host: string, target: string, init: RequestInit & { decompress?: boolean } = {}): Promise<{ res: Response; text: string }> {
  const res = await env.broker.proxy(host, target, init);
  const text = await dumpResponse(res.clone());
  env.seen.push(text);
  return { res, text };
}

const lastUrl = () => env.upstream.received.at(-1)!.url;

describe("query parameter", () => {
  test("the upstream gets exactly one key=<value>, the agent's own key= replaced, the rest of the query unchanged", async () => {
    const { res, text } = await call(env.maps, "/maps/api/geocode?address=1%20Main&key=agent-supplied&x=%2F&k%65y=other");
    expect(res.status).toBe(200);
    expect(lastUrl()).toBe(`/maps/api/geocode?address=1%20Main&x=%2F&key=${QUERY_ON_WIRE}`);
    const body = await res.json();
    // The upstream parsed one key, the secret itself; the agent reads it redacted in every form.
    expect(body.query).toEqual([
      ["address", "1 Main"],
      ["x", "/"],
      ["key", "[redacted]"],
    ]);
    expect(body.url).toBe("/maps/api/geocode?address=1%20Main&x=%2F&key=[redacted]");
    expect(body.decoded).toBe("/maps/api/geocode?address=1 Main&x=/&key=[redacted]");
    expect(res.headers.get("x-echo-url")).toBe(`https://${env.maps}/maps/api/geocode?address=1%20Main&x=%2F&key=[redacted]`);
    expect(text).not.toContain("agent-supplied"); // the agent's value went nowhere: it was dropped, not forwarded
  });

  test("a Location that echoes the full URL is redacted (and handed back, not followed)", async () => {
    const { res } = await call(env.maps, "/redirect?key=mine");
    expect(res.status).toBe(302);
    expect(lastUrl()).toBe(`/redirect?key=${QUERY_ON_WIRE}`);
    expect(res.headers.get("location")).toBe(`https://${env.maps}/redirect?key=[redacted]`);
  });

  test("gzip, whole and streamed across chunks that split the value", async () => {
    const whole = await call(env.maps, "/q?mode=gzip", { decompress: false, headers: { "accept-encoding": "gzip" } });
    expect(whole.res.headers.get("content-encoding")).toBe("gzip");
    const plain = gunzipSync(Buffer.from(await whole.res.arrayBuffer())).toString("utf8");
    env.seen.push(plain);
    expect(JSON.parse(plain).url).toBe("/q?mode=gzip&key=[redacted]");

    for (const mode of ["stream", "gzip-stream"]) {
      const { res } = await call(env.maps, `/q?mode=${mode}`);
      const text = await res.text(); // Bun's fetch decodes gzip, as an agent's client would
      env.seen.push(text);
      expect(res.status).toBe(200);
      expect(text.split(`"url":"/q?mode=${mode}&key=[redacted]"`).length).toBe(3);
      expect(text).not.toContain(QUERY_SECRET);
      expect(text).not.toContain(QUERY_ON_WIRE);
    }
  });

  test("the audit record keeps the agent's path (no query), never the value", async () => {
    await Bun.sleep(400);
    const records: { host: string; path: string; credential_keys?: unknown }[] = await env.broker.auditLogs();
    const mine = records.filter((r) => r.host === env.maps);
    expect(mine.map((r) => r.path)).toContain("/maps/api/geocode");
    expect(mine.map((r) => r.path)).toContain("/redirect");
    const text = JSON.stringify(records);
    for (const form of [QUERY_SECRET, QUERY_ON_WIRE, "agent-supplied"]) expect(text).not.toContain(form);
  });
});

describe("path template", () => {
  test.each([
    ["/getMe", "/getMe"],
    ["/", "/"],
    ["/sendMessage?chat_id=1&text=hi%20there", "/sendMessage?chat_id=1&text=hi%20there"],
    ["/files/a%2Fb/c", "/files/a%2Fb/c"],
  ])("%p goes upstream as /bot<value>%p", async (target, rest) => {
    const { res } = await call(env.bot, target);
    expect(res.status).toBe(200);
    expect(lastUrl()).toBe(`/bot${PATH_ON_WIRE}${rest}`);
    const body = await res.json();
    expect(body.url).toBe(`/bot[redacted]${rest}`);
    expect(res.headers.get("x-echo-url")).toBe(`https://${env.bot}/bot[redacted]${rest}`);
  });

  test("Location, gzip and a streamed body that splits the value are redacted", async () => {
    const redirect = await call(env.bot, "/files/redirect");
    expect(redirect.res.status).toBe(302);
    expect(redirect.res.headers.get("location")).toBe(`https://${env.bot}/bot[redacted]/files/redirect`);
    for (const mode of ["gzip", "stream", "gzip-stream"]) {
      const { res } = await call(env.bot, `/getUpdates?mode=${mode}`);
      const text = await res.text();
      env.seen.push(text);
      expect(text).toContain(`"url":"/bot[redacted]/getUpdates?mode=${mode}"`);
      expect(text).toContain(`"decoded":"/bot[redacted]/getUpdates?mode=${mode}"`);
      expect(text).not.toContain(PATH_SECRET);
    }
  });

  test("rules match the agent's path; the template goes in after, and the audit keeps the agent's path", async () => {
    const ok = await call(env.ruled, "/getMe");
    expect(ok.res.status).toBe(200);
    expect(lastUrl()).toBe(`/v1/${PATH_ON_WIRE}/api/getMe`);
    const canon = await call(env.ruled, "/files/%61/b");
    expect(canon.res.status).toBe(200);
    expect(lastUrl()).toBe(`/v1/${PATH_ON_WIRE}/api/files/a/b`); // the canonical path that was matched, after the template

    const before = env.upstream.received.length;
    // A path that names the template's own prefix is just another agent path, outside the rules.
    const refused = await expectEnvelope((await call(env.ruled, "/v1/x/api/getMe")).res, 403, "request_not_allowed");
    expect(refused.allowed).toEqual(RULES);
    expect(refused.proposal_hint.proposal.services[0].auth).toEqual({ type: "path", template: "/v1/{value}/api", token: "TELEGRAM_TOKEN" });
    await expectEnvelope((await call(env.ruled, "/files/a%2Fb")).res, 400, "invalid_request");
    expect(env.upstream.received.length).toBe(before);

    await Bun.sleep(400);
    const records: { host: string; path: string; status: number }[] = await env.broker.auditLogs();
    expect(records.filter((r) => r.host === env.ruled).map((r) => [r.path, r.status])).toEqual(
      expect.arrayContaining([
        ["/getMe", 200],
        ["/files/%61/b", 200],
        ["/v1/x/api/getMe", 403],
      ]),
    );
  });
});

describe("what agents and humans are shown", () => {
  test("/discover names the type and where the value goes, never the value or its key", async () => {
    const res = await env.broker.api("GET", "/discover", undefined, env.broker.sessionToken);
    env.seen.push(JSON.stringify(res.body));
    const byHost = Object.fromEntries(res.body.services.map((s: { host: string; auth: unknown }) => [s.host, s.auth]));
    expect(byHost[env.maps]).toEqual({ type: "query", param: "key", sent: "sent as the ?key= query parameter" });
    expect(byHost[env.bot]).toEqual({ type: "path", template: "/bot{value}", sent: "sent in the path as /bot{value}, before the requested path" });
  });

  test("a proposal with a query credential flows to the approval page, described in words", async () => {
    const filed = await env.broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host: "new.test", auth: { type: "query", param: "api_key", token: "NEW_KEY" } }], credentials: [{ key: "NEW_KEY" }], message: "maps" },
      env.broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    const read = await env.broker.api("GET", `/v1/proposals/${filed.body.id}`, undefined, env.broker.sessionToken);
    expect(read.body.services[0].auth).toEqual({ type: "query", param: "api_key", token: "NEW_KEY" });
    const page = await (await fetch(filed.body.approval_url)).text();
    expect(page).toContain("NEW_KEY, sent as the ?api_key= query parameter");
    const bad = await env.broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host: "new.test", auth: { type: "path", template: "/bot", token: "NEW_KEY" } }] },
      env.broker.sessionToken,
    );
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe("services[0].auth.template");
  });
});
