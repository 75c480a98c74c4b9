// Agents never change or read secrets, through the CLI too (architecture.md D18): the compiled binary,
// run with an agent token (admin grant) or under `broker vault run --role admin` (a scoped session),
// is refused every credential and service write and every value read, exits non-zero, and says to
// file a proposal. The vault is unchanged afterwards and the stored value is in no output or log.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cleanEnv, expectOk, isolatedBinary, type RunResult, runBinary, type ServerProcess, startSelfAddressedServer, tempDir } from "../helpers/binary.ts";

const { bin, dir } = isolatedBinary();
const SECRET = "sk-live-agent-secrets-e2e-Qx7!";
const OWNER_PASSWORD = "owner password 123";

let server: ServerProcess;
let agentToken = "";
const outputs: string[] = []; // everything printed, minus the owner's deliberate reveal
const owner = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-"), "config") });

async function cli(env: Record<string, string>, args: string[], stdin?: string, opts: { reveals?: boolean } = {}): Promise<RunResult> {
  const r = await runBinary(bin, args, { env, stdin, cwd: dir });
  if (!opts.reveals) outputs.push(r.stdout, r.stderr);
  return r;
}

beforeAll(async () => {
  server = await startSelfAddressedServer(bin, dir);
  expectOk(await cli(owner, ["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], `${OWNER_PASSWORD}\n`));
  expectOk(await cli(owner, ["vault", "create", "demo"]));
  expectOk(await cli(owner, ["vault", "use", "demo"]));
  expectOk(await cli(owner, ["credential", "set", "API_KEY"], `${SECRET}\n`));
  expectOk(await cli(owner, ["service", "add", "api.example.com", "--auth", "bearer", "--token", "API_KEY"]));
  const inv = expectOk(await cli(owner, ["agent", "invite", "--name", "boss-bot", "--role", "admin"]));
  const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
  const redeemed = await fetch(url, { method: "POST" });
  expect(redeemed.status).toBe(201);
  agentToken = ((await redeemed.json()) as { token: string }).token;
}, 60_000);

afterAll(async () => {
  await server?.stop();
});

type Kind = "write" | "read";
const REFUSED: [args: string[], kind: Kind, stdin?: string][] = [
  [["credential", "set", "NEW_KEY"], "write", "agent-chosen-value\n"],
  [["credential", "set", "API_KEY"], "write", "agent-chosen-value\n"],
  [["credential", "delete", "API_KEY"], "write"],
  [["credential", "get", "API_KEY"], "read"],
  [["credential", "list", "--reveal"], "read"],
  [["service", "add", "attacker.example.net", "--auth", "bearer", "--token", "API_KEY"], "write"],
  [["service", "add", "new.example.com", "--auth", "passthrough"], "write"],
  [["service", "disable", "api.example.com"], "write"],
  [["service", "enable", "api.example.com"], "write"],
  [["service", "remove", "api.example.com"], "write"],
];

/** The two kinds of machine principal, each holding the admin role: how to run one CLI command as it. */
const AS: Record<string, (args: string[], stdin?: string) => Promise<RunResult>> = {
  "agent token (admin grant)": (args, stdin) =>
    cli(
      cleanEnv({
        BROKER_CONFIG_DIR: join(tempDir("broker-agent-"), "config"),
        BROKER_ADDR: server.url,
        BROKER_SESSION_TOKEN: agentToken,
        BROKER_VAULT: "demo",
      }),
      args,
      stdin,
    ),
  // The child of `vault run` holds a scoped session in BROKER_SESSION_TOKEN, while the human's own
  // login sits in the same config dir: the session, not the login, is what the child uses.
  "vault run --role admin (scoped session)": (args, stdin) => cli(owner, ["vault", "run", "--role", "admin", "--", bin, ...args, "--vault", "demo"], stdin),
};

function expectRefused(r: RunResult, kind: Kind): void {
  expect(r.exitCode).toBe(1);
  expect(r.stdout).toBe("");
  expect(r.stderr).toContain("(403 forbidden)");
  expect(r.stderr).toMatch(/^error: agents never /m);
  expect(r.stderr).toContain("POST /v1/proposals");
  expect(r.stderr).toMatch(/^hint: an agent /m);
  expect(r.stderr).toContain(
    kind === "write" ? "hint: an agent files a proposal (POST $BROKER_ADDR/v1/proposals" : "hint: an agent calls the API through the broker",
  );
  expect(r.stderr).not.toContain("a vault admin can change it"); // no role would help
}

describe("agents and scoped sessions never change or read secrets through the CLI", () => {
  for (const [who, run] of Object.entries(AS)) {
    describe(who, () => {
      test("may still list key names and services", async () => {
        expect(expectOk(await run(["credential", "list"])).stdout).toContain("API_KEY");
        expect(expectOk(await run(["service", "list"])).stdout).toContain("api.example.com");
      });

      for (const [args, kind, stdin] of REFUSED) {
        test(`broker ${args.join(" ")} → refused, told to file a proposal`, async () => {
          expectRefused(await run(args, stdin), kind);
        });
      }
    });
  }

  test("the vault is unchanged, and the value is in no output or log line", async () => {
    const got = expectOk(await cli(owner, ["credential", "get", "API_KEY"], undefined, { reveals: true }));
    expect(got.stdout).toBe(`${SECRET}\n`);
    const keys = JSON.parse(expectOk(await cli(owner, ["credential", "list", "--json"])).stdout) as { key: string }[];
    expect(keys.map((k) => k.key)).toEqual(["API_KEY"]);
    const services = JSON.parse(expectOk(await cli(owner, ["service", "list", "--json"])).stdout);
    expect(services).toEqual([{ host: "api.example.com", description: "", auth: { type: "bearer", token: "API_KEY" }, enabled: true }]);
    for (const text of [...outputs, server.logs()]) expect(text.includes(SECRET)).toBe(false);
  });

  test("a human member still manages credentials and services with the same commands", async () => {
    const inv = JSON.parse(expectOk(await cli(owner, ["vault", "invite", "--role", "member", "--json"])).stdout) as { invite_url: string };
    const member = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-member-"), "config"), BROKER_ADDR: server.url });
    expectOk(await cli(member, ["vault", "join", inv.invite_url, "--email", "member@example.com", "--password-stdin"], "member password 123\n"));
    expectOk(await cli(member, ["credential", "set", "MEMBER_KEY", "--vault", "demo"], "member-value\n"));
    expectOk(await cli(member, ["service", "add", "member.example.com", "--auth", "bearer", "--token", "MEMBER_KEY", "--vault", "demo"]));
    expectOk(await cli(member, ["service", "disable", "member.example.com", "--vault", "demo"]));
    expectOk(await cli(member, ["service", "remove", "member.example.com", "--vault", "demo"]));
    expectOk(await cli(member, ["credential", "delete", "MEMBER_KEY", "--vault", "demo"]));
  });
});
