// Attacks on `broker secret-store …`, `credential set --ref` and `doctor` (issue 36), the CLI run from source
// against an in-process broker and the Vault stand-in: does any command print an auth secret read from
// standard input (a Vault token, an AppRole's ids, AWS keys, an Azure client secret, a service-account key
// file's private key) when the broker refuses, when the CLI refuses before sending, with --json, or in
// `doctor`'s check of the connections? And a value pasted where a reference belongs: never echoed.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { generateKeyPairSync } from "node:crypto";
import { startVaultServer, type TestVaultServer } from "../helpers/secret-stores/vault-server.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

const ROOT = resolve(import.meta.dir, "..", "..");
const TOKEN = `hvs.CLI3-${crypto.randomUUID()}`;
const TOKEN2 = `hvs.CLI3b-${crypto.randomUUID()}`;
const ROLE_ID = `role-id-${crypto.randomUUID()}`;
const SECRET_ID = `secret-id-${crypto.randomUUID()}`;
const EXTRA_LINE = `extra-line-${crypto.randomUUID()}`;
const AWS_KEY_ID = `AKIA${crypto.randomUUID().replaceAll("-", "").slice(0, 16).toUpperCase()}`;
const AWS_SECRET = `aws-secret-${crypto.randomUUID()}`;
const AZURE_SECRET = `azure-secret-${crypto.randomUUID()}`;
const VALUE = `store-value-${crypto.randomUUID()}`;
const PASTED = `sk_live_${crypto.randomUUID().replaceAll("-", "")}`;
const KEY_MATERIAL = `MIIEvQIBADANBgkqhkiG9w0BAQEFAASC${crypto.randomUUID().replaceAll("-", "")}`;
const SECRETS = [TOKEN, TOKEN2, ROLE_ID, SECRET_ID, EXTRA_LINE, AWS_KEY_ID, AWS_SECRET, AZURE_SECRET, VALUE, PASTED, KEY_MATERIAL];

let broker: Broker;
let store: TestVaultServer;
let home: string;
const outputs: { args: string; text: string }[] = [];

async function cli(args: string[], stdin?: string, env: Record<string, string> = {}) {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, BROKER_CONFIG_DIR: join(home, "config"), BROKER_ADDR: broker.apiUrl, ...env },
    stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  outputs.push({ args: args.join(" "), text: `${stdout}\n${stderr}` });
  return { code, stdout, stderr, all: `${stdout}\n${stderr}` };
}

const vaultArgs = (name: string, ...extra: string[]) => [
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
  store.addToken(TOKEN, { ttlSeconds: 0 });
  store.put("apps/db", { v: VALUE });
  broker = await startBroker({ caPem: store.pki.caPem });
  home = mkdtempSync(join(tmpdir(), "broker-cli-attacks-3-"));
  const login = await cli(["auth", "login", "--email", "owner@example.com", "--password-stdin"], "correct horse battery\n");
  expect(login.code).toBe(0);
  expect((await cli(["vault", "use", broker.vault])).code).toBe(0);
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await store?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

describe("secrets piped on standard input are never printed", () => {
  test("refusals before anything is sent: a bad flag, too many lines, a missing line", async () => {
    const tries = [
      await cli(["secret-store", "add", "x1", "--kind", "vault", "--address", "https://v.example", "--refresh", "soon"], `${TOKEN}\n`),
      await cli(
        ["secret-store", "add", "x2", "--kind", "vault", "--address", "https://v.example", "--auth", "approle"],
        `${ROLE_ID}\n${SECRET_ID}\n${EXTRA_LINE}\n`,
      ),
      await cli(["secret-store", "add", "x3", "--kind", "aws", "--region", "eu-west-1", "--auth", "keys"], `${AWS_KEY_ID}\n`),
      await cli(
        ["secret-store", "add", "x4", "--kind", "aws", "--region", "eu-west-1", "--auth", "keys"],
        `${AWS_KEY_ID}\n${AWS_SECRET}\n${EXTRA_LINE}\n${TOKEN}\n`,
      ),
      await cli(["secret-store", "add", "x5", "--kind", "vault", "--auth", "token"], `${TOKEN}\n`), // no --address
      await cli(["secret-store", "add", "x6", "--kind", "azure", "--vault-url", "https://k.vault.azure.net", "--tenant", "t.example"], `${AZURE_SECRET}`),
    ];
    for (const t of tries) {
      expect(t.code).not.toBe(0);
      for (const s of SECRETS) expect(t.all).not.toContain(s);
    }
  });

  test("the broker's refusals: a bad setting, a vault that does not exist, a name taken, a move without the auth", async () => {
    const tries = [
      await cli(vaultArgs("y1", "--refresh", "5"), TOKEN),
      await cli(vaultArgs("y2", "--vault", "no-such-vault"), TOKEN),
      await cli(["secret-store", "add", "y3", "--kind", "vault", "--address", "http://plain.example"], TOKEN),
      await cli(
        ["secret-store", "add", "y4", "--kind", "aws", "--region", "eu-west-1", "--endpoint", "ftp://x.example", "--auth", "keys"],
        `${AWS_KEY_ID}\n${AWS_SECRET}\n`,
      ),
      await cli(
        ["secret-store", "add", "y5", "--kind", "azure", "--vault-url", "https://k.vault.azure.net", "--tenant", "bad tenant!", "--client-id", "c"],
        AZURE_SECRET,
      ),
    ];
    for (const t of tries) {
      expect(t.code).not.toBe(0);
      for (const s of SECRETS) expect(t.all).not.toContain(s);
    }
    // A connection that works, then: taken again, changed with a bad refresh and a new token, moved without its auth.
    expect((await cli(vaultArgs("good", "--json"), TOKEN)).code).toBe(0);
    const again = [
      await cli(vaultArgs("good"), TOKEN),
      await cli(["secret-store", "set", "good", "--auth", "token", "--refresh", "5"], TOKEN2),
      await cli(["secret-store", "set", "good", "--address", "https://elsewhere.example:8200"]),
      await cli(["secret-store", "set", "good", "--auth", "approle"], `${ROLE_ID}\n`),
    ];
    for (const t of again) {
      expect(t.code).not.toBe(0);
      for (const s of SECRETS) expect(t.all).not.toContain(s);
    }
  });

  test("a service-account key file whose JSON or project is refused: its private key is never printed", async () => {
    const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 1024 });
    const pem = privateKey
      .export({ type: "pkcs8", format: "pem" })
      .toString()
      .replace(/\n[^\n]+\n/, `\n${KEY_MATERIAL}\n`);
    const file = join(home, "sa.json");
    const broken = join(home, "sa-broken.json");
    writeFileSync(file, JSON.stringify({ type: "service_account", client_email: "r@p.iam.gserviceaccount.com", private_key_id: "k", private_key: pem }));
    writeFileSync(broken, `{"type":"service_account","private_key":"${KEY_MATERIAL}", "client_email": 4`);
    const tries = [
      await cli(["secret-store", "add", "g1", "--kind", "google", "--project", "NOT A PROJECT", "--key-file", file]),
      await cli(["secret-store", "add", "g2", "--kind", "google", "--project", "my-project-1", "--key-file", broken]),
      await cli(["secret-store", "add", "g3", "--kind", "vault", "--address", "https://v.example", "--ca-file", file], TOKEN),
    ];
    for (const t of tries) {
      expect(t.code).not.toBe(0);
      for (const s of SECRETS) expect(t.all).not.toContain(s);
    }
  });

  test("--json views, show, list, check and credential list hold no auth secret and no value", async () => {
    expect((await cli(["secret-store", "share", "good", broker.vault])).code).toBe(0);
    expect((await cli(["credential", "set", "DB", "--ref", "good:apps/db#v"])).code).toBe(0);
    const views = [
      await cli(["secret-store", "show", "good", "--json"]),
      await cli(["secret-store", "show", "good"]),
      await cli(["secret-store", "list", "--json"]),
      await cli(["secret-store", "check", "good", "--json"]),
      await cli(["credential", "list", "--json"]),
      await cli(["credential", "list"]),
    ];
    expect(views[0]!.stdout).toContain("good");
    expect(views[3]!.code).toBe(0);
    for (const t of views) for (const s of SECRETS) expect(t.all).not.toContain(s);
  });

  test("doctor checks the connections through the running broker, naming failures in the broker's words only", async () => {
    // A second reference whose read the store refuses with an answer that quotes the token (the stand-in's errors do).
    expect((await cli(["credential", "set", "GONE", "--ref", "good:apps/missing#v"])).code).toBe(0);
    const port = new URL(broker.apiUrl).port;
    const dataDir = mkdtempSync(join(tmpdir(), "broker-cli-attacks-3-doctor-"));
    try {
      const plain = await cli(["doctor"], undefined, { BROKER_PORT: port, BROKER_DATA_DIR: dataDir });
      const json = await cli(["doctor", "--json"], undefined, { BROKER_PORT: port, BROKER_DATA_DIR: dataDir });
      expect(plain.all).toContain("secret store good");
      expect(json.all).toContain("apps/missing");
      for (const t of [plain, json]) for (const s of SECRETS) expect(t.all).not.toContain(s);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test("a value pasted where a reference belongs is refused without echoing it", async () => {
    const tries = [
      await cli(["credential", "set", "PASTED", "--ref", PASTED]),
      await cli(["credential", "set", "PASTED", "--ref", `${PASTED} `]),
      await cli(["credential", "set", "PASTED", "--ref", `good ${PASTED}`]),
      await cli(["credential", "set", "PASTED", "--ref", `Good:${PASTED}`]),
      await cli(["credential", "set", "PASTED", "--ref", "good:apps/db#v", "--version", `${PASTED} x`]),
    ];
    for (const t of tries) {
      expect(t.code).not.toBe(0);
      expect(t.all).not.toContain(PASTED);
    }
  });
});

describe("the end of the file", () => {
  test("no output of any command held a secret, and no broker log line did", () => {
    expect(outputs.length).toBeGreaterThan(20);
    for (const o of outputs)
      for (const s of SECRETS) expect({ command: o.args, leaked: o.text.includes(s) ? s : null }).toEqual({ command: o.args, leaked: null });
    for (const l of broker.logLines) for (const s of SECRETS) expect(l).not.toContain(s);
  });
});
