// Real HTTP clients through the transparent proxy listener to a local HTTPS upstream: curl (plain
// and TLS-wrapped proxy), Bun fetch with `proxy`, Python requests, and git clone over smart HTTP
// (git http-backend behind a local HTTPS server). Each shows the credential injected upstream and
// the value nowhere in what the client saw or in the broker's logs and audit records.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { expectNoLeak } from "./proxy-fixture.ts";
import { requireBinary, startTunnelEnv, UPSTREAM_NAME, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;

beforeAll(async () => {
  env = await startTunnelEnv();
});
afterAll(async () => {
  await env?.stop();
});

/** A minimal environment for client processes: no proxy or CA settings from the developer's shell. */
function clientEnv(extra: Record<string, string> = {}): Record<string, string> {
  const home = join(env.dir, "home");
  mkdirSync(home, { recursive: true });
  return { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, LANG: "C.UTF-8", ...extra };
}

async function run(cmd: string[], extraEnv: Record<string, string> = {}, cwd?: string) {
  const proc = Bun.spawn(cmd, { env: clientEnv(extraEnv), cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { stdout, stderr, code, all: `${stdout}\n${stderr}` };
}

function authOf(path: string): string[] {
  const r = [...env.upstream.received].reverse().find((x) => x.url === path);
  if (!r) throw new Error(`upstream never saw ${path}`);
  return r.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k)).map(([k, v]) => `${k.toLowerCase()}: ${v}`);
}

const url = (path: string) => `https://${env.authority}${path}`;

describe("real clients through HTTPS_PROXY", () => {
  test("curl --proxy http://token:vault@… with the broker CA", async () => {
    if (!requireBinary("curl", "curl")) return;
    const r = await run(["curl", "-sS", "-i", "--proxy", env.proxyUrl, "--cacert", env.caFile, url("/curl?x=1")]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^HTTP\/1\.1 200 Connection Established/);
    expect(r.stdout).toContain('"url":"/curl?x=1"');
    expect(authOf("/curl?x=1")).toEqual([`authorization: Bearer ${env.secret}`]);
    await expectNoLeak(env.broker, env.secret, [r.all]);
  });

  test("curl through the TLS-wrapped proxy (--proxy https://… --proxy-cacert)", async () => {
    if (!requireBinary("curl", "curl")) return;
    const proxy = env.proxyUrl.replace(/^http:/, "https:");
    const r = await run(["curl", "-sS", "-i", "--proxy", proxy, "--proxy-cacert", env.caFile, "--cacert", env.caFile, url("/curl-tls")]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('"url":"/curl-tls"');
    expect(authOf("/curl-tls")).toEqual([`authorization: Bearer ${env.secret}`]);
    await expectNoLeak(env.broker, env.secret, [r.all]);
  });

  test("Bun fetch with { proxy, tls: { ca } }", async () => {
    const res = await fetch(url("/bun-fetch"), { proxy: env.proxyUrl, tls: { ca: env.caPem } } as RequestInit);
    const text = await res.text();
    expect(res.status).toBe(200);
    expect(JSON.parse(text).url).toBe("/bun-fetch");
    expect(authOf("/bun-fetch")).toEqual([`authorization: Bearer ${env.secret}`]);
    const lines: string[] = [];
    res.headers.forEach((v, k) => lines.push(`${k}: ${v}`));
    const headers = lines.join("\n");
    await expectNoLeak(env.broker, env.secret, [text, headers]);
  });

  test("Python requests with HTTPS_PROXY and REQUESTS_CA_BUNDLE", async () => {
    if (!requireBinary("python3", "python3-requests")) return;
    const probe = await run(["python3", "-c", "import requests"]);
    if (probe.code !== 0) {
      if (process.env.CI === "true") throw new Error("python3 requests is missing: apt-get install python3-requests (listed in .ci/run)");
      return;
    }
    const script = "import requests,sys\nr=requests.get(sys.argv[1])\nprint(r.status_code)\nprint(dict(r.headers))\nprint(r.text)";
    const r = await run(["python3", "-c", script, url("/python")], { HTTPS_PROXY: env.proxyUrl, REQUESTS_CA_BUNDLE: env.caFile });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n")[0]).toBe("200");
    expect(r.stdout).toContain('"url":"/python"');
    expect(authOf("/python")).toEqual([`authorization: Bearer ${env.secret}`]);
    await expectNoLeak(env.broker, env.secret, [r.all]);
  });
});

/** HTTPS front for `git http-backend` (CGI): records each request's headers. */
async function startGitServer(projectRoot: string) {
  const seen: { url: string; authorization: string | undefined }[] = [];
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seen.push({ url: req.url ?? "", authorization: req.headers.authorization });
      const u = new URL(req.url ?? "/", "https://git.invalid");
      const body = Buffer.concat(chunks);
      const cgi = spawn("git", ["http-backend"], {
        env: {
          PATH: process.env.PATH ?? "/usr/bin:/bin",
          GIT_PROJECT_ROOT: projectRoot,
          GIT_HTTP_EXPORT_ALL: "1",
          PATH_INFO: decodeURIComponent(u.pathname),
          QUERY_STRING: u.search.slice(1),
          REQUEST_METHOD: req.method ?? "GET",
          CONTENT_TYPE: req.headers["content-type"] ?? "",
          CONTENT_LENGTH: String(body.length),
          ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: String(req.headers["content-encoding"]) } : {}),
          ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
          REMOTE_USER: "x",
          REMOTE_ADDR: "127.0.0.1",
        },
      });
      const out: Buffer[] = [];
      cgi.stdout.on("data", (c: Buffer) => out.push(c));
      cgi.stdin.end(body);
      cgi.on("close", () => {
        const all = Buffer.concat(out);
        let sep = all.indexOf("\r\n\r\n");
        let sepLen = 4;
        if (sep < 0) (sep = all.indexOf("\n\n")), (sepLen = 2);
        if (sep < 0) return res.writeHead(502).end("bad CGI output");
        let status = 200;
        const headers: Record<string, string> = {};
        for (const line of all.subarray(0, sep).toString("latin1").split(/\r?\n/)) {
          const i = line.indexOf(":");
          if (i <= 0) continue;
          const k = line.slice(0, i).trim();
          const v = line.slice(i + 1).trim();
          if (k.toLowerCase() === "status") status = Number(v.split(" ")[0]);
          else headers[k] = v;
        }
        res.writeHead(status, headers).end(all.subarray(sep + sepLen));
      });
    });
  };
  const server: Server = createServer({ cert: env.upstream.pki.certPem, key: env.upstream.pki.keyPem }, handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return { port, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe("git over smart HTTP", () => {
  test("git clone through HTTPS_PROXY: upstream sees the injected Basic credential, the clone succeeds", async () => {
    if (!requireBinary("git", "git")) return;
    const root = join(env.dir, "git-root");
    const work = join(env.dir, "git-work");
    mkdirSync(root, { recursive: true });
    const git = (args: string[], cwd?: string) =>
      run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", ...args], { GIT_CONFIG_NOSYSTEM: "1" }, cwd);
    expect((await git(["init", "-q", work])).code).toBe(0);
    await Bun.write(join(work, "README.md"), "hello through the broker\n");
    expect((await git(["add", "README.md"], work)).code).toBe(0);
    expect((await git(["commit", "-q", "-m", "first"], work)).code).toBe(0);
    expect((await git(["clone", "-q", "--bare", work, join(root, "repo.git")])).code).toBe(0);

    const server = await startGitServer(root);
    try {
      const authority = `${UPSTREAM_NAME}:${server.port}`;
      const secret = `ghp-${crypto.randomUUID()}`;
      await env.broker.setCredential("GIT_TOKEN", secret);
      await env.broker.addService(authority, { type: "basic", token: "GIT_TOKEN", username: "x" });
      const dest = join(env.dir, "cloned");
      const r = await run(["git", "clone", `https://${authority}/repo.git`, dest], {
        HTTPS_PROXY: env.proxyUrl,
        GIT_SSL_CAINFO: env.caFile,
        GIT_TERMINAL_PROMPT: "0",
        GIT_CONFIG_NOSYSTEM: "1",
      });
      expect(r.code).toBe(0);
      expect(await Bun.file(join(dest, "README.md")).text()).toBe("hello through the broker\n");
      const basic = `Basic ${Buffer.from(`x:${secret}`).toString("base64")}`;
      expect(server.seen.length).toBeGreaterThanOrEqual(2);
      for (const s of server.seen) expect(s.authorization).toBe(basic);
      expect(server.seen.some((s) => s.url.startsWith("/repo.git/info/refs?service=git-upload-pack"))).toBe(true);
      expect(r.all).not.toContain(Buffer.from(`x:${secret}`).toString("base64"));
      await expectNoLeak(env.broker, secret, [r.all]);
      for (const l of env.broker.logLines) expect(l).not.toContain(Buffer.from(`x:${secret}`).toString("base64"));
    } finally {
      await server.close();
    }
  });
});
