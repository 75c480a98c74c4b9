// Adding services in real Chromium, step by step: a new user registers, stores a key and adds GitHub
// from the catalogue (search, template, "read", the stored key, the new-host question) and the list
// says "GitHub (api.github.com), read only"; a template with a new key leads on to the Credentials page
// with the key named; a custom service asks for its auth type first and then shows only that type's
// fields, and its edit page changes type the same way. The flows run with JavaScript disabled too.
// Screenshots at 1280 and 390 px (SHOTS_DIR, or docs/screenshots/ with UPDATE_SCREENSHOTS=1); no page
// is wider than a phone. No credential value reaches any page or log line.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { browserTestFor, openBrowser, recordPages, signInOnPage, startBlankBroker, submit, type BlankBroker, type SeenPage } from "./browser.ts";

const SHOTS =
  process.env.SHOTS_DIR ??
  (process.env.UPDATE_SCREENSHOTS === "1" ? join(import.meta.dir, "..", "..", "docs", "screenshots") : mkdtempSync(join(tmpdir(), "broker-shots-")));
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const VAULT = "agents-lab";
const browserTest = browserTestFor("console templates");
const VALUES: Record<string, string> = {
  GITHUB_TOKEN: `github_pat_SENTINEL${crypto.randomUUID().replaceAll("-", "")}`,
  OPENAI_API_KEY: `sk-SENTINEL-${crypto.randomUUID()}`,
  INTERNAL_KEY: `SENTINEL-internal-${crypto.randomUUID()}`,
};
/** Every auth field name a custom service form may post. */
const AUTH_FIELDS = [
  "credential_key",
  "username",
  "header_name",
  "header_prefix",
  "query_param",
  "path_template",
  "token_url",
  "client_id",
  "client_secret",
  "refresh_token",
  "client_auth",
  "scopes",
  "audience",
  "access_key_id",
  "secret_access_key",
  "session_token",
  "region",
  "service",
  "app_id",
  "installation_id",
  "private_key",
  "api_url",
];
const FIELDS_OF: Record<string, string[]> = {
  bearer: ["credential_key"],
  header: ["credential_key", "header_name", "header_prefix"],
  oauth2_client_credentials: ["token_url", "client_id", "client_secret", "client_auth", "scopes", "audience"],
};

let broker: BlankBroker;
let token: string;
const seen: SeenPage[] = [];

beforeAll(async () => {
  broker = await startBlankBroker();
  mkdirSync(SHOTS, { recursive: true });
  const reg = await broker.api("POST", "/v1/auth/register", OWNER);
  expect(reg.status).toBe(201);
  token = reg.body.token;
  expect((await broker.api("POST", "/v1/vaults", { name: VAULT }, token)).status).toBe(201);
  for (const key of ["GITHUB_TOKEN", "INTERNAL_KEY"]) {
    expect((await broker.api("PUT", `/v1/vaults/${VAULT}/credentials/${key}`, { value: VALUES[key] }, token)).status).toBe(200);
  }
});
afterAll(async () => {
  await broker?.stop();
});

/** A signed-in page of `b`, recording every HTML answer into `seen`; JavaScript off unless asked. */
async function signedInPage(b: BlankBroker, js = false) {
  const browser = await openBrowser({ viewport: { width: 1280, height: 800 }, javaScriptEnabled: js });
  const recorder = recordPages(browser.page, { into: seen });
  await browser.page.goto(`${b.apiUrl}/`);
  await signInOnPage(browser.page, OWNER);
  return { ...browser, ...recorder };
}

const services = async (b: BlankBroker, t: string, vault = VAULT) =>
  (await b.api("GET", `/v1/vaults/${vault}/services`, undefined, t)).body.services as {
    host: string;
    auth: Record<string, unknown>;
    template?: { said: string };
  }[];

/** The posted field names in the page's HTML: the expected ones there, every other auth field absent. */
async function expectOnlyFields(page: Page, type: string) {
  const html = await page.content();
  const present = AUTH_FIELDS.filter((f) => html.includes(`name="${f}"`));
  expect({ type, present }).toEqual({ type, present: FIELDS_OF[type]! });
  expect(html).toContain(`name="auth_type" value="${type}"`);
}

/** Confirms the new-host question when it is asked (a stored key going to a host for the first time). */
async function confirmNewHost(page: Page, key: string) {
  if (!(await page.$("#confirm-service"))) return;
  expect(await page.textContent("main")).toContain(`sends your existing credential ${key} to a new host`);
  await submit(page, "#confirm-service");
}

/** No credential value in any page a test here received, nor in `b`'s log lines. */
function expectNoValueSeen(b: BlankBroker) {
  for (const [key, value] of Object.entries(VALUES)) {
    expect({ key, pages: seen.filter((p) => p.html.includes(value)).map((p) => `${p.method} ${p.url}`) }).toEqual({ key, pages: [] });
    expect(b.logLines.filter((l) => l.includes(value))).toEqual([]);
  }
}

/** Full-page screenshots at 1280 and 390 px; the heights, and no page wider than the phone. */
async function shoot(page: Page, name: string): Promise<string> {
  const heights: number[] = [];
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 800 });
    const [height, scrollWidth] = await page.evaluate(() => [document.documentElement.scrollHeight, document.documentElement.scrollWidth]);
    expect({ name, width, scrollWidth }).toEqual({ name, width, scrollWidth: width });
    heights.push(height!);
    await page.screenshot({ path: join(SHOTS, `${name}-${width}.png`), fullPage: true });
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  return `${name}: ${heights[0]} px at 1280, ${heights[1]} px at 390`;
}

describe("services from the catalogue, in Chromium", () => {
  browserTest(
    "a new user adds read-only GitHub with a stored key; the list says so",
    async () => {
      const fresh = await startBlankBroker();
      const browser = await openBrowser({ viewport: { width: 1280, height: 800 } });
      const { page } = browser;
      const recorder = recordPages(page, { into: seen });
      try {
        await page.goto(`${fresh.apiUrl}/`);
        await page.fill("#reg-email", OWNER.email);
        await page.fill("#reg-password", OWNER.password);
        await page.fill("#reg-password-again", OWNER.password);
        await Promise.all([page.waitForURL(`${fresh.apiUrl}/`), page.click("#register")]);
        await page.fill("#f-name", "first-vault");
        await Promise.all([page.waitForURL(/\/vaults\/first-vault$/), page.click("#create-vault button")]);
        const base = `${fresh.apiUrl}/vaults/first-vault`;
        await page.goto(`${base}/credentials`);
        await page.fill("#f-key", "GITHUB_TOKEN");
        await page.fill("#f-value", VALUES.GITHUB_TOKEN!);
        await submit(page, "#set-credential button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Credential GITHUB_TOKEN saved.");

        // The list has no form of its own any more: "Add a service" leads to the catalogue.
        await page.goto(`${base}/services`);
        expect(await page.$("#add-service-form")).toBeNull();
        await Promise.all([page.waitForURL(/\/services\/new$/), page.click("text=Add a service")]);
        await page.fill("#f-q", "git");
        await submit(page, "#search");
        const listed = (await page.textContent("#template-list")) ?? "";
        expect(listed).toContain("GitHub");
        expect(listed).toContain("GitLab");
        expect(listed).not.toContain("Stripe");
        expect(await page.textContent("#template-github")).toContain("Bearer token · GITHUB_TOKEN");

        await Promise.all([page.waitForURL(/template=github$/), page.click("#template-github")]);
        expect(await page.isChecked("#op-read")).toBe(true);
        expect(await page.isChecked("#op-write")).toBe(false);
        expect(await page.getAttribute("#obtain-link", "href")).toBe("https://github.com/settings/personal-access-tokens/new");
        expect(await page.$("text=Connect with GitHub")).toBeNull(); // no provider configured
        expect(await page.inputValue("#f-key_token")).toBe("GITHUB_TOKEN"); // the stored key the template suggests
        await page.selectOption("#f-key_token", "GITHUB_TOKEN");
        await submit(page, "#add-service-form button[type=submit]");
        await confirmNewHost(page, "GITHUB_TOKEN");
        expect(await page.textContent("#flash")).toBe("Service api.github.com added.");
        const row = (await page.locator("#services tbody tr", { hasText: "api.github.com" }).textContent()) ?? "";
        expect(row).toContain("GitHub (api.github.com), read only");
        expect(row).toContain("GITHUB_TOKEN");

        const login = await fresh.api("POST", "/v1/auth/login", OWNER);
        const [svc] = await services(fresh, login.body.token, "first-vault");
        expect(svc).toMatchObject({
          host: "api.github.com",
          auth: { type: "bearer", token: "GITHUB_TOKEN" },
          template: { said: "GitHub (api.github.com), read only" },
        });
        await recorder.flushed();
        expectNoValueSeen(fresh);
      } finally {
        await browser.close();
        await fresh.stop();
      }
    },
    60_000,
  );

  browserTest(
    "without JavaScript: a template with a new key goes on to the Credentials page with the key named",
    async () => {
      const b = await signedInPage(broker);
      const { page } = b;
      const base = `${broker.apiUrl}/vaults/${VAULT}`;
      try {
        await page.goto(`${base}/services/new?q=openai`);
        expect(await page.$$("script")).toEqual([]);
        await Promise.all([page.waitForURL(/template=openai$/), page.click("#template-openai")]);
        // OPENAI_API_KEY is not stored: "a new key" is chosen, named as the template suggests.
        expect(await page.inputValue("#f-key_token")).toBe("*new");
        expect(await page.inputValue("#f-key_token_new")).toBe("OPENAI_API_KEY");
        expect(await page.$("#f-value")).toBeNull(); // the value is never asked for here
        await page.check("#op-write");
        await submit(page, "#add-service-form button[type=submit]");
        expect(page.url()).toBe(`${base}/credentials?key=OPENAI_API_KEY#set-credential`);
        expect(await page.textContent("#flash")).toBe(
          "Service api.openai.com added. Next, store the value of OPENAI_API_KEY: until then agents' requests to api.openai.com get an error.",
        );
        expect(await page.inputValue("#f-key")).toBe("OPENAI_API_KEY");
        await page.fill("#f-value", VALUES.OPENAI_API_KEY!);
        await submit(page, "#set-credential button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Credential OPENAI_API_KEY saved.");
        await page.goto(`${base}/services`);
        expect(await page.locator("#services tbody tr", { hasText: "api.openai.com" }).textContent()).toContain("OpenAI (api.openai.com), read and write");

        // No operation chosen: refused with the form kept.
        await page.goto(`${base}/services/new?template=anthropic`);
        await page.uncheck("#op-read");
        await submit(page, "#add-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toContain("at least one operation");
        expect(await page.isChecked("#op-read")).toBe(false);
        await b.flushed();
        expectNoValueSeen(broker);
      } finally {
        await b.close();
      }
    },
    60_000,
  );

  browserTest(
    "without JavaScript: a custom service asks for its type, then shows only that type's fields; editing changes type",
    async () => {
      const b = await signedInPage(broker);
      const { page } = b;
      const base = `${broker.apiUrl}/vaults/${VAULT}`;
      try {
        await page.goto(`${base}/services/new`);
        await Promise.all([page.waitForURL(/custom=1$/), page.click("#custom-service")]);
        expect(await page.$("#f-host")).toBeNull(); // the type comes first
        for (const type of ["bearer", "oauth2_client_credentials", "header"]) {
          await page.goto(`${base}/services/new?custom=1`);
          await Promise.all([page.waitForURL(new RegExp(`type=${type}$`)), page.click(`#type-${type}`)]);
          expect(await page.$$("script")).toEqual([]);
          await expectOnlyFields(page, type);
        }
        // On the header form: a stored key, the header's name, saved after the new-host question.
        await page.fill("#f-host", "internal.example.com");
        await page.selectOption("#f-credential_key", "INTERNAL_KEY");
        await page.fill("#f-header_name", "X-Api-Key");
        await submit(page, "#add-service-form button[type=submit]");
        await confirmNewHost(page, "INTERNAL_KEY");
        expect(await page.textContent("#flash")).toBe("Service internal.example.com added.");

        // Edit: its own type's fields; "Change type" leads to the choice, then bearer's fields only.
        await page.click('a[aria-label="Edit internal.example.com"]');
        await expectOnlyFields(page, "header");
        expect(await page.inputValue("#f-header_name")).toBe("x-api-key");
        await Promise.all([page.waitForURL(/type=choose$/), page.click("#change-type")]);
        expect(await page.getAttribute("#type-header", "aria-current")).toBe("true");
        await Promise.all([page.waitForURL(/type=bearer$/), page.click("#type-bearer")]);
        await expectOnlyFields(page, "bearer");
        expect(await page.inputValue("#f-credential_key")).toBe("INTERNAL_KEY");
        await submit(page, "#edit-service-form button[type=submit]");
        expect(await page.textContent("#flash")).toBe("Service internal.example.com updated.");
        expect((await services(broker, token)).find((s) => s.host === "internal.example.com")!.auth).toEqual({ type: "bearer", token: "INTERNAL_KEY" });
        await b.flushed();
        expectNoValueSeen(broker);
      } finally {
        await b.close();
      }
    },
    60_000,
  );

  browserTest(
    "screenshots at 1280 and 390 px: the picker, the template form, three types; nothing wider than a phone",
    async () => {
      const b = await signedInPage(broker, true);
      const { page } = b;
      const base = `${broker.apiUrl}/vaults/${VAULT}`;
      const heights: string[] = [];
      try {
        for (const [name, path] of [
          ["services", "/services"],
          ["service-picker", "/services/new"],
          ["service-template-github", "/services/new?template=github"],
          ["service-custom-types", "/services/new?custom=1"],
          ["service-custom-bearer", "/services/new?custom=1&type=bearer"],
          ["service-custom-header", "/services/new?custom=1&type=header"],
          ["service-custom-oauth2", "/services/new?custom=1&type=oauth2_client_credentials"],
          ["service-edit-template", `/services/api.openai.com/edit`],
        ] as const) {
          await page.goto(`${base}${path}`);
          expect(await page.textContent("h1")).not.toBe("Not found");
          heights.push(await shoot(page, name));
        }
        console.log(`page heights (screenshots in ${SHOTS}):\n  ${heights.join("\n  ")}`);
        await b.flushed();
        expectNoValueSeen(broker);
      } finally {
        await b.close();
      }
    },
    60_000,
  );
});
