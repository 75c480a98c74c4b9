// Runs the CLI from source (`bun src/index.ts …`) as a user would, against a broker the test started:
// a private HOME and config directory, BROKER_ADDR set, every output kept for the no-leak checks.

import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "..", "..");

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface SourceCli {
  cli(args: string[], stdin?: string): Promise<CliResult>;
  /** Runs and requires exit 0; returns stdout. */
  ok(args: string[], stdin?: string): Promise<string>;
}

/** `where()` is read at each call: the HOME and the broker usually come from a beforeAll. */
export function sourceCli(where: () => { home: string; apiUrl: string }, outputs: string[]): SourceCli {
  async function cli(args: string[], stdin?: string): Promise<CliResult> {
    const { home, apiUrl } = where();
    const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, BROKER_CONFIG_DIR: join(home, "config"), BROKER_ADDR: apiUrl },
      stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    outputs.push(stdout, stderr);
    return { code, stdout, stderr };
  }
  return {
    cli,
    async ok(args, stdin) {
      const r = await cli(args, stdin);
      if (r.code !== 0) throw new Error(`broker ${args.join(" ")}: exit ${r.code}\n${r.stderr}`);
      return r.stdout;
    },
  };
}
