// The compiled broker with credentials held in secret stores (issue 36), for the e2e tests: a server whose
// upstream roots are the given test CAs and whose network guard lets it reach 127.0.0.1 (the stores and the
// upstreams listen there), an owner registered through the CLI, vault "demo", and agents invited into it
// that run real curl under `broker vault run`. Recording upstreams answer with what they were sent (so the
// broker's echo redaction is exercised) and can refuse chosen credential values with 401.
// Everything the owner's API calls and the agents' commands got back is kept for the leak checks.

import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtBinary, cleanEnv, runBinary, startBinaryServer, tempDir, type RunResult, type ServerProcess } from "../binary.ts";
import { startUpstream, type TestUpstream } from "../upstream.ts";

export const VAULT = "demo";

export interface ApiAnswer {
  readonly status: number;
  readonly text: string;
  readonly body: any;
}

/** One `broker vault run -- curl -i …` as the agent ran it. */
export interface CurlAnswer {
  /** The final HTTP status (0 when curl got none). */
  readonly status: number;
  /** Status line, headers and body as curl printed them (-i). */
  readonly response: string;
  readonly body: string;
  readonly stderr: string;
  readonly exitCode: number;
}

export interface StoreAgent {
  readonly name: string;
  /** `broker vault run -- curl -sS -i <url>` with the agent's saved login. */
  curl(url: string): Promise<CurlAnswer>;
}

export interface StoreBroker {
  readonly server: ServerProcess;
  readonly ownerToken: string;
  /** Every answer the owner's API calls got (status, headers, body), and everything the CLIs printed. */
  readonly seen: string[];
  /** The owner's API call; the answer is kept in `seen`. */
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>;
  /** Invites an agent (role proxy) into the vault and redeems the invite with the CLI in its own config directory. */
  agent(name: string): Promise<StoreAgent>;
  stop(): Promise<void>;
}

function ok(what: string, r: RunResult): RunResult {
  if (r.exitCode !== 0) throw new Error(`${what}: exit ${r.exitCode}\nstdout: ${r.stdout}\nstderr: ${r.stderr}`);
  return r;
}

export async function startStoreBroker(opts: { cas: string[] }): Promise<StoreBroker> {
  const bin = builtBinary();
  const dir = tempDir("broker-secret-stores-");
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, opts.cas.join("\n"));
  const server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_ALLOW_PRIVATE_RANGES: "true",
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  const seen: string[] = [];
  const ownerConfig = join(tempDir("broker-owner-"), "config");
  const owner = cleanEnv({ BROKER_CONFIG_DIR: ownerConfig });
  const cli = async (env: Record<string, string>, args: string[], stdin?: string) => {
    const r = await runBinary(bin, args, { env, stdin, cwd: dir });
    seen.push(r.stdout, r.stderr);
    return r;
  };
  ok(
    "auth register",
    await cli(owner, ["auth", "register", "--email", "owner@example.com", "--password-stdin", "--address", server.url], "correct horse battery staple\n"),
  );
  const ownerToken = (JSON.parse(readFileSync(join(ownerConfig, "cli.json"), "utf8")) as { token: string }).token;

  async function api(method: string, path: string, body?: unknown): Promise<ApiAnswer> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ownerToken}`, ...(body !== undefined && { "content-type": "application/json" }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    seen.push(`${res.status}\n${[...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n")}\n\n${text}`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, text, body: parsed };
  }

  const created = await api("POST", "/v1/vaults", { name: VAULT });
  if (created.status !== 201) throw new Error(`vault create: ${created.status} ${created.text}`);

  return {
    server,
    ownerToken,
    seen,
    api,
    async agent(name) {
      const invite = await api("POST", `/v1/vaults/${VAULT}/agent-invites`, { name, role: "proxy" });
      if (invite.status !== 201) throw new Error(`agent invite: ${invite.status} ${invite.text}`);
      const env = cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-agent-"), "config") });
      ok("agent redeem", await cli(env, ["agent", "redeem", invite.body.invite_url]));
      return {
        name,
        async curl(url) {
          const r = await cli(env, [
            "vault",
            "run",
            "--",
            "curl",
            "-sS",
            "-i",
            "--suppress-connect-headers",
            "--max-time",
            "20",
            "-w",
            "\n__STATUS__%{http_code}",
            url,
          ]);
          const m = /\n__STATUS__(\d{3})$/.exec(r.stdout);
          const response = m ? r.stdout.slice(0, m.index) : r.stdout;
          const split = response.indexOf("\r\n\r\n");
          return {
            status: m ? Number(m[1]) : 0,
            response,
            body: split === -1 ? "" : response.slice(split + 4),
            stderr: r.stderr,
            exitCode: r.exitCode,
          };
        },
      };
    },
    async stop() {
      const exited = server.stop();
      // After a `vault run`, the server's answer to its activity long-poll keeps a timer of up to 25 s that
      // holds the process after shutdown_complete: once the shutdown is complete, the second signal ends it.
      let done = false;
      void exited.then(() => (done = true));
      const deadline = Date.now() + 35_000;
      while (!done && !server.logs().includes('"event":"shutdown_complete"') && Date.now() < deadline) await Bun.sleep(25);
      if (!done) void server.stop();
      await exited;
    },
  };
}

/** An HTTPS upstream on 127.0.0.1 that records the credential it was sent in `header` and says it back. */
export interface RecordingUpstream {
  readonly upstream: TestUpstream;
  readonly caPem: string;
  /** host:port, the service's host. */
  readonly host: string;
  /** The credential of each request, in arrival order (the header's value less its prefix; "" when absent). */
  readonly values: string[];
  /** When each of those requests arrived (epoch ms). */
  readonly times: number[];
  /** Values answered with 401 (the upstream says the credential is no longer good). */
  readonly refuse: Set<string>;
}

export async function startRecordingUpstream(header: string, prefix = ""): Promise<RecordingUpstream> {
  const values: string[] = [];
  const times: number[] = [];
  const refuse = new Set<string>();
  const name = header.toLowerCase();
  const upstream = await startUpstream((req, res) => {
    const raw = req.headers[name];
    const sent = typeof raw === "string" ? raw : "";
    const value = sent.startsWith(prefix) ? sent.slice(prefix.length) : sent;
    values.push(value);
    times.push(Date.now());
    const refused = refuse.has(value);
    // Says back what it got, as a careless API does: the broker must redact it before the agent reads it.
    const text = JSON.stringify({ path: req.url, [name]: sent, ok: !refused });
    res.writeHead(refused ? 401 : 200, { "content-type": "application/json", "content-length": Buffer.byteLength(text), "x-you-sent": sent });
    res.end(text);
  });
  return { upstream, caPem: upstream.pki.caPem, host: `127.0.0.1:${upstream.port}`, values, times, refuse };
}

/** Whether curl is here: without it a developer's run skips, and CI=true fails instead (.ci/run installs it). */
export function requireCurl(): boolean {
  if (Bun.which("curl")) return true;
  if (process.env.CI === "true") throw new Error("curl is missing: apt-get install curl (listed in .ci/run)");
  return false;
}

/** Polls `probe` until it returns a value (not undefined) or `ms` pass; then returns the last try's answer. */
export async function pollUntil<T>(ms: number, probe: () => Promise<T | undefined>, everyMs = 250): Promise<T | undefined> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined || Date.now() >= deadline) return got;
    await Bun.sleep(everyMs);
  }
}
