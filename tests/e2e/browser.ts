// Shared set-up for browser tests: headless Debian Chromium driven by playwright-core (DESIGN.md §5),
// and a blank in-process broker (no users yet) for tests that start from the first-run page.
// Locally a missing browser skips the test; under CI=true it fails instead.

import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "bun:test";
import { chromium, type BrowserContext, type BrowserContextOptions, type Page } from "playwright-core";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer, type RunningServer } from "../../src/server/serve.ts";

export const CHROMIUM = "/usr/bin/chromium";
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export const haveChromium = existsSync(CHROMIUM);
const inCi = process.env.CI === "true";
export const MISSING_CHROMIUM = `${CHROMIUM} not found: install the Debian package chromium (apt-get install -y chromium)`;

/** `test`, or `test.skip` (with a warning) when Chromium is missing outside CI. */
export function browserTestFor(suite: string): typeof test {
  if (!haveChromium && !inCi) console.warn(`skipping ${suite} browser tests: ${MISSING_CHROMIUM}`);
  return haveChromium || inCi ? test : (test.skip as typeof test);
}

export interface OpenBrowser {
  readonly context: BrowserContext;
  readonly page: Page;
  close(): Promise<void>;
}

/** A headless Chromium with a fresh profile; closed and removed by `close()`. */
export async function openBrowser(options: Omit<BrowserContextOptions, "executablePath"> = {}): Promise<OpenBrowser> {
  if (!haveChromium) throw new Error(MISSING_CHROMIUM);
  const profile = mkdtempSync(join(tmpdir(), "broker-chromium-"));
  const context = await chromium.launchPersistentContext(profile, { ...options, executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

export interface BlankBroker {
  readonly apiUrl: string;
  readonly server: RunningServer;
  readonly logLines: string[];
  /** A JSON call to the API (bearer `token` when given). */
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; headers: Headers }>;
  stop(): Promise<void>;
}

/** A broker on 127.0.0.1:0 over a fresh data directory, with no user yet (the first registration makes the owner). */
export async function startBlankBroker(env: Record<string, string> = {}): Promise<BlankBroker> {
  const dir = mkdtempSync(join(tmpdir(), "broker-browser-e2e-"));
  const log = createMemoryLogger();
  const config = loadConfig({ BROKER_DATA_DIR: join(dir, "data"), BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_RATELIMIT_PROFILE: "off", ...env });
  const server = await startServer({ config, log, masterPassword: undefined });
  return {
    apiUrl: server.apiUrl,
    server,
    logLines: log.lines,
    async api(method, path, body, token) {
      const headers: Record<string, string> = {};
      if (token) headers.authorization = `Bearer ${token}`;
      if (body !== undefined) headers["content-type"] = "application/json";
      const res = await fetch(`${server.apiUrl}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      let parsed: any = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {}
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
