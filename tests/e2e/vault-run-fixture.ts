// Shared set-up for the `broker vault run` tests with the compiled binary: a compiled server whose
// network guard allows the given loopback addresses and whose upstream roots are the given CAs, an
// owner registered through the CLI, vault "demo" in use, the credential API_KEY and a bearer service
// per host:port. `cli` runs the binary as that owner and keeps what it printed for the leak checks.

import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtBinary, cleanEnv, runBinary, startBinaryServer, tempDir, type RunResult, type ServerProcess } from "../helpers/binary.ts";

export interface VaultRunEnv {
  readonly bin: string;
  readonly server: ServerProcess;
  readonly owner: Record<string, string>;
  /** Everything the CLI printed so far (stdout and stderr of every run). */
  readonly outputs: string[];
  cli(args: string[], stdin?: string, extraEnv?: Record<string, string>): Promise<RunResult>;
}

export function ok(r: RunResult): RunResult {
  if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return r;
}

export async function startVaultRunEnv(opts: { upstreamCas: string[]; allowlist: string; secret: string; services: string[] }): Promise<VaultRunEnv> {
  const bin = builtBinary();
  const dir = tempDir("broker-vault-run-");
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, opts.upstreamCas.join("\n"));
  const server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_NETWORK_ALLOWLIST: opts.allowlist,
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  const owner = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-cli-"), "config") });
  const outputs: string[] = [];
  const cli = async (args: string[], stdin?: string, extraEnv: Record<string, string> = {}) => {
    const r = await runBinary(bin, args, { env: { ...owner, ...extraEnv }, stdin });
    outputs.push(r.stdout, r.stderr);
    return r;
  };
  ok(await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], "correct horse battery staple\n"));
  ok(await cli(["vault", "create", "demo"]));
  ok(await cli(["vault", "use", "demo"]));
  ok(await cli(["credential", "set", "API_KEY"], `${opts.secret}\n`));
  for (const host of opts.services) ok(await cli(["service", "add", host, "--auth", "bearer", "--token", "API_KEY"]));
  return { bin, server, owner, outputs, cli };
}
