// Identity-provider sign-in in real Chromium (issue 13): a real OpenID provider (`oidc-provider` on
// loopback, tests/helpers/oidc-provider.ts, no login page), the broker in-process. A person signs in
// from the console's "Sign in with" button, links the provider from account settings and unlinks
// it, and `broker auth login --sso` finishes through the link opened in the browser.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { join } from "node:path";
import { startOidcProvider, type TestOidcProvider } from "../helpers/oidc-provider.ts";
import { cleanEnv, tempDir } from "../helpers/binary.ts";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const test = browserTestFor("console OIDC");
const ROOT = join(import.meta.dir, "..", "..");
const OWNER = { email: "owner@example.com", password: "owner password 123" };

let idp: TestOidcProvider;
let broker: BlankBroker;

beforeAll(async () => {
  idp = await startOidcProvider({
    users: [
      { sub: "sub-alice", email: "alice@allowed.test", email_verified: true },
      { sub: "sub-owner-work", email: "owner.work@corp.test", email_verified: true },
      { sub: "sub-carol", email: "carol@allowed.test", email_verified: true },
    ],
    redirectUris: [],
  });
  broker = await startBlankBroker(idp.env({ BROKER_OIDC_NAME: "Test IdP" }));
  idp.setRedirectUris([`${broker.apiUrl}/v1/auth/oidc/callback`]);
  expect((await broker.api("POST", "/v1/auth/register", OWNER)).status).toBe(201);
});

afterAll(async () => {
  await broker?.stop();
  await idp?.stop();
});

describe("identity-provider sign-in in Chromium", () => {
  test("Sign in with Test IdP on the sign-in page: a new member lands signed in on the console", async () => {
    const b = await openRecordingBrowser({ origin: broker.apiUrl });
    try {
      idp.nextLogin("alice@allowed.test");
      await b.page.goto(`${broker.apiUrl}/`);
      expect(await b.page.textContent("#provider-sign-in")).toContain("Sign in with Test IdP");
      await Promise.all([b.page.waitForURL(`${broker.apiUrl}/`), b.page.click("#provider-sign-in")]);
      await b.page.waitForSelector(".site-email");
      expect(await b.page.textContent(".site-email")).toBe("alice@allowed.test");
    } finally {
      await b.close();
    }
  });

  test("link from account settings, sign in through it, then unlink", async () => {
    const b = await openRecordingBrowser({ origin: broker.apiUrl });
    try {
      await b.page.goto(`${broker.apiUrl}/`);
      await signInOnPage(b.page, OWNER);
      await b.page.goto(`${broker.apiUrl}/account`);
      expect(await b.page.textContent("#no-identities")).toContain("No provider is linked");
      idp.nextLogin("owner.work@corp.test");
      await Promise.all([b.page.waitForURL(/\/account\?linked=1$/), b.page.click("#link-provider-button")]);
      expect(await b.page.textContent("#flash")).toBe("Linked Test IdP. You can now sign in with it.");
      const row = await b.page.textContent("#identities tbody");
      expect(row).toContain(new URL(idp.issuer).host);
      expect(row).toContain("owner.work@corp.test");

      // Signed out, the linked identity signs the owner in.
      await submit(b.page, "#sign-out button");
      await Promise.all([b.page.waitForURL(`${broker.apiUrl}/`), b.page.click("#provider-sign-in")]);
      await b.page.waitForSelector(".site-email");
      expect(await b.page.textContent(".site-email")).toBe(OWNER.email);

      await b.page.goto(`${broker.apiUrl}/account`);
      // The Account page says how this browser's session was made.
      expect(await b.page.textContent("#sessions tbody tr:first-child")).toContain("OIDC sign-in");
      await submit(b.page, "#identities form button");
      expect(await b.page.textContent("#flash")).toBe(`Unlinked ${new URL(idp.issuer).host}. It no longer signs you in.`);
      expect(await b.page.textContent("#no-identities")).toContain("No provider is linked");
    } finally {
      await b.close();
    }
  });

  test("broker auth login --sso: the printed link, opened in Chromium, signs the terminal in", async () => {
    idp.nextLogin("carol@allowed.test");
    const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), "auth", "login", "--sso", "--address", broker.apiUrl], {
      env: cleanEnv({ BROKER_CONFIG_DIR: join(tempDir("broker-sso-"), "config") }),
      cwd: ROOT,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    let stderr = "";
    const reading = (async () => {
      for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk);
    })();
    const deadline = Date.now() + 15_000;
    let link: string | undefined;
    while (!link && Date.now() < deadline && proc.exitCode === null) {
      link = /^ {2}(http:\/\/\S+\/v1\/auth\/oidc\/login\?\S+)$/m.exec(stderr)?.[1];
      await Bun.sleep(20);
    }
    expect(link).toBeDefined();
    const b = await openRecordingBrowser();
    try {
      await b.page.goto(link!);
      await b.page.waitForURL(/^http:\/\/127\.0\.0\.1:\d+\/callback\?code=/);
      await b.page.waitForSelector("h1");
      expect(await b.page.textContent("body")).toContain("You can close this tab");
    } finally {
      await b.close();
    }
    const stdout = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    await reading;
    expect(stdout).toBe("Logged in as carol@allowed.test\n");
    expect(stdout + stderr).not.toMatch(/av_sess_/);
  });
});
