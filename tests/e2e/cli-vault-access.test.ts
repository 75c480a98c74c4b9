// `broker vault members|invites|agent-invites|set` as the compiled binary against a real server.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { join } from "node:path";
import { cleanEnv, isolatedBinary, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";

const { bin, dir } = isolatedBinary();
const config = join(tempDir("broker-cli-"), "config");
let server: ServerProcess;

async function cli(args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: cleanEnv({ BROKER_CONFIG_DIR: config, BROKER_ADDR: server.url }), stdin, cwd: dir });
  if (r.exitCode !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.exitCode}\n${r.stderr}`);
  return r;
}

beforeAll(async () => {
  server = await startBinaryServer(bin, cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data") }), dir);
  await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], "access owner password\n");
  await cli(["vault", "create", "main"]);
  await cli(["vault", "use", "main"]);
});

afterAll(async () => {
  await server.stop();
});

test("members lists the people of the vault", async () => {
  const members = JSON.parse((await cli(["vault", "members", "--json"])).stdout) as { email: string; role: string }[];
  expect(members).toEqual([{ email: "owner@example.com", role: "admin" }]);
});

test("pending invites are listed and can be revoked, after which their link is dead", async () => {
  const invite = JSON.parse((await cli(["vault", "invite", "--email", "new@example.com", "--json"])).stdout) as { id: string; token: string };
  const agentInvite = JSON.parse((await cli(["agent", "invite", "--name", "bot-1", "--json"])).stdout) as { id: string; invite_url: string };
  const people = JSON.parse((await cli(["vault", "invites", "list", "--json"])).stdout) as { id: string; email: string }[];
  expect(people.map((i) => i.email)).toEqual(["new@example.com"]);
  const agents = JSON.parse((await cli(["vault", "agent-invites", "list", "--json"])).stdout) as { id: string; name: string }[];
  expect(agents.map((i) => i.name)).toEqual(["bot-1"]);
  expect((await cli(["vault", "invites", "revoke", invite.id])).stdout).toContain("Revoked");
  expect((await cli(["vault", "agent-invites", "revoke", agentInvite.id])).stdout).toContain("Revoked");
  expect(JSON.parse((await cli(["vault", "invites", "list", "--json"])).stdout)).toEqual([]);
  const redeem = await fetch(agentInvite.invite_url, { method: "POST" });
  expect(redeem.status).toBe(404);
  expect(invite.token).toMatch(/^av_uinv_/);
});

test("set --unmatched-hosts switches the vault between blind tunnels and refusal", async () => {
  expect((await cli(["vault", "set", "--unmatched-hosts", "deny"])).stdout).toContain("refused");
  const owner = JSON.parse(await Bun.file(join(config, "cli.json")).text()).token as string;
  const view = (await (await fetch(`${server.url}/v1/vaults/main`, { headers: { authorization: `Bearer ${owner}` } })).json()) as { unmatched_hosts: string };
  expect(view.unmatched_hosts).toBe("deny");
  expect((await cli(["vault", "set", "--unmatched-hosts", "tunnel"])).stdout).toContain("blind tunnels");
  const bad = await runBinary(bin, ["vault", "set", "--unmatched-hosts", "maybe"], {
    env: cleanEnv({ BROKER_CONFIG_DIR: config, BROKER_ADDR: server.url }),
    cwd: dir,
  });
  expect(bad.exitCode).not.toBe(0);
});
