// `broker proposal` as the compiled binary against a real server: an agent files proposals over
// HTTP, a person lists, shows, approves (values piped on stdin, one per slot) and rejects them
// with the CLI. The values must reach the vault and appear in no CLI output nor server log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cleanEnv, expectOk, isolatedBinary, type RunResult, runBinary, type ServerProcess, startSelfAddressedServer, tempDir } from "../helpers/binary.ts";
import { runInProcess } from "../helpers/cli-offline.ts";

const { bin, dir } = isolatedBinary();
const VALUE_A = "sk-proposal-e2e-A-7f3k!q";
const VALUE_B = "sk-proposal-e2e-B-9x2m#z";
const OWNER_PASSWORD = "proposal owner pw 1";

let server: ServerProcess;
let agentToken = "";
const outputs: string[] = [];

const owner = () => cleanEnv({ BROKER_CONFIG_DIR: ownerConfig, BROKER_ADDR: server.url });
const ownerConfig = join(tempDir("broker-cli-"), "config");

async function cli(args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: owner(), stdin, cwd: dir });
  outputs.push(r.stdout, r.stderr);
  return r;
}

/** Help text and argument errors: the CLI's main() in process, no server to reach (kept like `cli`'s output). */
async function offline(args: string[]): Promise<RunResult> {
  const r = await runInProcess(args);
  outputs.push(r.stdout, r.stderr);
  return r;
}

async function asAgent(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${agentToken}`, "x-vault": "props", ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  outputs.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  server = await startSelfAddressedServer(bin, dir);
  expectOk(await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], `${OWNER_PASSWORD}\n`));
  expectOk(await cli(["vault", "create", "props"]));
  expectOk(await cli(["vault", "use", "props"]));
  const inv = expectOk(await cli(["agent", "invite", "--name", "filer", "--role", "proxy"]));
  const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
  const redeemed = await fetch(url, { method: "POST" });
  expect(redeemed.status).toBe(201);
  agentToken = ((await redeemed.json()) as { token: string }).token;
});

afterAll(async () => {
  await server?.stop();
});

describe("broker proposal", () => {
  test("agent files, human lists, shows and approves with piped values; discover and the vault then hold them", async () => {
    expectOk(await cli(["credential", "set", "OLD_KEY"], "stored-old-value\n"));
    const filed = await asAgent("POST", "/v1/proposals", {
      services: [{ action: "set", host: "api.example.com", description: "Example API", auth: { type: "bearer", token: "NEW_KEY" } }],
      credentials: [
        { action: "set", key: "NEW_KEY", description: "Example API key", obtain: "https://example.com/keys", obtain_instructions: "Create a read-only key." },
        { action: "set", key: "OLD_KEY", description: "Kept as is" },
        { action: "set", key: "OTHER_KEY", description: "Second new key" },
      ],
      message: "I need the Example API to fetch reports.",
      user_message: "Please paste an Example API key.",
    });
    expect(filed.status).toBe(201);
    const id = filed.body.id as number;

    const list = expectOk(await cli(["proposal", "list"]));
    expect(list.stdout).toMatch(
      new RegExp(`^ID\\s+STATUS\\s+HOSTS\\s+KEYS\\s+CREATED\\n${id}\\s+pending\\s+api\\.example\\.com\\s+NEW_KEY, OLD_KEY, OTHER_KEY`),
    );
    const listJson = JSON.parse(expectOk(await cli(["proposal", "list", "--status", "pending", "--json"])).stdout);
    expect(listJson.map((p: { id: number }) => p.id)).toEqual([id]);
    expect(expectOk(await cli(["proposal", "list", "--status", "applied"])).stdout).toContain("No applied proposals in vault props.");
    expect((await offline(["proposal", "list", "--status", "bogus"])).exitCode).toBe(2);

    const show = expectOk(await cli(["proposal", "show", String(id)]));
    expect(show.stdout).toContain(`Proposal ${id} in vault props: pending`);
    expect(show.stdout).toContain("Requested by the agent filer (proxy in this vault)");
    expect(show.stdout).not.toContain("agent:");
    expect(show.stdout).toContain("I need the Example API to fetch reports.");
    expect(show.stdout).toContain("Please paste an Example API key.");
    expect(show.stdout).toContain("api.example.com");
    expect(show.stdout).toContain("get it at: https://example.com/keys");
    expect(show.stdout).toContain("Create a read-only key.");
    expect(JSON.parse(expectOk(await cli(["proposal", "show", String(id), "--json"])).stdout)).toMatchObject({ id, status: "pending", vault: "props" });

    // A missing value for a new key fails before anything is sent.
    const short = await cli(["proposal", "approve", String(id)], `${VALUE_A}\n\n`);
    expect(short.exitCode).toBe(1);
    expect(short.stderr).toContain("no value for OTHER_KEY");
    expect((await asAgent("GET", `/v1/proposals/${id}`)).body.status).toBe("pending");

    // The empty second line keeps OLD_KEY's stored value.
    const ok = expectOk(await cli(["proposal", "approve", String(id)], `${VALUE_A}\n\n${VALUE_B}\n`));
    expect(ok.stdout).toBe(`Approved proposal ${id}\n`);

    const polled = await asAgent("GET", `/v1/proposals/${id}`);
    expect(polled.body).toMatchObject({ status: "applied", decided_at: expect.any(String) });
    const discover = await asAgent("GET", "/discover");
    expect(discover.body.services).toEqual([{ host: "api.example.com", description: "Example API", auth: { type: "bearer" } }]);
    expect(discover.body.available_credentials.sort()).toEqual(["NEW_KEY", "OLD_KEY", "OTHER_KEY"]);
    const got = await runBinary(bin, ["credential", "get", "NEW_KEY"], { env: owner(), cwd: dir }); // a deliberate reveal: not recorded
    expect(got.stdout).toBe(`${VALUE_A}\n`);
    expect((await runBinary(bin, ["credential", "get", "OLD_KEY"], { env: owner(), cwd: dir })).stdout).toBe("stored-old-value\n");
    expect((await runBinary(bin, ["credential", "get", "OTHER_KEY"], { env: owner(), cwd: dir })).stdout).toBe(`${VALUE_B}\n`);

    const again = await cli(["proposal", "approve", String(id)], `${VALUE_A}\n\n${VALUE_B}\n`);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain("applied, not pending");
    expect(expectOk(await cli(["proposal", "list", "--status", "applied"])).stdout).toContain(`${id}`);
  });

  test("reject flow; bad ids fail before any request", async () => {
    const filed = await asAgent("POST", "/v1/proposals", { services: [{ host: "other.example.org", auth: { type: "passthrough" } }], message: "please" });
    expect(filed.status).toBe(201);
    const id = String(filed.body.id);
    expect(expectOk(await cli(["proposal", "reject", id])).stdout).toBe(`Rejected proposal ${id}\n`);
    expect((await asAgent("GET", `/v1/proposals/${id}`)).body.status).toBe("rejected");
    expect(expectOk(await cli(["proposal", "show", id])).stdout).toContain(`Proposal ${id} in vault props: rejected`);
    const twice = await cli(["proposal", "reject", id]);
    expect(twice.exitCode).toBe(1);
    expect(twice.stderr).toContain("409");
    expect((await cli(["proposal", "approve", id], "x\n")).stderr).toContain("rejected, not pending");
    expect((await offline(["proposal", "show", "12abc"])).exitCode).toBe(2);
    expect((await cli(["proposal", "show", "999999"])).stderr).toContain("404");
    expect((await asAgent("GET", "/discover")).body.services.map((s: { host: string }) => s.host)).not.toContain("other.example.org");
  });

  test("agent-written text cannot drive the terminal", async () => {
    const filed = await asAgent("POST", "/v1/proposals", {
      credentials: [{ key: "ESC_KEY", description: "\u001b[2J\u001b]0;pwned\u0007cleared" }],
      message: "line one\n\u001b[31mred\u001b[0m",
    });
    expect(filed.status).toBe(201);
    const show = expectOk(await cli(["proposal", "show", String(filed.body.id)]));
    expect(show.stdout).not.toContain("\u001b");
    expect(show.stdout).not.toContain("\u0007");
    expect(show.stdout).toContain("?[31mred?[0m");
    expectOk(await cli(["proposal", "reject", String(filed.body.id)]));
  });

  test("--help for every proposal command", async () => {
    for (const sub of ["list", "show", "approve", "reject"]) {
      const r = await runInProcess(["proposal", sub, "--help"]);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain(`USAGE broker proposal ${sub}`);
    }
  });
});

describe("leaks", () => {
  test("no CLI output, agent-visible response or server log line holds an approved value or the password", () => {
    expect(outputs.length).toBeGreaterThan(20);
    for (const text of [...outputs, ...server.logs().split("\n")]) {
      expect(text).not.toContain(VALUE_A);
      expect(text).not.toContain(VALUE_B);
      expect(text).not.toContain(OWNER_PASSWORD);
    }
  });
});

describe("an applied proposal's service uses its credential through the proxy", () => {
  test("agent proposes upstream.test with a slot; once approved, the proxy injects the value", async () => {
    const { startUpstream } = await import("../helpers/upstream.ts");
    const { startBroker, expectNoLeak } = await import("./proxy-fixture.ts");
    await using upstream = await startUpstream();
    await using broker = await startBroker({ caPem: upstream.pki.caPem });
    broker.dns.set("upstream.test", ["127.0.0.1"]);
    const host = `upstream.test:${upstream.port}`;
    const value = "sk-proposal-proxy-e2e-4q9w";
    const filed = await broker.api(
      "POST",
      "/v1/proposals",
      { services: [{ host, auth: { type: "bearer", token: "UP_KEY" } }], credentials: [{ key: "UP_KEY" }] },
      broker.sessionToken,
    );
    expect(filed.status).toBe(201);
    expect((await broker.proxy(host, "/before")).status).toBe(403);
    const approved = await broker.api("POST", `/v1/proposals/${filed.body.id}/approve`, { credentials: { UP_KEY: value } }, broker.userToken);
    expect(approved.status).toBe(200);
    const res = await broker.proxy(host, "/after");
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(upstream.received.at(-1)?.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1]).toBe(`Bearer ${value}`);
    await expectNoLeak(broker, value, [JSON.stringify(filed.body), JSON.stringify(approved.body), res.status === 200 ? "" : text]);
  });
});
