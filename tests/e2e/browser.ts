// Shared set-up for browser tests: headless Debian Chromium driven by playwright-core (architecture.md §8),
// launched once per test process with a fresh context per test, a recorder of the HTML pages it
// receives, and a blank in-process broker (no users yet) for tests that start from the first-run page.
// Locally a missing browser skips the test; under CI=true it fails instead.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "bun:test";
import { type Browser, chromium, type BrowserContext, type BrowserContextOptions, type Page } from "playwright-core";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { startServer, type RunningServer } from "../../src/app/start.ts";
import { CHEAP_KDF } from "../helpers/api.ts";
import { callApi } from "./proxy-fixture.ts";

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

const SHARED = Symbol.for("broker.tests.sharedChromium");
const shared: { browser?: Promise<Browser> } = ((globalThis as any)[SHARED] ??= {});

/**
 * The test process's one headless Chromium, launched on first use and shared by every test file the
 * process runs. A browser that fails to start or goes away is launched again by the next caller.
 */
function sharedChromium(): Promise<Browser> {
  if (!shared.browser) {
    const launching = launchChromium();
    shared.browser = launching;
    launching.then(
      (browser) => browser.on("disconnected", () => void (shared.browser === launching && (shared.browser = undefined))),
      () => void (shared.browser === launching && (shared.browser = undefined)),
    );
  }
  return shared.browser;
}

// Waits for the test process ($1) to end, gives Chromium ($2) 5 s to quit, kills what is left of its
// process group and removes the directory ($0) holding its profile and artifacts. It runs in the
// background of a shell that exits at once: Bun ends the subprocesses it knows of when a file's global
// is torn down (--isolate), and this one must outlive the test process.
const REAPER = `(while kill -0 "$1" 2>/dev/null; do sleep 0.5; done
for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$2" 2>/dev/null || break; sleep 0.5; done
kill -0 "$2" 2>/dev/null && kill -KILL -- "-$2"
rm -rf -- "$0") &`;

/**
 * Launches Chromium with Playwright's temporary profile and artifact directories under a directory of
 * its own. Bun's test runner ends without an 'exit' event, so Playwright's exit handler (kill the
 * browser, remove those directories) never runs: Chromium quits by itself once its DevTools pipe
 * closes with this process, and REAPER cleans up after it.
 */
async function launchChromium(): Promise<Browser> {
  const dir = mkdtempSync(join(tmpdir(), "broker-chromium-"));
  const savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = dir; // read by Playwright's os.tmpdir() while it prepares the launch
  let browser: Browser;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  } finally {
    if (savedTmp === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = savedTmp;
  }
  const chromiumPid = String(mainProcessUsing(dir) ?? ""); // "": not found, then only the directory goes
  Bun.spawn(["sh", "-c", REAPER, dir, String(process.pid), chromiumPid], { stdio: ["ignore", "ignore", "ignore"], detached: true }).unref();
  return browser;
}

/** The Chromium browser process (not one of its helpers) whose profile is under `dir`. */
function mainProcessUsing(dir: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let args: string[];
    try {
      args = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
    } catch {
      continue; // gone meanwhile
    }
    if (args.some((a) => a.startsWith(`--user-data-dir=${dir}/`)) && !args.some((a) => a.startsWith("--type="))) return Number(entry);
  }
  return undefined;
}

/**
 * A fresh, isolated browser context (no cookies, storage or cache from any other test) with one page,
 * in the process's shared headless Chromium; `close()` closes this context only.
 */
export async function openBrowser(options: Omit<BrowserContextOptions, "executablePath"> = {}): Promise<OpenBrowser> {
  if (!haveChromium) throw new Error(MISSING_CHROMIUM);
  const context = await (await sharedChromium()).newContext(options);
  context.setDefaultTimeout(10_000);
  const page = await context.newPage();
  return {
    context,
    page,
    async close() {
      await context.close();
    },
  };
}

/** One HTML response a page received. */
export interface SeenPage {
  readonly url: string;
  readonly method: string;
  readonly status: number;
  readonly html: string;
  readonly csp: string | null;
}

export interface PageRecorder {
  /** The HTML responses whose bodies have arrived so far, in arrival order. */
  readonly pages: SeenPage[];
  /** Waits for the bodies of every HTML response seen so far. */
  flushed(): Promise<unknown>;
}

/** Keeps every HTML response (body, CSP) `page` receives, from `origin` only when given, in `into` when given. */
export function recordPages(page: Page, opts: { origin?: string; into?: SeenPage[] } = {}): PageRecorder {
  const pages = opts.into ?? [];
  const pending: Promise<unknown>[] = [];
  page.on("response", (res) => {
    if (opts.origin !== undefined && !res.url().startsWith(opts.origin)) return;
    if (!(res.headers()["content-type"] ?? "").startsWith("text/html")) return;
    pending.push(
      res
        .text()
        .catch(() => "")
        .then((html) =>
          pages.push({ url: res.url(), method: res.request().method(), status: res.status(), html, csp: res.headers()["content-security-policy"] ?? null }),
        ),
    );
  });
  return { pages, flushed: () => Promise.all(pending) };
}

/** `openBrowser` at desktop size, recording the HTML pages it receives (see `recordPages`). */
export async function openRecordingBrowser(record: { origin?: string; into?: SeenPage[] } = {}): Promise<OpenBrowser & PageRecorder> {
  const browser = await openBrowser({ viewport: { width: 1200, height: 800 } });
  return { ...browser, ...recordPages(browser.page, record) };
}

/** Clicks `selector` (a form's submit button) and waits for the page it navigates to. */
export async function submit(page: Page, selector: string): Promise<void> {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

/** Fills the console's sign-in form on the current page, submits it and waits for the page it leads to. */
export async function signInOnPage(page: Page, who: { email: string; password: string }): Promise<void> {
  await page.fill("#f-email", who.email);
  await page.fill("#f-password", who.password);
  await submit(page, "#sign-in");
}

export interface BlankBroker {
  readonly apiUrl: string;
  readonly server: RunningServer;
  readonly logLines: string[];
  /** A JSON call to the API (bearer `token` when given). */
  api(method: string, path: string, body?: unknown, token?: string): Promise<{ status: number; body: any; headers: Headers }>;
  stop(): Promise<void>;
}

export interface BlankBrokerOptions {
  /** An extra CA the broker trusts upstream (BROKER_UPSTREAM_CA_FILE), with 127.0.0.1 allowlisted. */
  readonly upstreamCaPem?: string;
  /** A DNS table for test names; any other name fails to resolve. Absent: the system resolver. */
  readonly dns?: Record<string, string[]>;
}

/** A broker on 127.0.0.1:0 over a fresh data directory, with no user yet (the first registration makes the owner). */
export async function startBlankBroker(env: Record<string, string> = {}, opts: BlankBrokerOptions = {}): Promise<BlankBroker> {
  const dir = mkdtempSync(join(tmpdir(), "broker-browser-e2e-"));
  const extra: Record<string, string> = {};
  if (opts.upstreamCaPem) {
    writeFileSync(join(dir, "upstream-ca.pem"), opts.upstreamCaPem);
    extra.BROKER_UPSTREAM_CA_FILE = join(dir, "upstream-ca.pem");
    extra.BROKER_NETWORK_ALLOWLIST = "127.0.0.1";
  }
  const log = createMemoryLogger();
  const config = loadConfig({
    BROKER_DATA_DIR: join(dir, "data"),
    BROKER_PORT: "0",
    BROKER_PROXY_PORT: "0",
    BROKER_RATELIMIT_PROFILE: "off",
    ...extra,
    ...env,
  });
  const dns = opts.dns;
  const resolver = dns
    ? async (host: string) => {
        const a = dns[host];
        if (!a) throw new Error(`test resolver: no answer for ${host}`);
        return a;
      }
    : undefined;
  const server = await startServer({ config, log, masterPassword: undefined, passwordKdf: CHEAP_KDF, resolver });
  return {
    apiUrl: server.apiUrl,
    server,
    logLines: log.lines,
    api: (method, path, body, token) => callApi(server.apiUrl, method, path, body, token),
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
