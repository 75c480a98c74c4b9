// `broker auth login --sso` (issue 13) as a person runs it: the CLI (a subprocess of the real entry
// point) listens on 127.0.0.1 and prints a link; the "browser" opens that link and follows every
// redirect (broker → provider → broker callback → the CLI's loopback listener); the CLI exchanges
// the one-time code and saves the session as password login does. The broker is the real server
// in-process; the provider is tests/helpers/fake-oidc.ts on loopback, answering /authorize at once.

import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startFakeOidc } from "../helpers/fake-oidc.ts";
import { createTestPki } from "../helpers/pki.ts";
import { cleanEnv, tempDir } from "../helpers/binary.ts";
import { startBroker } from "./proxy-fixture.ts";

const ROOT = join(import.meta.dir, "..", "..");
const fake = await startFakeOidc();
const broker = await startBroker({ caPem: (await createTestPki()).caPem, env: { ...fake.env, BROKER_OIDC_NAME: "Acme SSO" } });
const off = await startBroker({ caPem: (await createTestPki()).caPem }); // no BROKER_OIDC_*: the feature is off

afterAll(async () => {
  await broker.stop();
  await off.stop();
  await fake.stop();
});

// startBroker registered the owner with a password, so provider sign-up (refused while nobody exists) is open.

interface Cli {
  /** Resolves with the link once the CLI has printed it. */
  link(): Promise<string>;
  kill(signal: NodeJS.Signals): void;
  done: Promise<{ exitCode: number; stdout: string; stderr: string }>;
}

/** Runs `broker <args>` from the sources, as the binary would, with its own config dir. */
function runCli(args: string[], configDir = join(tempDir("broker-sso-"), "config")): Cli {
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), ...args], {
    env: cleanEnv({ BROKER_CONFIG_DIR: configDir }),
    cwd: ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderr = "";
  const collecting = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of proc.stderr) stderr += decoder.decode(chunk, { stream: true });
  })();
  const done = (async () => {
    const stdout = await new Response(proc.stdout).text();
    const exitCode = await proc.exited;
    await collecting;
    return { exitCode, stdout, stderr };
  })();
  return {
    async link() {
      const deadline = Date.now() + 15_000;
      while (Date.now() < deadline) {
        const m = /^ {2}(http:\/\/\S+\/v1\/auth\/oidc\/login\?\S+)$/m.exec(stderr);
        if (m?.[1]) return m[1];
        if (proc.exitCode !== null) throw new Error(`the CLI exited ${proc.exitCode} before printing a link:\n${stderr}`);
        await Bun.sleep(20);
      }
      throw new Error(`no link printed:\n${stderr}`);
    },
    kill: (signal) => proc.kill(signal),
    done,
  };
}

/**
 * The browser leg: opens the link and follows every redirect as a browser would (cookies kept per
 * host: the broker binds the flow to the browser that started it), ending on the CLI's loopback page.
 */
async function openInBrowser(link: string): Promise<{ status: number; url: string; text: string }> {
  const jars = new Map<string, Map<string, string>>();
  let url = link;
  for (let hop = 0; hop < 10; hop++) {
    const host = new URL(url).host;
    const jar = jars.get(host) ?? new Map<string, string>();
    jars.set(host, jar);
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(url, { redirect: "manual", headers: cookie ? { cookie } : {} });
    for (const c of res.headers.getSetCookie()) {
      const [pair = ""] = c.split(";");
      jar.set(pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1));
    }
    const next = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || !next) return { status: res.status, url, text: await res.text() };
    url = new URL(next, url).href;
  }
  throw new Error("too many redirects");
}

describe("broker auth login --sso", () => {
  test("prints a link, receives the browser's code on 127.0.0.1, saves the session; no token printed", async () => {
    fake.setUser({ sub: "pat-1", email: "pat@example.com" });
    const configDir = join(tempDir("broker-sso-"), "config");
    const cli = runCli(["auth", "login", "--sso", "--address", broker.apiUrl], configDir);
    const link = new URL(await cli.link());
    expect(`${link.origin}${link.pathname}`).toBe(`${broker.apiUrl}/v1/auth/oidc/login`);
    expect([...link.searchParams.keys()].sort()).toEqual(["cli_nonce", "cli_port"]);
    expect(link.searchParams.get("cli_nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const page = await openInBrowser(link.href);
    expect(new URL(page.url).origin).toBe(`http://127.0.0.1:${link.searchParams.get("cli_port")}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain("You can close this tab");
    const r = await cli.done;
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toBe("Logged in as pat@example.com\n");
    expect(r.stderr).toContain("To sign in with Acme SSO, open this link in your browser:");
    expect(r.stdout + r.stderr).not.toMatch(/av_sess_/);
    const saved = JSON.parse(readFileSync(join(configDir, "cli.json"), "utf8"));
    expect([saved.address, saved.email, /^av_sess_[A-Za-z0-9_-]+$/.test(saved.token)]).toEqual([broker.apiUrl, "pat@example.com", true]);
    const me = await broker.api("GET", "/v1/auth/sessions", undefined, saved.token); // the saved session works
    expect(me.status).toBe(200);
    // Made by the CLI's code exchange: its kind and client are on record for the person's sessions list.
    expect(me.body.sessions.find((s: { current: boolean }) => s.current)).toMatchObject({
      channel: "oidc_cli",
      client: expect.stringMatching(/^broker-cli\//),
    });
    expect(broker.logLines.join("\n")).not.toContain(saved.token);
  });

  test("--print-token puts the token alone on stdout, the message on stderr", async () => {
    fake.setUser({ sub: "pat-1", email: "pat@example.com" });
    const cli = runCli(["auth", "login", "--sso", "--print-token", "--address", broker.apiUrl]);
    expect((await openInBrowser(await cli.link())).status).toBe(200);
    const r = await cli.done;
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toMatch(/^av_sess_[A-Za-z0-9_-]+\n$/);
    expect(r.stderr).toContain("Logged in as pat@example.com");
  });

  test("a code the broker did not issue to this terminal is refused; the tab and the terminal both say so", async () => {
    const cli = runCli(["auth", "login", "--sso", "--address", broker.apiUrl]);
    const port = new URL(await cli.link()).searchParams.get("cli_port");
    const page = await fetch(`http://127.0.0.1:${port}/callback?code=not-a-code-the-broker-issued`);
    expect(page.status).toBe(401);
    expect(await page.text()).toContain("Sign-in failed");
    const r = await cli.done;
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("error: the broker refused the sign-in code");
    expect(r.stderr).toContain("hint: run `broker auth login --sso` again");
  });

  test("the loopback listener answers only GET /callback on its own address", async () => {
    const cli = runCli(["auth", "login", "--sso", "--address", broker.apiUrl]);
    const port = new URL(await cli.link()).searchParams.get("cli_port");
    expect((await fetch(`http://127.0.0.1:${port}/`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/callback?code=x`, { method: "POST" })).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/callback?code=x`, { headers: { host: `rebound.example:${port}` } })).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${port}/callback`)).status).toBe(400);
    cli.kill("SIGINT"); // still waiting: none of those counted as the browser's answer
    const r = await cli.done;
    expect(r.exitCode).toBe(130);
    expect(r.stderr).toContain("error: cancelled");
    await expect(fetch(`http://127.0.0.1:${port}/callback?code=late`)).rejects.toThrow();
  });

  test("a broker with identity-provider sign-in off: says so and points to password login", async () => {
    const r = await runCli(["auth", "login", "--sso", "--address", off.apiUrl]).done;
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`error: identity-provider sign-in is not enabled on the broker at ${off.apiUrl}`);
    expect(r.stderr).toContain("hint: log in with your password instead: `broker auth login --email <you>`");
    expect(r.stderr).not.toContain("/v1/auth/oidc/login");
  });

  test("--sso refuses --email and --password-stdin; plain login still needs --email", async () => {
    const both = await runCli(["auth", "login", "--sso", "--email", "a@b.c", "--address", broker.apiUrl]).done;
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toContain("--sso takes no --email or --password-stdin");
    const none = await runCli(["auth", "login", "--address", broker.apiUrl]).done;
    expect(none.exitCode).toBe(2);
    expect(none.stderr).toContain("hint: pass --email <you>, or sign in through the identity provider with --sso");
  });
});
