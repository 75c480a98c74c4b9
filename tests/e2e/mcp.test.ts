// `broker mcp` (issue 22) as an MCP client runs it: the official SDK's Client over stdio, starting the
// compiled binary under `broker vault run -- broker mcp` exactly as the README's one-line configuration
// does (so the server holds only the run's scoped session). It lists the tools and the agent guide,
// discovers, files a proposal a person then approves and sees the status change, and follows a request a
// rule held for a person from pending to approved. No tool result, resource or output holds a value.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { runBinary } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { ok, startVaultRunEnv, type VaultRunEnv } from "./vault-run-fixture.ts";

const SECRET = `sk-mcp-${crypto.randomUUID()}`;
const NEW_VALUE = `sk-mcp-new-${crypto.randomUUID()}`;
let upstream: TestUpstream;
let env: VaultRunEnv;
let hostPort: string;
let client: Client;
let stderr = "";
const seen: string[] = [];

const api = async (method: string, path: string, body?: unknown) => {
  const token = JSON.parse(await Bun.file(`${env.owner.BROKER_CONFIG_DIR}/cli.json`).text()).token as string;
  const res = await fetch(`${env.server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
};

async function call(name: string, args: Record<string, unknown> = {}) {
  const result = (await client.callTool({ name, arguments: args })) as {
    content: { type: string; text: string }[];
    structuredContent?: any;
    isError?: boolean;
  };
  seen.push(JSON.stringify(result));
  return result;
}

beforeAll(async () => {
  upstream = await startUpstream((req, res) => res.end(JSON.stringify({ ok: req.url })), { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } });
  hostPort = `127.0.0.2:${upstream.port}`;
  env = await startVaultRunEnv({ upstreamCas: [upstream.pki.caPem], allowlist: "127.0.0.2", secret: SECRET, services: [] });
  ok(await env.cli(["service", "add", hostPort, "--auth", "bearer", "--token", "API_KEY", "--allow", "GET /**", "--approve", "POST /hold"]));
  const transport = new StdioClientTransport({ command: env.bin, args: ["vault", "run", "--", env.bin, "mcp"], env: env.owner, stderr: "pipe" });
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  client = new Client({ name: "broker-test", version: "1.0.0" });
  await client.connect(transport);
}, 60_000);

afterAll(async () => {
  await client?.close();
  await env?.server.stop();
  await upstream?.close();
});

describe("broker mcp through the official MCP SDK", () => {
  test("lists exactly the four tools and the agent guide", async () => {
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    expect(tools).toEqual(["discover", "proposal_status", "propose_access", "request_approval_status"]);
    const resources = (await client.listResources()).resources.map((r) => r.uri);
    expect(resources).toEqual(["broker://agent-guide"]);
    const guide = await client.readResource({ uri: "broker://agent-guide" });
    const text = (guide.contents[0] as { text: string }).text;
    expect(text).toContain("# Using the credential broker");
    expect(text).toContain("approval_required");
    seen.push(text);
  });

  test("discover shows the service and the credential's key name, never its value", async () => {
    const r = await call("discover");
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent.vault).toBe("demo");
    expect(r.structuredContent.services.map((s: { host: string }) => s.host)).toEqual([hostPort]);
    expect(r.structuredContent.available_credentials).toEqual(["API_KEY"]);
    expect(JSON.stringify(r)).not.toContain(SECRET);
  });

  test("a proposal filed through the tool, approved by a person, shows applied", async () => {
    const filed = await call("propose_access", {
      services: [{ host: "api.newhost.example", auth: { type: "bearer", token: "NEW_KEY" } }],
      credentials: [{ key: "NEW_KEY", description: "the new host's API key" }],
      message: "Needs api.newhost.example to list the user's invoices.",
    });
    expect(filed.isError).toBeFalsy();
    const id = filed.structuredContent.id as number;
    expect(filed.structuredContent.approval_url).toStartWith(`${env.server.url}/approve/${id}?token=`);
    expect((await call("proposal_status", { id })).structuredContent.status).toBe("pending");
    const approved = await api("POST", `/v1/proposals/${id}/approve`, { credentials: { NEW_KEY: NEW_VALUE } });
    expect(approved.status).toBe(200);
    const after = await call("proposal_status", { id });
    expect(after.structuredContent.status).toBe("applied");
    expect((await call("discover")).structuredContent.available_credentials).toEqual(["API_KEY", "NEW_KEY"]);
  });

  test("a held request's approval goes from pending to approved", async () => {
    // The agent's own request, held by the rule (sent with a session the owner minted, as vault run does).
    const session = await api("POST", "/v1/sessions", { vault: "demo", role: "proxy" });
    const held = await fetch(`${env.server.url}/proxy/${hostPort}/hold`, {
      method: "POST",
      body: "{}",
      headers: { authorization: `Bearer ${session.body.token}` },
    });
    expect(held.status).toBe(428);
    const { approval_id } = (await held.json()) as { approval_id: string };
    expect((await call("request_approval_status", { approval_id })).structuredContent.state).toBe("pending");
    expect((await api("POST", `/v1/vaults/demo/request-approvals/${approval_id}/approve`)).status).toBe(200);
    const after = await call("request_approval_status", { approval_id });
    expect(after.structuredContent).toMatchObject({ id: approval_id, state: "approved", method: "POST" });
  });

  test("a broker refusal is a tool error carrying the envelope", async () => {
    const r = await call("proposal_status", { id: 999999 });
    expect(r.isError).toBe(true);
    expect(JSON.parse(r.content[0]!.text)).toMatchObject({ status: 404, error: "not_found" });
  });

  test("without BROKER_ADDR and BROKER_SESSION_TOKEN it exits 2 and says what is missing", async () => {
    const r = await runBinary(env.bin, ["mcp"], { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/tmp" } });
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("BROKER_ADDR and BROKER_SESSION_TOKEN");
  });

  test("no tool result, resource or output holds a credential value", () => {
    for (const text of [...seen, stderr, ...env.outputs]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(NEW_VALUE);
    }
  });
});
