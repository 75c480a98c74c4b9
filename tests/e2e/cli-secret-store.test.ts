// `broker secret-store …`, `credential set --ref`, `credential list`, `proposal approve --ref` and `doctor`
// as the compiled binary against a compiled server and the Vault/OpenBao test server (HTTPS with its own CA,
// given to the connection by --ca-file; on 127.0.0.1, so BROKER_ALLOW_PRIVATE_RANGES=true): a connection
// added with its token piped on stdin, listed and shown; a credential pointed at a secret in it, listed with
// its last refresh and the version seen; `check` ok, then a secret gone from the store makes `check` and
// `doctor` name the failing reference and exit non-zero; a new auth replaces the old; a proposal's slot
// answered with a reference; refusals that say what to do. No secret value, nor the Vault token, appears in
// any CLI output.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtBinary, cleanEnv, expectOk, freePort, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { runInProcess } from "../helpers/cli-offline.ts";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";

const bin = builtBinary();
const TOKEN = `hvs.cli-first-${crypto.randomUUID()}`;
const TOKEN2 = `hvs.cli-second-${crypto.randomUUID()}`;
const VALUE1 = `sk-store-one-${crypto.randomUUID()}`;
const VALUE2 = `sk-store-two-${crypto.randomUUID()}`;
const OTHER = `sk-store-other-${crypto.randomUUID()}`;
const TYPED = `sk-typed-${crypto.randomUUID()}`;
const SECRETS: string[] = [TOKEN, TOKEN2, VALUE1, VALUE2, OTHER, TYPED];

let store: TestVaultServer;
let server: ServerProcess;
let port = 0;
const dir = tempDir("broker-cli-secret-store-");
const ownerConfig = join(dir, "owner-config");
const outputs: string[] = [];
const owner = () => cleanEnv({ BROKER_CONFIG_DIR: ownerConfig, BROKER_ADDR: server.url });

async function cli(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: opts.env ?? owner(), stdin: opts.stdin, cwd: dir });
  outputs.push(r.stdout, r.stderr);
  return r;
}

async function offline(args: string[]): Promise<RunResult> {
  const r = await runInProcess(args);
  outputs.push(r.stdout, r.stderr);
  return r;
}

/** The broker reads a value on a person's demand at most every 5 s: wait that out before a check that must read again. */
const pastReadFloor = () => Bun.sleep(5_300);

const addVault = (name: string, ...extra: string[]) => [
  "secret-store",
  "add",
  name,
  "--kind",
  "vault",
  "--address",
  store.address,
  "--ca-file",
  store.caFile,
  ...extra,
];

beforeAll(async () => {
  store = await startVaultServer();
  store.addToken(TOKEN);
  store.put("apps/billing", { api_key: VALUE1, other: OTHER });
  port = freePort();
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_PORT: String(port),
      BROKER_PUBLIC_URL: `http://127.0.0.1:${port}`,
      BROKER_ALLOW_PRIVATE_RANGES: "true",
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  expectOk(await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], { stdin: "secret store owner pw 1\n" }));
  expectOk(await cli(["vault", "create", "demo"]));
  expectOk(await cli(["vault", "use", "demo"]));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await store?.close();
});

describe("broker secret-store: refusals before anything is sent", () => {
  test("an unknown kind, a missing --address, a flag of another kind or method: exit 2, saying what to give", async () => {
    const kind = await cli(["secret-store", "add", "x", "--kind", "hashicorp", "--address", "https://a.example"]);
    expect(kind.exitCode).toBe(2);
    expect(kind.stderr).toContain("invalid value for argument: --kind (hashicorp). Expected one of: vault, aws, google, azure.");
    const address = await cli(["secret-store", "add", "x", "--kind", "vault"], { stdin: `${TOKEN}\n` });
    expect(address.exitCode).toBe(2);
    expect(address.stderr).toBe(
      "error: --kind vault needs --address\nhint: e.g. broker secret-store add <name> --kind vault --address https://vault.example.com:8200\n",
    );
    const stray = await offline(["secret-store", "add", "x", "--kind", "vault", "--address", "https://a.example", "--region", "eu-west-1"]);
    expect(stray.exitCode).toBe(2);
    expect(stray.stderr).toContain("error: --region is a setting of --kind aws, not of vault");
    const jwt = await offline(["secret-store", "add", "x", "--kind", "vault", "--address", "https://a.example", "--auth", "jwt"]);
    expect(jwt.exitCode).toBe(2);
    expect(jwt.stderr).toContain("error: --auth jwt needs --role and --token-file");
    const method = await offline(["secret-store", "add", "x", "--kind", "aws", "--region", "eu-west-1", "--auth", "approle"]);
    expect(method.exitCode).toBe(2);
    expect(method.stderr).toContain("error: --auth for --kind aws is keys or environment");
  });

  test("a secret is never a flag: --token is refused without repeating it", async () => {
    const r = await cli([...addVault("x"), "--token", TOKEN]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("--token does not exist: secrets are never taken on the command line");
    expect(r.stderr).not.toContain(TOKEN);
  });

  test("an empty token on stdin saves nothing; a bad address is named against its flag", async () => {
    const empty = await cli(addVault("x"), { stdin: "" });
    expect(empty.exitCode).toBe(1);
    expect(empty.stderr).toContain("error: no Vault token was given: nothing was saved");
    const plain = await cli(["secret-store", "add", "x", "--kind", "vault", "--address", "http://vault.example.com"], { stdin: TOKEN });
    expect(plain.exitCode).toBe(2);
    expect(plain.stderr).toContain("error: --address must be an https:// URL");
    expect(JSON.parse(expectOk(await cli(["secret-store", "list", "--json"])).stdout)).toEqual([]);
  });

  test("every subcommand has help", async () => {
    for (const sub of ["add", "list", "show", "set", "remove", "share", "unshare", "check"]) {
      const r = expectOk(await offline(["secret-store", sub, "--help"]));
      expect(r.stdout).toContain(`USAGE broker secret-store ${sub}`);
    }
    expect(expectOk(await offline(["secret-store", "add", "--help"])).stdout).toContain(
      "--auth approle             two lines: the role id, then the secret id",
    );
    expect(expectOk(await offline(["credential", "set", "--help"])).stdout).toContain("--ref=<connection:path#field>");
    expect(expectOk(await offline(["proposal", "approve", "--help"])).stdout).toContain("--ref=<KEY=connection:path#field>");
  });
});

describe("a connection and credentials that refer to it", () => {
  test("add reads the token from stdin, and says how to share and use it", async () => {
    const r = expectOk(await cli(addVault("team", "--refresh", "60", "--grace", "30"), { stdin: `${TOKEN}\n` }));
    expect(r.stdout).toContain(
      `Added secret store connection team: HashiCorp Vault / OpenBao (KV v2) at ${store.address}, mount secret, signing in with a Vault token;`,
    );
    expect(r.stdout).toContain("broker secret-store share team <vault>");
    const dup = await cli(addVault("team"), { stdin: TOKEN });
    expect(dup.exitCode).toBe(1);
    expect(dup.stderr).toContain("a secret store connection named team already exists");
    expect(dup.stderr).toContain("hint: pick another name");
    const narrowed = expectOk(await cli(["secret-store", "share", "team", "demo", "--path", "apps/", "--path", "shared/"])).stdout;
    expect(narrowed).toContain("Shared team with vault demo for paths starting with apps/, shared/ (now the owner's, shared with demo).");
    expect(expectOk(await cli(["secret-store", "share", "team", "demo"])).stdout).toContain(
      "Shared team with vault demo, every path (now the owner's, shared with demo).",
    );
  });

  test("list and show: settings, auth method, vaults, status", async () => {
    const list = expectOk(await cli(["secret-store", "list"])).stdout;
    expect(list.split("\n")[0]).toMatch(/^NAME\s+KIND\s+WHERE\s+VAULTS\s+REFS\s+LAST REFRESH\s+LAST ERROR$/);
    expect(list).toMatch(/^team\s+vault\s+https:\/\/127\.0\.0\.1:\d+, mount secret\s+demo\s+0\s+never\s+-$/m);
    const [json] = JSON.parse(expectOk(await cli(["secret-store", "list", "--json"])).stdout);
    expect(json).toMatchObject({
      name: "team",
      kind: "vault",
      vault: null,
      shared_with: ["demo"],
      auth: { method: "token" },
      refresh_seconds: 60,
      grace_seconds: 30,
    });
    const show = expectOk(await cli(["secret-store", "show", "team"])).stdout;
    expect(show).toContain("Connection team: HashiCorp Vault / OpenBao (KV v2)");
    expect(show).toContain(`  address       ${store.address}`);
    expect(show).toContain("  ca_pem        extra root certificates (PEM)");
    expect(show).toContain("  auth          a Vault token");
    expect(show).toContain("  vaults        the owner's, shared with demo");
    expect(show).toContain("  refresh       every 60 s; the last value serves 30 s more while the store is unreachable");
    expect(show).toContain("No credential refers to team yet");
    const missing = await cli(["secret-store", "show", "nope"]);
    expect(missing.exitCode).toBe(1);
    expect(missing.stderr).toContain("hint: `broker secret-store list` shows the connections you may see");
  });

  test("credential set --ref reads nothing from stdin; list shows the reference, its last refresh and the version seen", async () => {
    const set = expectOk(await cli(["credential", "set", "API_KEY", "--ref", "team:apps/billing#api_key"], { stdin: "not read\n" }));
    expect(set.stdout).toContain("Set API_KEY in vault demo to the secret store reference team:apps/billing#api_key.");
    expect(set.stdout).toMatch(/Read it: read at \d{4}-\d\d-\d\d \d\d:\d\d UTC, version 1\./);
    expectOk(await cli(["credential", "set", "TYPED_KEY"], { stdin: `${TYPED}\n` }));
    const list = expectOk(await cli(["credential", "list"])).stdout;
    expect(list.split("\n")[0]).toMatch(/^KEY\s+UPDATED\s+REFERENCE\s+LAST REFRESH\s+VERSION SEEN\s+LAST ERROR$/);
    expect(list).toMatch(/^API_KEY\s+\S+ \S+ UTC\s+team:apps\/billing#api_key\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC\s+1\s+-$/m);
    expect(list).toMatch(/^TYPED_KEY\s+\S+ \S+ UTC\s+-\s+-\s+-\s+-$/m);
    const json = JSON.parse(expectOk(await cli(["credential", "list", "--json"])).stdout);
    expect(json.find((c: any) => c.key === "API_KEY").reference).toMatchObject({ text: "team:apps/billing#api_key", version_seen: "1", last_error: null });
    // --reveal shows TYPED_KEY's value (that is its point), so its output is kept apart from the leak check.
    const revealed = expectOk(await runBinary(bin, ["credential", "list", "--reveal"], { env: owner() })).stdout;
    expect(revealed).toMatch(/^API_KEY\s+\S+ \S+ UTC\s+\(in the store\)\s+team:apps\/billing#api_key\s/m);
    expect(revealed).toMatch(new RegExp(`^TYPED_KEY\\s+\\S+ \\S+ UTC\\s+${TYPED}\\s`, "m"));
    for (const s of [TOKEN, VALUE1, OTHER]) expect(revealed).not.toContain(s);
    const get = await cli(["credential", "get", "API_KEY"]);
    expect(get.exitCode).toBe(1);
    expect(get.stderr).toContain("API_KEY refers to team:apps/billing#api_key: its value lives in that store");
  });

  test("credential set --ref refusals: a reference that does not parse, --version alone, a connection the vault may not use", async () => {
    const bad = await cli(["credential", "set", "K", "--ref", VALUE1]);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain("error: --ref: a reference starts with its connection's name and a colon");
    expect(bad.stderr).not.toContain(VALUE1);
    const version = await offline(["credential", "set", "K", "--version", "3"]);
    expect(version.exitCode).toBe(2);
    expect(version.stderr).toContain("error: --version goes with --ref");
    const unknown = await cli(["credential", "set", "K", "--ref", "elsewhere:apps/billing#api_key"]);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toContain("error: --ref: this vault has no secret store connection named elsewhere");
    expect(unknown.stderr).toContain("hint: `broker secret-store list` shows the connections you may see");
  });

  test("check reads every reference now: ok, and a rotated secret's new version", async () => {
    const ok = expectOk(await cli(["secret-store", "check", "team"]));
    expect(ok.stdout).toMatch(/^ok\s+demo\s+API_KEY\s+team:apps\/billing#api_key\s+\S+ \S+ UTC\s+1\s+-$/m);
    expect(ok.stdout).toContain("All 1 reference(s) through team read.");
    store.put("apps/billing", { api_key: VALUE2, other: OTHER });
    await pastReadFloor();
    expect(expectOk(await cli(["secret-store", "check", "team"])).stdout).toMatch(/^ok\s+demo\s+API_KEY\s+\S+\s+\S+ \S+ UTC\s+2\s+-$/m);
    const show = expectOk(await cli(["secret-store", "show", "team"])).stdout;
    expect(show).toMatch(/^ok\s+demo\s+API_KEY\s+team:apps\/billing#api_key\s+\S+ \S+ UTC\s+2\s+-$/m);
  });

  test("a secret gone from the store: check exits 1 naming the reference and why; doctor reports it", async () => {
    store.deleteVersion("apps/billing", 2);
    await pastReadFloor();
    const r = await cli(["secret-store", "check", "team"]);
    expect(r.exitCode).toBe(1);
    expect(r.stdout).toMatch(/^failed\s+demo\s+API_KEY\s+team:apps\/billing#api_key\s+/m);
    expect(r.stderr).toContain("error: 1 of 1 reference(s) through team failed: demo/API_KEY (team:apps/billing#api_key)");
    expect(r.stderr).toContain("hint: fix the secret in the store");
    const json = await cli(["secret-store", "check", "team", "--json"]);
    expect(json.exitCode).toBe(1);
    const body = JSON.parse(json.stdout);
    expect(body.ok).toBe(false);
    expect(body.references[0].reference.last_error).toEqual(expect.any(String));
    expect(expectOk(await cli(["credential", "list"])).stdout).not.toMatch(/^API_KEY\s+.*\s-$/m);
    const doctor = await cli(["doctor", "--json"], { env: doctorEnv() });
    const finding = JSON.parse(doctor.stdout).checks.find((c: any) => c.check === "secret store team");
    expect(doctor.exitCode).toBe(1);
    expect(finding).toMatchObject({ level: "problem" });
    expect(finding.message).toContain("1 of 1 reference(s) fail: demo/API_KEY (team:apps/billing#api_key): ");
    expect(finding.fix).toContain("broker secret-store check team");
    store.put("apps/billing", { api_key: VALUE2, other: OTHER });
    await pastReadFloor();
    const healed = await cli(["doctor"], { env: doctorEnv() });
    expect(healed.stdout).toMatch(/^ok\s+secret store team: HashiCorp Vault \/ OpenBao \(KV v2\); all 1 reference\(s\) read$/m);
  });

  test("set: a new auth replaces the old (its token piped), settings change, nothing given is refused", async () => {
    store.addToken(TOKEN2);
    store.revoke(TOKEN);
    await pastReadFloor();
    expect((await cli(["secret-store", "check", "team"])).exitCode).toBe(1);
    const r = expectOk(await cli(["secret-store", "set", "team", "--auth", "token", "--refresh", "120"], { stdin: TOKEN2 }));
    expect(r.stdout).toContain("Changed team:");
    expect(r.stdout).toContain("every 120 s, grace 30 s.");
    expectOk(await cli(["secret-store", "check", "team"])); // a new auth reads every value again at once
    const moved = await cli(["secret-store", "set", "team", "--namespace", "ns1"]);
    expect(moved.exitCode).toBe(2);
    expect(moved.stderr).toContain("error: changing namespace needs the auth again");
    expect(moved.stderr).toContain("hint: give --auth <method> with the change");
    const nothing = await cli(["secret-store", "set", "team"]);
    expect(nothing.exitCode).toBe(2);
    expect(nothing.stderr).toContain("error: nothing to change");
    const detail = await cli(["secret-store", "set", "team", "--role", "r"]);
    expect(detail.exitCode).toBe(2);
    expect(detail.stderr).toContain("error: --role goes with a new auth: give --auth too");
    const range = await cli(["secret-store", "set", "team", "--refresh", "5"]);
    expect(range.exitCode).toBe(2);
    expect(range.stderr).toContain("error: --refresh must be 10 to 86400");
  });

  test("proposal approve answers a slot with --ref, the other typed on stdin", async () => {
    const inv = expectOk(await cli(["agent", "invite", "--name", "filer", "--role", "proxy"]));
    const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
    const agentToken = ((await (await fetch(url, { method: "POST" })).json()) as { token: string }).token;
    const filed = await fetch(`${server.url}/v1/proposals`, {
      method: "POST",
      headers: { authorization: `Bearer ${agentToken}`, "x-vault": "demo", "content-type": "application/json" },
      body: JSON.stringify({
        message: "need both",
        credentials: [
          { action: "set", key: "OTHER_KEY", description: "from the store" },
          { action: "set", key: "PASTED_KEY", description: "typed" },
        ],
      }),
    });
    expect(filed.status).toBe(201);
    const id = String(((await filed.json()) as { id: number }).id);
    const stray = await cli(["proposal", "approve", id, "--ref", "NOPE=team:apps/billing#other"]);
    expect(stray.exitCode).toBe(2);
    expect(stray.stderr).toContain(`error: NOPE is not a credential slot of proposal ${id}`);
    expect(stray.stderr).toContain("hint: its slots: OTHER_KEY, PASTED_KEY");
    const r = expectOk(await cli(["proposal", "approve", id, "--ref", "OTHER_KEY=team:apps/billing#other"], { stdin: `${TYPED}\n` }));
    expect(r.stdout).toBe(`Approved proposal ${id}\n  OTHER_KEY refers to team:apps/billing#other\n`);
    const json = JSON.parse(expectOk(await cli(["credential", "list", "--json"])).stdout);
    expect(json.find((c: any) => c.key === "OTHER_KEY").reference).toMatchObject({ text: "team:apps/billing#other" });
    expect(json.find((c: any) => c.key === "PASTED_KEY").reference).toBeUndefined();
    expect(expectOk(await cli(["secret-store", "check", "team"])).stdout).toMatch(/^ok\s+demo\s+OTHER_KEY\s+team:apps\/billing#other\s/m);
  });

  test("remove and unshare are refused while credentials refer to it; then they go", async () => {
    const busy = await cli(["secret-store", "remove", "team"]);
    expect(busy.exitCode).toBe(1);
    expect(busy.stderr).toContain("demo/API_KEY");
    expect(busy.stderr).toContain("hint: `broker secret-store show team` lists the credentials that refer to it");
    expect((await cli(["secret-store", "unshare", "team", "demo"])).exitCode).toBe(1);
    for (const key of ["API_KEY", "OTHER_KEY"]) expectOk(await cli(["credential", "delete", key]));
    expect(expectOk(await cli(["secret-store", "unshare", "team", "demo"])).stdout).toBe("Stopped sharing team with vault demo.\n");
    expect(expectOk(await cli(["secret-store", "remove", "team"])).stdout).toContain("Removed secret store connection team");
    expect(expectOk(await cli(["secret-store"])).stdout).toContain("No secret store connections.");
  });
});

describe("the other kinds' flags", () => {
  const AWS_ID = `AKIA${crypto.randomUUID().replaceAll("-", "").slice(0, 16).toUpperCase()}`;
  const AWS_SECRET = `aws-secret-${crypto.randomUUID()}`;
  const AZURE_SECRET = `azure-secret-${crypto.randomUUID()}`;
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  SECRETS.push(AWS_ID, AWS_SECRET, AZURE_SECRET, pem.split("\n")[1]!);

  test("aws keys (two lines piped, also as a vault's own), aws environment (the owner's only), google's key file, azure's client secret: each accepted", async () => {
    const aws = expectOk(await cli(["secret-store", "add", "prod-aws", "--kind", "aws", "--region", "eu-west-1"], { stdin: `${AWS_ID}\n${AWS_SECRET}\n` }));
    expect(aws.stdout).toContain("Added secret store connection prod-aws: AWS Secrets Manager at region eu-west-1, signing in with AWS access keys;");
    const three = await cli(["secret-store", "add", "x", "--kind", "aws", "--region", "eu-west-1"], { stdin: `${AWS_ID}\n${AWS_SECRET}\nt\nextra\n` });
    expect(three.exitCode).toBe(1);
    expect(three.stderr).toContain("error: --auth keys reads 3 line(s) from standard input; more were piped");
    const env = expectOk(await cli(["secret-store", "add", "env-aws", "--kind", "aws", "--region", "us-east-1", "--auth", "environment"]));
    expect(env.stdout).toContain("signing in with the broker's own AWS environment (keys or web identity); the owner's, shared with no vault yet.");
    const own = expectOk(
      await cli(["secret-store", "add", "own-aws", "--kind", "aws", "--region", "us-east-1", "--vault", "demo"], { stdin: `${AWS_ID}\n${AWS_SECRET}\n` }),
    );
    expect(own.stdout).toContain("signing in with AWS access keys; vault demo's own.");
    const keyFile = join(dir, "sa.json");
    writeFileSync(keyFile, JSON.stringify({ type: "service_account", client_email: "broker@my-project.iam.gserviceaccount.com", private_key: pem }));
    const google = expectOk(await cli(["secret-store", "add", "gcp", "--kind", "google", "--project", "my-project", "--key-file", keyFile]));
    expect(google.stdout).toContain("Google Secret Manager at project my-project, signing in with service account broker@my-project.iam.gserviceaccount.com;");
    const missingFile = await offline(["secret-store", "add", "g2", "--kind", "google", "--project", "my-project", "--key-file", join(dir, "nope.json")]);
    expect(missingFile.exitCode).toBe(2);
    expect(missingFile.stderr).toContain("error: --key-file: cannot read");
    const azure = expectOk(
      await cli(
        [
          "secret-store",
          "add",
          "kv",
          "--kind",
          "azure",
          "--vault-url",
          "https://my-kv.vault.azure.net",
          "--tenant",
          "contoso.onmicrosoft.com",
          "--client-id",
          "app-1",
        ],
        {
          stdin: `${AZURE_SECRET}\n`,
        },
      ),
    );
    expect(azure.stdout).toContain(
      "Azure Key Vault at https://my-kv.vault.azure.net, signing in with client credentials of app-1 in tenant contoso.onmicrosoft.com;",
    );
    const list = expectOk(await cli(["secret-store", "list"])).stdout;
    expect(list).toMatch(/^own-aws\s+aws\s+region us-east-1\s+demo \(own\)\s+0\s+never\s+-$/m);
    const changed = expectOk(await cli(["secret-store", "set", "kv", "--client-id", "app-2", "--tenant", "contoso.onmicrosoft.com"], { stdin: AZURE_SECRET }));
    expect(changed.stdout).toContain("client credentials of app-2");
    for (const name of ["prod-aws", "env-aws", "own-aws", "gcp", "kv"]) expectOk(await cli(["secret-store", "remove", name]));
  });
});

test("no secret value, nor a Vault token, appears in any CLI output", () => {
  const all = outputs.join("\n");
  expect(all.length).toBeGreaterThan(1000);
  for (const s of SECRETS) expect(all).not.toContain(s);
});

/** The doctor's environment: the server's data directory and port, and the owner's login. */
function doctorEnv(): Record<string, string> {
  return cleanEnv({ BROKER_CONFIG_DIR: ownerConfig, BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: String(port), BROKER_ALLOW_PRIVATE_RANGES: "true" });
}
