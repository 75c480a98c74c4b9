// The human CLI, run as the compiled binary against a real `broker server` (also the binary).
// Every test that handles a credential value checks it shows up only where asked for
// (`credential get`, `--reveal`) and never in any other CLI output or server log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import {
  cleanEnv,
  expectOk,
  freePort,
  isolatedBinary,
  type RunResult,
  runBinary,
  type ServerProcess,
  startSelfAddressedServer,
  tempDir,
} from "../helpers/binary.ts";
import { runInProcess } from "../helpers/cli-offline.ts";

const { bin, dir } = isolatedBinary();
const SECRET = "sk-live-Zq8w!-cli-e2e-value";
const OWNER_PASSWORD = "owner password 123";

let server: ServerProcess;
const outputs: string[] = []; // everything the CLI printed, minus the deliberate reveals

/** A person at their own machine: a config dir of their own, no BROKER_* leaking in. */
function newUser(extra: Record<string, string> = {}): Record<string, string> {
  return cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-"), "config"), ...extra });
}

async function cli(env: Record<string, string>, args: string[], stdin?: string, opts: { reveals?: boolean } = {}): Promise<RunResult> {
  const r = await runBinary(bin, args, { env, stdin, cwd: dir });
  if (!opts.reveals) outputs.push(r.stdout, r.stderr);
  return r;
}

/** Help text and argument errors: the CLI's main() in process, no server to reach (kept like `cli`'s output). */
async function offline(args: string[]): Promise<RunResult> {
  const r = await runInProcess(args);
  outputs.push(r.stdout, r.stderr);
  return r;
}

/** Runs the CLI on a pseudo-terminal, typing each answer once its prompt appears. */
async function cliOnTerminal(env: Record<string, string>, args: string[], answers: [prompt: string, reply: string][]): Promise<RunResult> {
  let screen = "";
  const proc = Bun.spawn([bin, ...args], { env, cwd: dir, terminal: { cols: 200, rows: 40, data: (_t, d) => void (screen += new TextDecoder().decode(d)) } });
  let from = 0;
  for (const [prompt, reply] of answers) {
    const deadline = Date.now() + 10_000;
    while (screen.indexOf(prompt, from) < 0 && Date.now() < deadline && proc.exitCode === null) await Bun.sleep(10);
    from = screen.indexOf(prompt, from) + prompt.length;
    proc.terminal?.write(reply);
  }
  const exitCode = await proc.exited;
  await Bun.sleep(50); // let the last output arrive
  proc.terminal?.close();
  outputs.push(screen);
  return { exitCode, stdout: screen, stderr: "" };
}

beforeAll(async () => {
  server = await startSelfAddressedServer(bin, dir);
});

afterAll(async () => {
  await server?.stop();
});

describe("broker CLI against a real server", () => {
  const owner = newUser();

  test("owner flow: register → vault → credential → service → agent invite → agent token → revoke", async () => {
    const reg = expectOk(
      await cli(owner, ["auth", "register", "--email", "Owner@Example.com", "--password-stdin", "--address", server.url], `${OWNER_PASSWORD}\n`),
    );
    expect(reg.stdout).toContain("Logged in as owner@example.com");
    expect(reg.stdout + reg.stderr).not.toContain("av_sess_");
    const cfgDir = owner.BROKER_CONFIG_DIR as string;
    expect(statSync(cfgDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(cfgDir, "cli.json")).mode & 0o777).toBe(0o600);

    expectOk(await cli(owner, ["vault", "create", "demo"]));
    expect(expectOk(await cli(owner, ["vault", "use", "demo"])).stdout).toContain("Using vault demo");

    expect(expectOk(await cli(owner, ["credential", "set", "API_KEY"], `${SECRET}\n`)).stdout).toContain("Set API_KEY in vault demo");
    const list = expectOk(await cli(owner, ["credential", "list"]));
    expect(list.stdout).toMatch(/^KEY\s+UPDATED\nAPI_KEY\s+\d{4}-/);
    const listJson = JSON.parse(expectOk(await cli(owner, ["credential", "list", "--json"])).stdout);
    expect(listJson).toEqual([{ key: "API_KEY", updated_at: expect.any(String) }]);

    const got = expectOk(await cli(owner, ["credential", "get", "API_KEY"], undefined, { reveals: true }));
    expect(got.stdout).toBe(`${SECRET}\n`); // only the value: pipeable
    const revealed = expectOk(await cli(owner, ["credential", "list", "--reveal", "--json"], undefined, { reveals: true }));
    expect(JSON.parse(revealed.stdout)).toEqual([{ key: "API_KEY", updated_at: expect.any(String), value: SECRET }]);
    expect(expectOk(await cli(owner, ["credential", "list", "--reveal"], undefined, { reveals: true })).stdout).toContain(SECRET);

    expectOk(await cli(owner, ["service", "add", "api.example.com", "--auth", "bearer", "--token", "API_KEY", "--description", "Example API"]));
    const services = JSON.parse(expectOk(await cli(owner, ["service", "list", "--json"])).stdout);
    expect(services).toEqual([{ host: "api.example.com", description: "Example API", auth: { type: "bearer", token: "API_KEY" }, enabled: true }]);

    const inv = expectOk(await cli(owner, ["agent", "invite", "--name", "bot", "--token-ttl", "30d"]));
    const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
    expect(url).toStartWith(`${server.url}/invite/`);
    expect(inv.stdout).toContain(`  ${url}\n`);
    const redeemed = await fetch(url, { method: "POST" });
    expect(redeemed.status).toBe(201);
    const { token: agentToken } = (await redeemed.json()) as { token: string };
    expect(agentToken).toStartWith("av_agt_");

    // The CLI with an agent token sends X-Vault by itself; the raw API without it refuses.
    const agent = newUser({ BROKER_ADDR: server.url, BROKER_SESSION_TOKEN: agentToken, BROKER_VAULT: "demo" });
    expect(expectOk(await cli(agent, ["account", "whoami"])).stdout).toContain("agent bot");
    const agentList = expectOk(await cli(agent, ["credential", "list"]));
    expect(agentList.stdout).toContain("API_KEY");
    const bare = await fetch(`${server.url}/v1/vaults/demo/credentials`, { headers: { authorization: `Bearer ${agentToken}` } });
    expect(bare.status).toBe(400);
    expect(await bare.json()).toMatchObject({ error: "invalid_request", field: "x-vault" });
    const agentGet = await cli(agent, ["credential", "get", "API_KEY"]);
    expect(agentGet.exitCode).toBe(1);
    expect(agentGet.stderr).toContain("403");

    expect(expectOk(await cli(owner, ["agent", "list"])).stdout).toMatch(/bot\s+member\s+demo \(proxy\)/);
    expectOk(await cli(owner, ["agent", "revoke", "bot"]));
    const after = await cli(agent, ["credential", "list"]);
    expect(after.exitCode).toBe(1);
    expect(after.stderr).toContain("401");
    expect(after.stderr).toContain("hint: BROKER_SESSION_TOKEN");
    expect((await fetch(`${server.url}/v1/vaults/demo/credentials`, { headers: { authorization: `Bearer ${agentToken}`, "x-vault": "demo" } })).status).toBe(
      401,
    );
  });

  test("secrets never come from the command line, and are never echoed when refused", async () => {
    const flag = await cli(owner, ["credential", "set", "OTHER_KEY", "--value", SECRET]);
    expect(flag.exitCode).toBe(2);
    expect(flag.stderr).toContain("--value does not exist");
    const positional = await cli(owner, ["credential", "set", "OTHER_KEY", SECRET]);
    expect(positional.exitCode).toBe(2);
    expect(positional.stderr).toContain("unexpected extra argument");
    const password = await cli(owner, ["auth", "login", "--email", "owner@example.com", "--password", OWNER_PASSWORD]);
    expect(password.exitCode).toBe(2);
    const keys = JSON.parse(expectOk(await cli(owner, ["credential", "list", "--json"])).stdout);
    expect(keys.map((k: { key: string }) => k.key)).toEqual(["API_KEY"]);
  });

  test("a piped value keeps its spaces; exactly one trailing newline is dropped", async () => {
    const value = `  ${SECRET} padded\t`;
    expectOk(await cli(owner, ["credential", "set", "PADDED", "--vault", "demo"], `${value}\r\n`));
    expect(expectOk(await cli(owner, ["credential", "get", "PADDED"], undefined, { reveals: true })).stdout).toBe(`${value}\n`);
    // A second newline is part of the value; the server refuses line breaks (values go into headers).
    const twoLines = await cli(owner, ["credential", "set", "PADDED"], `${SECRET}\n\n`);
    expect(twoLines.exitCode).toBe(1);
    expect(twoLines.stderr).toContain("field value");
    expectOk(await cli(owner, ["credential", "delete", "PADDED"]));
    const missing = await cli(owner, ["credential", "get", "PADDED"]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain("404");
  });

  test("login, --print-token, whoami, sessions, logout", async () => {
    const laptop = newUser({ BROKER_ADDR: server.url });
    const wrong = await cli(laptop, ["auth", "login", "--email", "owner@example.com", "--password-stdin"], "not the password\n");
    expect(wrong.exitCode).toBe(1);
    expect(wrong.stderr).toContain("401");

    const login = expectOk(await cli(laptop, ["auth", "login", "--email", "owner@example.com", "--password-stdin", "--print-token"], `${OWNER_PASSWORD}\n`));
    expect(login.stdout).toMatch(/^av_sess_[A-Za-z0-9_-]+\n$/);
    expect(login.stderr).toContain("Logged in as owner@example.com");

    const me = JSON.parse(expectOk(await cli(laptop, ["account", "whoami", "--json"])).stdout);
    expect(me).toMatchObject({ kind: "user", user: { email: "owner@example.com", role: "owner" }, address: server.url });
    expect(expectOk(await cli(laptop, ["account", "whoami"])).stdout).toContain("owner@example.com (owner)");

    const sessions = JSON.parse(expectOk(await cli(laptop, ["auth", "sessions", "list", "--json"])).stdout) as { id: string; current: boolean }[];
    expect(sessions.filter((s) => s.current)).toHaveLength(1);
    const other = sessions.find((s) => !s.current && s.id !== me.session.id);
    expect(other).toBeDefined();
    expect(expectOk(await cli(laptop, ["auth", "sessions", "list"])).stdout).toContain("(this session)");

    expectOk(await cli(laptop, ["auth", "logout"]));
    const gone = await cli(laptop, ["account", "whoami"]);
    expect(gone.exitCode).toBe(1);
    expect(gone.stderr).toContain("broker auth login");
  });

  test("vault invite: join by registering through it, and with a saved login", async () => {
    const inv = expectOk(await cli(owner, ["vault", "invite", "--email", "member@example.com", "--role", "member"]));
    const link = /^ {2}(http\S+)$/m.exec(inv.stdout)?.[1] as string;
    expect(link).toContain(server.url);
    const member = newUser();
    const joined = expectOk(await cli(member, ["vault", "join", link, "--email", "member@example.com", "--password-stdin"], "member password 1\n"));
    expect(joined.stdout).toContain("joined vault demo as member");
    expect(joined.stdout).not.toContain("av_sess_");
    expect(JSON.parse(expectOk(await cli(member, ["vault", "list", "--json"])).stdout)).toEqual([
      { name: "demo", role: "member", created_at: expect.any(String) },
    ]);
    const reused = await cli(member, ["vault", "join", link]);
    expect(reused.exitCode).toBe(1);

    expectOk(await cli(owner, ["vault", "create", "second"]));
    const inv2 = JSON.parse(expectOk(await cli(owner, ["vault", "invite", "--vault", "second", "--role", "proxy", "--json"])).stdout);
    expect(expectOk(await cli(member, ["vault", "join", inv2.token])).stdout).toContain("Joined vault second as proxy");
    const denied = await cli(member, ["credential", "list", "--vault", "second", "--reveal"]);
    expect(denied.exitCode).toBe(1);
    expect(denied.stderr).toContain("403");
  });

  test("change-password keeps this terminal logged in and ends the old password", async () => {
    const user = newUser({ BROKER_ADDR: server.url });
    expectOk(await cli(user, ["auth", "login", "--email", "member@example.com", "--password-stdin"], "member password 1\n"));
    expectOk(await cli(user, ["account", "change-password", "--password-stdin"], "member password 1\nmember password 2\n"));
    expectOk(await cli(user, ["account", "whoami"]));
    expect(
      (await cli(newUser({ BROKER_ADDR: server.url }), ["auth", "login", "--email", "member@example.com", "--password-stdin"], "member password 1\n")).exitCode,
    ).toBe(1);
    expectOk(await cli(newUser({ BROKER_ADDR: server.url }), ["auth", "login", "--email", "member@example.com", "--password-stdin"], "member password 2\n"));
  });

  test("owner settings: allowed domains restrict later accounts; an empty string clears them", async () => {
    const set = JSON.parse(expectOk(await cli(owner, ["owner", "settings", "set", "--allowed-domains", "example.com,Example.org", "--json"])).stdout);
    expect(set.allowed_domains).toEqual(expect.arrayContaining(["example.com", "example.org"]));
    const outsider = await cli(
      newUser({ BROKER_ADDR: server.url }),
      ["auth", "register", "--email", "x@elsewhere.net", "--password-stdin"],
      "outsider password\n",
    );
    expect(outsider.exitCode).toBe(1);
    expect(outsider.stderr).toContain("403");
    expect(expectOk(await cli(owner, ["owner", "settings", "set", "--allowed-domains", ""])).stdout).toContain("(any");
    expect(JSON.parse(expectOk(await cli(owner, ["owner", "settings", "get", "--json"])).stdout).allowed_domains).toEqual([]);
  });

  test("services: enable, disable, remove, and flag checks before any request", async () => {
    expectOk(await cli(owner, ["service", "add", "*.example.net", "--auth", "header", "--header", "X-Api-Key", "--token", "API_KEY", "--prefix", "Token "]));
    expectOk(await cli(owner, ["service", "disable", "*.example.net"]));
    expect(expectOk(await cli(owner, ["service", "list"])).stdout).toMatch(/\*\.example\.net\s+header x-api-key: Token <API_KEY>\s+no/i);
    expectOk(await cli(owner, ["service", "enable", "*.example.net"]));
    expectOk(await cli(owner, ["service", "remove", "*.example.net"]));
    expect(expectOk(await cli(owner, ["service", "list"])).stdout).not.toContain("example.net");
    const bad = await offline(["service", "add", "x.example.com", "--auth", "bearer"]); // refused before any request
    expect(bad).toMatchObject({ exitCode: 2 });
    expect(bad.stderr).toContain("needs --token");
    const dup = await cli(owner, ["service", "add", "api.example.com", "--auth", "passthrough"]);
    expect(dup.exitCode).toBe(1);
    expect(dup.stderr).toContain("409");
  });

  test("vault delete asks first, forgets the current vault, and reports clear errors", async () => {
    expectOk(await cli(owner, ["vault", "create", "scratch"]));
    expectOk(await cli(owner, ["vault", "use", "scratch"]));
    expect((await cli(owner, ["vault", "delete", "scratch"])).stderr).toContain("--yes");
    expectOk(await cli(owner, ["vault", "delete", "scratch", "--yes"]));
    const none = await cli(owner, ["credential", "list"]);
    expect(none.exitCode).toBe(1);
    expect(none.stderr).toContain("no vault selected");
    expect(none.stderr).toContain("broker vault use");
    const missing = await cli(owner, ["vault", "use", "nope"]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain("broker vault list");
    expectOk(await cli(owner, ["vault", "use", "demo"]));
  });
});

describe("broker CLI on a terminal", () => {
  test("prompts hide passwords and credential values; confirmation is typed", async () => {
    const person = newUser({ BROKER_ADDR: server.url });
    const mismatch = await cliOnTerminal(
      person,
      ["auth", "register", "--email", "tty@example.com"],
      [
        ["New password: ", "terminal pw 1\r"],
        ["Repeat the new password: ", "terminal pw 2\r"],
      ],
    );
    expect(mismatch.exitCode).toBe(1);
    expect(mismatch.stdout).toContain("entries differ");
    const reg = await cliOnTerminal(
      person,
      ["auth", "register", "--email", "tty@example.com"],
      [
        ["New password: ", "terminal pw 1\r"],
        ["Repeat the new password: ", "terminal pw 1\r"],
      ],
    );
    expect(reg.stdout).toContain("Logged in as tty@example.com");
    expect(reg.stdout).not.toContain("terminal pw");
    expect((await cliOnTerminal(person, ["auth", "login", "--email", "tty@example.com"], [["Password: ", "terminal pw 1\r"]])).exitCode).toBe(0);

    expectOk(await cli(person, ["vault", "create", "tty-vault"]));
    expectOk(await cli(person, ["vault", "use", "tty-vault"]));
    const set = await cliOnTerminal(person, ["credential", "set", "TTY_KEY"], [["Value for TTY_KEY (input hidden): ", `${SECRET}\r`]]);
    expect(set.exitCode).toBe(0);
    expect(set.stdout).toContain("Set TTY_KEY in vault tty-vault");
    expect(expectOk(await cli(person, ["credential", "get", "TTY_KEY"], undefined, { reveals: true })).stdout).toBe(`${SECRET}\n`);

    const refused = await cliOnTerminal(person, ["vault", "delete", "tty-vault"], [["Type its name to confirm: ", "wrong\r"]]);
    expect(refused.exitCode).toBe(1);
    const deleted = await cliOnTerminal(person, ["vault", "delete", "tty-vault"], [["Type its name to confirm: ", "tty-vault\r"]]);
    expect(deleted.stdout).toContain("Deleted vault tty-vault.");
  });
});

describe("broker CLI without a server", () => {
  test("a refused connection names the address and suggests `broker server`", async () => {
    const addr = `http://127.0.0.1:${freePort()}`;
    const r = await cli(newUser({ BROKER_ADDR: addr }), ["vault", "list"]);
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`is the server running at ${addr}? start it with \`broker server\``);
  });

  test("every command has --help", async () => {
    const paths = [
      ["auth"],
      ["auth", "register"],
      ["auth", "login"],
      ["auth", "logout"],
      ["auth", "sessions", "list"],
      ["auth", "sessions", "revoke"],
      ["account", "change-password"],
      ["account", "whoami"],
      ["vault", "create"],
      ["vault", "list"],
      ["vault", "delete"],
      ["vault", "use"],
      ["vault", "invite"],
      ["vault", "join"],
      ["agent", "invite"],
      ["agent", "list"],
      ["agent", "revoke"],
      ["credential", "set"],
      ["credential", "get"],
      ["credential", "list"],
      ["credential", "delete"],
      ["service", "add"],
      ["service", "list"],
      ["service", "enable"],
      ["service", "disable"],
      ["service", "remove"],
      ["owner", "settings", "get"],
      ["owner", "settings", "set"],
    ];
    for (const [i, path] of paths.entries()) {
      // The first through the binary's own entry point; the rest run the same main() in process.
      const r = i === 0 ? await cli(newUser(), [...path, "--help"]) : await offline([...path, "--help"]);
      expect({ path, exitCode: r.exitCode }).toEqual({ path, exitCode: 0 });
      expect(r.stdout).toContain(`USAGE broker ${path.join(" ")}`);
    }
  });
});

describe("leaks", () => {
  // Runs last (bun runs a file's tests in order): covers every command in this file.
  test("no CLI output but the reveals, and no server log line, holds the secret or a password", () => {
    expect(outputs.length).toBeGreaterThan(50);
    expect(server.logs()).toContain('"event":"listening"');
    for (const text of [...outputs, ...server.logs().split("\n")]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(OWNER_PASSWORD);
      expect(text).not.toContain("member password");
      expect(text).not.toContain("terminal pw");
    }
  });
});
