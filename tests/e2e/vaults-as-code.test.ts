// Vaults as code (issue 39) with the compiled binary: a vault set up by CLI on one broker is exported as YAML (keys,
// never values; the receiver URL hidden), marked managed and applied to a fresh second broker; after the person's
// part (a value, an agent's invite) the two brokers export the same file; a second apply says there is nothing to
// change; --dry-run changes nothing; a managed vault refuses CLI and API edits with the clear message while taking
// a value for a key its file lists; an unknown key in the file is refused with its line.

import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanEnv, expectOk, isolatedBinary, type RunResult, runBinary, type ServerProcess, startSelfAddressedServer, tempDir } from "../helpers/binary.ts";

const { bin, dir } = isolatedBinary();
const SECRET = "sk-live-vault-as-code-e2e-Zq9";
const HOOK = "https://hooks.example.com/services/T000/B000/XXXXsecretpart";
const PASSWORD = "owner password 123";
const MANAGED = "vault pay is managed as code: change its file and run broker apply";
const GITHUB = "https://token.actions.githubusercontent.com";

let a: ServerProcess;
let b: ServerProcess;
const work = tempDir("broker-vac-");
const envA = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-a-"), "config") });
const envB = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-b-"), "config") });
const outputs: string[] = [];

async function cli(env: Record<string, string>, args: string[], stdin?: string): Promise<RunResult> {
  const r = await runBinary(bin, args, { env, stdin, cwd: dir });
  outputs.push(r.stdout, r.stderr);
  return r;
}

async function inviteAgent(env: Record<string, string>, name: string, role: string): Promise<void> {
  const inv = expectOk(await cli(env, ["agent", "invite", "--name", name, "--role", role]));
  const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
  expect((await fetch(url, { method: "POST" })).status).toBe(201);
}

/** The export without its first comment line (it carries the time of writing). */
const body = (yaml: string) => yaml.split("\n").slice(1).join("\n");

beforeAll(async () => {
  [a, b] = await Promise.all([startSelfAddressedServer(bin, dir), startSelfAddressedServer(bin, dir)]);
  for (const [env, server] of [
    [envA, a],
    [envB, b],
  ] as const)
    expectOk(await cli(env, ["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], `${PASSWORD}\n`));
  // The vault, set up by CLI on broker A.
  expectOk(await cli(envA, ["vault", "create", "pay"]));
  expectOk(await cli(envA, ["vault", "use", "pay"]));
  expectOk(await cli(envA, ["credential", "set", "STRIPE_LIVE"], `${SECRET}\n`));
  expectOk(await cli(envA, ["service", "add", "--template", "stripe", "--operations", "read,write", "--key", "STRIPE_LIVE"]));
  expectOk(
    await cli(envA, ["service", "add", "api.example.com", "--auth", "bearer", "--token", "EX_KEY", "--allow", "GET /v1/*", "--description", "internal"]),
  );
  expectOk(await cli(envA, ["vault", "set", "--unmatched-hosts", "deny"]));
  expectOk(await cli(envA, ["budget", "set", "daily-llm", "--tokens", "100000", "--cost", "20"]));
  expectOk(await cli(envA, ["vault", "webhook", "add", HOOK, "--slack"]));
  await inviteAgent(envA, "ci-bot", "proxy");
  // A workload binding to the vault (its issuer is instance configuration, added by the owner on each broker).
  expectOk(await cli(envA, ["workload-issuer", "add", "github", "--issuer", GITHUB, "--audience", "https://broker.example"]));
  expectOk(
    await cli(envA, ["workload-binding", "add", "github", "deploy", "--vault", "pay", "--claim", "repository=org/pay", "--claim", "ref=refs/heads/main"]),
  );
}, 90_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

test("export, then apply on a fresh instance, reproduces the vault; a second apply changes nothing; --dry-run changes nothing", async () => {
  const exported = join(work, "exported.yaml");
  expect(expectOk(await cli(envA, ["export", "--vault", "pay", "-o", exported])).stderr).toBe(`Wrote vault pay to ${exported}.\n`);
  const yaml = readFileSync(exported, "utf8");
  expect(yaml).toStartWith("# Vault file written by broker export at ");
  expect(yaml).toContain("- key: STRIPE_LIVE\n");
  expect(yaml).toContain("url: https://hooks.example.com/services/…\n");
  expect(yaml).not.toContain(SECRET);
  expect(yaml).not.toContain("XXXXsecretpart");
  // The binding is written as a binding; its agent is not listed among the agents (it is made with the binding).
  expect(yaml).toContain("workload_bindings:\n      - issuer: github\n        name: deploy\n");
  expect(yaml).not.toContain("wl-github-deploy");

  // The team's file: managed, the receiver's URL read from the environment.
  const file = join(work, "pay.yaml");
  writeFileSync(file, yaml.replace("managed: false", "managed: true").replace("url: https://hooks.example.com/services/…", "url: ${HOOK_URL}"));
  const withHook = (env: Record<string, string>) => ({ ...env, HOOK_URL: HOOK });
  const onA = expectOk(await cli(withHook(envA), ["apply", "-f", file, "--yes"]));
  expect(onA.stdout).toBe("vault pay:\n  ~ manage vault pay as code: from now on it changes only through broker apply\nApplied 1 change.\n");

  // Broker B: a dry run shows the plan and creates nothing.
  const dry = expectOk(await cli(withHook(envB), ["apply", "-f", file, "--dry-run"]));
  expect(dry.stdout).toContain("  + create vault pay (you are its admin)\n");
  expect(dry.stdout).toContain("  + add service api.stripe.com (template stripe, operations read, write)\n");
  expect(dry.stdout).toMatch(/Dry run: \d+ changes would be made; nothing was changed\.\n$/);
  expect(expectOk(await cli(envB, ["vault", "list", "--json"])).stdout.trim()).toBe("[]");

  // Without --yes and without a terminal, nothing is applied.
  const unasked = await cli(withHook(envB), ["apply", "-f", file]);
  expect(unasked.exitCode).toBe(1);
  expect(unasked.stderr).toContain("pass --yes");

  const first = expectOk(await cli(withHook(envB), ["apply", "-f", file, "--yes"]));
  expect(first.stdout).toContain("  + create vault pay (you are its admin)\n");
  expect(first.stdout).toContain("  ~ unmatched hosts: tunnel → deny\n");
  expect(first.stdout).toContain("  + add service api.example.com (bearer EX_KEY; GET on /v1/*)\n");
  expect(first.stdout).toContain("  + add webhook https://hooks.example.com/services/… (slack)\n");
  expect(first.stdout).toContain("  + add budget daily-llm (the vault: 100000 total tokens, cost 20 per day)\n");
  expect(first.stdout).toContain("  ~ manage vault pay as code: from now on it changes only through broker apply\n");
  expect(first.stdout).toContain(
    "  ! left for you: credential STRIPE_LIVE has no value here: set its value with broker credential set STRIPE_LIVE --vault pay",
  );
  expect(first.stdout).toContain("  ! left for you: agent ci-bot is not on this instance: an agent joins by invite");
  expect(first.stdout).toContain("  ! left for you: workload issuer github is not trusted on this instance: the owner adds it");
  expect(first.stdout).toMatch(/Webhook https:\/\/hooks\.example\.com\/services\/… of vault pay: signing secret whsec_\S+ \(shown once/);
  expect(first.stdout).toMatch(/Applied \d+ changes\.\n$/);

  // The person's part, which a managed vault takes because the file names it: the value and the agent's invite.
  expectOk(await cli(envB, ["vault", "use", "pay"]));
  expectOk(await cli(envB, ["credential", "set", "STRIPE_LIVE"], `${SECRET}\n`));
  await inviteAgent(envB, "ci-bot", "proxy");
  // The owner trusts the issuer on B; the next apply adds the binding (and its agent).
  expectOk(await cli(envB, ["workload-issuer", "add", "github", "--issuer", GITHUB, "--audience", "https://broker.example"]));
  const bound = expectOk(await cli(withHook(envB), ["apply", "-f", file, "--yes"]));
  expect(bound.stdout).toBe(
    "vault pay:\n  + add workload binding github/deploy: repository=org/pay, ref=refs/heads/main → proxy, sessions up to 3600s (its workloads act as agent wl-github-deploy)\nApplied 1 change.\n",
  );

  const again = expectOk(await cli(withHook(envB), ["apply", "-f", file, "--yes"]));
  expect(again.stdout).toBe("No changes: the broker already matches the file.\n");
  const exportA = expectOk(await cli(envA, ["export", "--vault", "pay"])).stdout;
  const exportB = expectOk(await cli(envB, ["export", "--vault", "pay"])).stdout;
  expect(body(exportB)).toBe(body(exportA));
  expect(body(exportB)).toContain("managed: true");
  expect(expectOk(await cli(withHook(envA), ["apply", "-f", file, "--dry-run"])).stdout).toBe("No changes: the broker already matches the file.\n");
}, 60_000);

test("a managed vault refuses CLI and API edits with the clear message, and takes a value for a key its file lists", async () => {
  for (const args of [
    ["service", "remove", "api.example.com"],
    ["vault", "set", "--unmatched-hosts", "tunnel"],
    ["budget", "remove", "daily-llm"],
    ["credential", "delete", "STRIPE_LIVE"],
  ]) {
    const r = await cli(envB, args);
    expect({ args, code: r.exitCode, said: r.stderr.includes(MANAGED), code409: r.stderr.includes("(409 vault_managed)") }).toEqual({
      args,
      code: 1,
      said: true,
      code409: true,
    });
  }
  expectOk(await cli(envB, ["credential", "set", "STRIPE_LIVE"], "rotated-value\n"));
  // Its workload bindings are in the file too: neither added nor removed by hand.
  for (const args of [
    ["workload-binding", "add", "github", "other", "--vault", "pay", "--claim", "repository=org/other"],
    ["workload-binding", "remove", "github", "deploy"],
  ]) {
    const r = await cli(envB, args);
    expect({ args, code: r.exitCode, said: r.stderr.includes(`${MANAGED} (its workload bindings are in the file)`) }).toEqual({ args, code: 1, said: true });
  }
  const login = JSON.parse(readFileSync(join(envB.BROKER_CONFIG_DIR!, "cli.json"), "utf8")) as { token: string };
  const res = await fetch(`${b.url}/v1/vaults/pay`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${login.token}`, "content-type": "application/json" },
    body: JSON.stringify({ unmatched_hosts: "tunnel" }),
  });
  expect(res.status).toBe(409);
  expect(await res.json()).toEqual({ error: "vault_managed", message: MANAGED, vault: "pay" });
});

test("an unknown key in the file is refused with its line, and nothing is applied", async () => {
  const bad = join(work, "bad.yaml");
  writeFileSync(bad, "version: 1\nvaults:\n  pay:\n    services:\n      - host: api.example.com\n        auth: { type: bearer, tokn: EX_KEY }\n");
  const r = await cli(envB, ["apply", "-f", bad, "--yes"]);
  expect(r.exitCode).toBe(2);
  expect(r.stderr).toContain("vaults.pay.services[0].auth.tokn: unknown key (line 6)");
  expect(r.stderr).toContain("nothing was applied");
});

test("no output carries the stored value", () => {
  for (const out of outputs) expect(out.includes(SECRET)).toBe(false);
});
