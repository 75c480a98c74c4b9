// `broker service add --auth query|path`, the CLI run from source against an in-process broker: the
// flags the person types make a service that puts the credential in the upstream's query or path,
// `list` says where in words, a template the broker refuses is named against --template, and no CLI
// output, response, log line or audit record holds the value in any form.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { sourceCli } from "./cli-from-source.ts";

/** Values whose URL-encoded forms differ from them (/, +, =, space), so both forms are checked. */
const QUERY_SECRET = `AIza/${crypto.randomUUID()}+=x y`;
const PATH_SECRET = `123456:${crypto.randomUUID()}@a b`;
const QUERY_ON_WIRE = QUERY_SECRET.replace("/", "%2F").replace("+", "%2B").replace("=", "%3D").replace(" ", "%20");
const PATH_ON_WIRE = PATH_SECRET.replace(" ", "%20");
let upstream: TestUpstream;
let broker: Broker;
let maps: string;
let bot: string;
let home: string;
const outputs: string[] = [];

const { cli, ok } = sourceCli(() => ({ home, apiUrl: broker.apiUrl }), outputs);

async function call(host: string, target: string): Promise<{ status: number; body: any }> {
  const res = await broker.proxy(host, target);
  const text = await dumpResponse(res.clone());
  outputs.push(text);
  return { status: res.status, body: await res.json() };
}

const lastUrl = () => upstream.received.at(-1)!.url;

beforeAll(async () => {
  upstream = await startUpstream(undefined, { names: { dns: ["maps.test", "bot.test"] } });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  for (const name of ["maps.test", "bot.test"]) broker.dns.set(name, ["127.0.0.1"]);
  [maps, bot] = [`maps.test:${upstream.port}`, `bot.test:${upstream.port}`];
  home = mkdtempSync(join(tmpdir(), "broker-cli-url-auth-"));
  await ok(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  await ok(["vault", "use", broker.vault]);
  await ok(["credential", "set", "GOOGLE_API_KEY"], `${QUERY_SECRET}\n`);
  await ok(["credential", "set", "TELEGRAM_TOKEN"], `${PATH_SECRET}\n`);
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("broker service add --auth query|path", () => {
  test("--auth query --param key: the upstream gets ?key=<value>, the agent's own key= replaced", async () => {
    const out = await ok(["service", "add", maps, "--auth", "query", "--param", "key", "--token", "GOOGLE_API_KEY"]);
    expect(out).toBe(`Added ${maps} to vault ${broker.vault} (query ?key= from GOOGLE_API_KEY).\nAgents may use every method and path.\n`);
    const { status, body } = await call(maps, "/maps/api/geocode?address=1%20Main&key=agent-supplied");
    expect(status).toBe(200);
    expect(lastUrl()).toBe(`/maps/api/geocode?address=1%20Main&key=${QUERY_ON_WIRE}`);
    expect(body.url).toBe("/maps/api/geocode?address=1%20Main&key=[redacted]"); // the upstream's echo, redacted
  });

  test("--auth path --template \"/bot{value}\": the template goes before the agent's path; rules see the agent's path", async () => {
    const out = await ok(["service", "add", bot, "--auth", "path", "--template", "/bot{value}", "--token", "TELEGRAM_TOKEN", "--allow", "GET /getMe"]);
    expect(out).toBe(`Added ${bot} to vault ${broker.vault} (path /bot{value} from TELEGRAM_TOKEN).\nAgents may use GET on /getMe.\n`);
    const { status, body } = await call(bot, "/getMe?x=1");
    expect(status).toBe(200);
    expect(lastUrl()).toBe(`/bot${PATH_ON_WIRE}/getMe?x=1`);
    expect(body.url).toBe("/bot[redacted]/getMe?x=1");
    const refused = await call(bot, "/sendMessage");
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe("request_not_allowed");
  });

  test("list says where each credential goes, in words; --json carries names only", async () => {
    const table = await ok(["service", "list"]);
    expect(table).toMatch(new RegExp(`${bot}\\s+path /bot\\{value\\} from TELEGRAM_TOKEN\\s+yes`));
    expect(table).toMatch(new RegExp(`${maps}\\s+query \\?key= from GOOGLE_API_KEY\\s+yes`));
    const services: { host: string; auth: unknown }[] = JSON.parse(await ok(["service", "list", "--json"]));
    expect(Object.fromEntries(services.map((s) => [s.host, s.auth]))).toEqual({
      [maps]: { type: "query", param: "key", token: "GOOGLE_API_KEY" },
      [bot]: { type: "path", template: "/bot{value}", token: "TELEGRAM_TOKEN" },
    });
  });

  test("a template the broker refuses is named against --template, with the shape to type", async () => {
    const bad = await cli(["service", "add", "other.test", "--auth", "path", "--template", "/bot", "--token", "TELEGRAM_TOKEN"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe(
      'error: --template must hold {value} exactly once\nhint: it starts with /, holds {value} once and does not end with /, e.g. --template "/bot{value}"\n',
    );
    const param = await cli(["service", "add", "other.test", "--auth", "query", "--param", "key=", "--token", "GOOGLE_API_KEY"]);
    expect(param.code).toBe(2);
    expect(param.stderr).toStartWith("error: --param must be a query parameter name");
    const missing = await cli(["service", "add", "other.test", "--auth", "query", "--token", "GOOGLE_API_KEY"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--auth query needs --param");
    expect(JSON.parse(await ok(["service", "list", "--json"]))).toHaveLength(2); // nothing added by the failures
  });

  test("no CLI output, response, log line or audit record holds either value, raw or encoded", async () => {
    for (const form of [QUERY_SECRET, PATH_SECRET, QUERY_ON_WIRE, PATH_ON_WIRE, encodeURIComponent(QUERY_SECRET), encodeURIComponent(PATH_SECRET)]) {
      await expectNoLeak(broker, form, outputs);
    }
    const audit: { host: string; path: string }[] = await broker.auditLogs();
    expect(audit.filter((r) => r.host === bot).map((r) => r.path)).toContain("/getMe"); // the agent's path, not /bot<value>/getMe
  });
});
