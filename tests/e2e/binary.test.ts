// The compiled binary, run as an operator would: from a directory with no node_modules.

import { describe, expect, test } from "bun:test";
import { statSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { cleanEnv, isolatedBinary, runBinary, startBinaryServer, tempDir } from "../helpers/binary.ts";

const { bin, dir } = isolatedBinary();

describe("compiled binary", () => {
  test("--version prints the package version", async () => {
    const r = await runBinary(bin, ["--version"], { env: cleanEnv({}), cwd: dir });
    expect(r).toMatchObject({ exitCode: 0, stdout: `${pkg.version}\n` });
  });

  test("server --help lists every BROKER_* setting", async () => {
    const r = await runBinary(bin, ["server", "--help"], { env: cleanEnv({}), cwd: dir });
    expect(r.exitCode).toBe(0);
    for (const name of [
      "BROKER_DATA_DIR",
      "BROKER_PORT",
      "BROKER_PROXY_PORT",
      "BROKER_NETWORK_ALLOWLIST",
      "BROKER_RATELIMIT_PROFILE",
      "BROKER_MASTER_PASSWORD",
    ]) {
      expect(r.stdout).toContain(name);
    }
    expect(r.stdout).not.toContain("\u001b["); // no colour codes when piped
  });

  test("server answers its health endpoint and creates a private data directory", async () => {
    const data = join(tempDir(), "data");
    await using server = await startBinaryServer(bin, cleanEnv({ BROKER_DATA_DIR: data }), dir);
    const res = await fetch(`${server.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok", version: pkg.version, database: { backend: "sqlite", reachable: true, audit_queued: 0 } });
    expect(statSync(data).mode & 0o777).toBe(0o700);
    expect(statSync(join(data, "broker.db")).mode & 0o777).toBe(0o600);
  });

  test("invalid settings are all reported at once and the server does not start", async () => {
    const r = await runBinary(bin, ["server"], {
      env: cleanEnv({ BROKER_PORT: "70000", BROKER_LOG_LEVEL: "loud", BROKER_NETWORK_ALLOWLIST: "10.0.0.0/33" }),
      cwd: dir,
    });
    expect(r.exitCode).toBe(2);
    for (const name of ["BROKER_PORT", "BROKER_LOG_LEVEL", "BROKER_NETWORK_ALLOWLIST"]) expect(r.stderr).toContain(name);
  });

  test("an unknown command fails with a pointer to the commands and exit 2", async () => {
    const r = await runBinary(bin, ["frobnicate"], { env: cleanEnv({}), cwd: dir });
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toBe('error: unknown command "frobnicate"\nsee `broker --help` for the commands\n');
  });
});

describe("master password through the binary", () => {
  const password = "correct horse battery staple";

  test("set, refuse to start without it, start with it, change, remove", async () => {
    const data = join(tempDir(), "data");
    const env = cleanEnv({ BROKER_DATA_DIR: data });

    const set = await runBinary(bin, ["master-password", "set", "--password-stdin"], { env, stdin: `${password}\n`, cwd: dir });
    expect(set.exitCode).toBe(0);

    const locked = await runBinary(bin, ["server"], { env: { ...env, BROKER_PORT: "0" }, cwd: dir });
    expect(locked.exitCode).not.toBe(0);
    expect(locked.stderr).toContain("master password");

    const wrong = await runBinary(bin, ["server"], { env: { ...env, BROKER_PORT: "0", BROKER_MASTER_PASSWORD: "not it at all" }, cwd: dir });
    expect(wrong.exitCode).not.toBe(0);
    expect(wrong.stderr).toContain("wrong master password");
    expect(wrong.stderr).not.toContain("not it at all");

    {
      await using server = await startBinaryServer(bin, { ...env, BROKER_MASTER_PASSWORD: password }, dir);
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      expect(server.logs()).not.toContain(password);
    }

    const next = "a different long passphrase";
    const change = await runBinary(bin, ["master-password", "change", "--password-stdin"], { env, stdin: `${password}\n${next}\n`, cwd: dir });
    expect(change.exitCode).toBe(0);
    const old = await runBinary(bin, ["server"], { env: { ...env, BROKER_PORT: "0", BROKER_MASTER_PASSWORD: password }, cwd: dir });
    expect(old.stderr).toContain("wrong master password");

    const remove = await runBinary(bin, ["master-password", "remove"], { env: { ...env, BROKER_MASTER_PASSWORD: next }, cwd: dir });
    expect(remove.exitCode).toBe(0);
    await using plain = await startBinaryServer(bin, env, dir);
    expect((await fetch(`${plain.url}/health`)).status).toBe(200);
  });

  test("without a terminal or --password-stdin, set fails with a hint", async () => {
    const env = cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data") });
    const r = await runBinary(bin, ["master-password", "set"], { env, cwd: dir });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("--password-stdin");
  });
});
