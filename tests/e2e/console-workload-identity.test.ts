// The Workload identity page in real Chromium (issue 39, docs/architecture.md D27): the owner trusts an issuer whose
// key set is pasted as a JWKS document, adds two bindings (one with two conditions) and sees them listed, is told why a
// binding without conditions is refused with what was typed kept, lets a token signed with the pasted key in through
// the API, pastes a rotated key set, removes a binding and the issuer behind typed confirmations. A member sees no
// link to the page and is refused it, a form included; a form posted without the page's CSRF token changes nothing.
// Screenshots of the page with one issuer and two bindings at 1280 and 390 px: $SHOTS_DIR (default /tmp), wl-*.png.

import { afterAll, beforeAll, describe, expect } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import * as jose from "jose";
import type { Page } from "playwright-core";
import { browserTestFor, openRecordingBrowser, signInOnPage, startBlankBroker, submit, type BlankBroker } from "./browser.ts";

const SHOTS = process.env.SHOTS_DIR ?? "/tmp";
const OWNER = { email: "owner@example.com", password: "correct horse battery" };
const MEMBER = { email: "member@example.com", password: "another horse battery" };
const ISSUER = "https://gitlab.example.com";
const AUDIENCE = "https://broker.example.com";
const PAGE = "/settings/workload-identity";
const browserTest = browserTestFor("console workload identity");

let broker: BlankBroker;
let owner = "";

beforeAll(async () => {
  broker = await startBlankBroker();
  owner = (await broker.api("POST", "/v1/auth/register", OWNER)).body.token;
  const member = await broker.api("POST", "/v1/auth/register", MEMBER);
  expect(member.status).toBe(201);
  for (const name of ["ci-deploy", "staging"]) expect((await broker.api("POST", "/v1/vaults", { name }, owner)).status).toBe(201);
  mkdirSync(SHOTS, { recursive: true });
});

afterAll(async () => {
  await broker?.stop();
});

/** A signing key and its public half as a JWK (with its kid), as an issuer publishes it. */
async function signingKey(kid: string) {
  const { privateKey, publicKey } = await jose.generateKeyPair("ES256", { extractable: true });
  return { kid, privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg: "ES256", use: "sig" } };
}

async function cookieValue(page: Page, name: string): Promise<string> {
  const c = (await page.context().cookies(broker.apiUrl)).find((x) => x.name === name);
  if (!c) throw new Error(`no ${name} cookie`);
  return c.value;
}

/** A form post as a client without JavaScript sends it, with the page's session cookie and `csrf` as the form's token. */
async function post(page: Page, path: string, csrf: string, fields: Record<string, string>) {
  const cookie = `broker_session=${await cookieValue(page, "broker_session")}; broker_csrf=${await cookieValue(page, "broker_csrf")}`;
  return fetch(`${broker.apiUrl}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { cookie, origin: broker.apiUrl, "sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ csrf, ...fields }),
  });
}

const issuers = async () => (await broker.api("GET", "/v1/workload-issuers", undefined, owner)).body.issuers as any[];
const bindings = async () => (await broker.api("GET", "/v1/workload-issuers/gitlab/bindings", undefined, owner)).body.bindings as any[];
const bindingRow = (page: Page, name: string) => page.locator("#bindings-gitlab tbody tr", { has: page.locator(`code.name:text-is("${name}")`) });

/** The page at 1280 and 390 px wide, full length: nothing wider than the window. */
async function shots(page: Page): Promise<void> {
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 900 });
    await page.screenshot({ path: join(SHOTS, `wl-${width}.png`), fullPage: true });
    expect({ width, scroll: await page.evaluate(() => document.documentElement.scrollWidth) }).toEqual({ width, scroll: width });
  }
  await page.setViewportSize({ width: 1280, height: 900 });
}

describe("the Workload identity page in Chromium", () => {
  browserTest(
    "trust an issuer with a pasted key set, bind it twice, a refused binding, a token let in, rotated keys, remove both",
    async () => {
      const key1 = await signingKey("key-1");
      const key2 = await signingKey("key-2");
      const browser = await openRecordingBrowser();
      const { page } = browser;
      try {
        await page.goto(`${broker.apiUrl}/`);
        await signInOnPage(page, OWNER);
        await submit(page, `nav.site-nav a[href="${PAGE}"]`);
        expect(await page.textContent("h1")).toBe("Workload identity");
        expect(await page.textContent("#workload-run-command")).toContain("broker vault run --identity-token-file <path> -- <command>");
        expect(await page.textContent("#issuers")).toContain("No trusted issuers yet");

        // An issuer whose keys are given as a document, two audiences, a skew and the jti rule.
        await page.fill("#f-issuer-name", "gitlab");
        await page.fill("#f-issuer-issuer", ISSUER);
        await page.fill("#f-issuer-jwks", JSON.stringify({ keys: [key1.jwk] }));
        await page.fill("#f-issuer-audiences", `${AUDIENCE}, ci-jobs`);
        await page.fill("#f-issuer-clock_skew_seconds", "30");
        await page.check("#f-issuer-require_jti");
        await submit(page, "#f-issuer-submit");
        expect(await page.textContent("#flash")).toContain("Trusting gitlab.");
        const facts = await page.textContent("#issuer-facts-gitlab");
        for (const said of [ISSUER, "key set given: key-1", AUDIENCE, "ci-jobs", "30 seconds", "required: each token is exchanged once"])
          expect(facts).toContain(said);
        expect(await issuers()).toMatchObject([{ name: "gitlab", jwks_url: null, jwks_kids: ["key-1"], audiences: [AUDIENCE, "ci-jobs"], require_jti: true }]);
        expect(await page.textContent("#bindings-gitlab-empty")).toContain("No bindings yet");

        // A binding with two conditions (the second a list), and a second one.
        await page.fill("#b-gitlab-name", "deploy");
        await page.fill("#b-gitlab-conditions", "project_path = group/app\nref = refs/heads/main, refs/tags/v*");
        await page.selectOption("#b-gitlab-vault", "ci-deploy");
        await page.selectOption("#b-gitlab-role", "member");
        await page.fill("#b-gitlab-max_session_seconds", "1800");
        await submit(page, "#b-gitlab-submit");
        expect(await page.textContent("#flash")).toContain(
          "Binding deploy added: tokens of gitlab that match it get ci-deploy as member, acting as the agent wl-gitlab-deploy.",
        );
        await page.click("#add-binding-gitlab-box summary"); // closed once the issuer has a binding
        await page.fill("#b-gitlab-name", "preview");
        await page.fill("#b-gitlab-conditions", "ref_type = branch\nref = review/*");
        await page.selectOption("#b-gitlab-vault", "staging");
        await submit(page, "#b-gitlab-submit");
        expect(await page.textContent("#flash")).toContain("Binding preview added");
        const deploy = await bindingRow(page, "deploy").textContent();
        for (const said of ["project_path = group/app", "ref = refs/heads/main, refs/tags/v*", "ci-deploy", "member", "30 minutes", "wl-gitlab-deploy"]) {
          expect(deploy).toContain(said);
        }
        const preview = await bindingRow(page, "preview").textContent();
        for (const said of ["ref_type = branch", "ref = review/*", "staging", "proxy", "1 hour", "wl-gitlab-preview"]) expect(preview).toContain(said);
        expect(await bindings()).toMatchObject([
          { name: "deploy", conditions: { project_path: "group/app", ref: ["refs/heads/main", "refs/tags/v*"] }, vault: "ci-deploy", role: "member" },
          { name: "preview", conditions: { ref_type: "branch", ref: "review/*" }, vault: "staging", role: "proxy", max_session_seconds: 3600 },
        ]);
        await shots(page);

        // No conditions: the schema's refusal beside the field, the form as typed, nothing added.
        await page.click("#add-binding-gitlab-box summary");
        await page.fill("#b-gitlab-name", "broken");
        await page.fill("#b-gitlab-conditions", "   ");
        await page.selectOption("#b-gitlab-vault", "staging");
        await page.selectOption("#b-gitlab-role", "admin");
        await page.fill("#b-gitlab-max_session_seconds", "600");
        await submit(page, "#b-gitlab-submit");
        expect(await page.textContent("#flash")).toBe("Conditions must hold at least one condition.");
        expect(await page.textContent("#b-gitlab-conditions-error")).toBe("Conditions must hold at least one condition.");
        expect(await page.getAttribute("#add-binding-gitlab-box", "open")).not.toBeNull();
        expect(await page.inputValue("#b-gitlab-name")).toBe("broken");
        expect(await page.inputValue("#b-gitlab-vault")).toBe("staging");
        expect(await page.inputValue("#b-gitlab-role")).toBe("admin");
        expect(await page.inputValue("#b-gitlab-max_session_seconds")).toBe("600");
        // A line that is not `claim = pattern` is named by its number, the text kept.
        await page.fill("#b-gitlab-conditions", "project_path = group/app\njust-a-word");
        await submit(page, "#b-gitlab-submit");
        expect(await page.textContent("#b-gitlab-conditions-error")).toContain("Conditions line 2 must be claim = pattern");
        expect(await page.inputValue("#b-gitlab-conditions")).toBe("project_path = group/app\njust-a-word");
        expect((await bindings()).map((b) => b.name)).toEqual(["deploy", "preview"]);

        // A token signed with the pasted key gets the binding's vault and role.
        const now = Math.floor(Date.now() / 1000);
        const claims = { project_path: "group/app", ref: "refs/tags/v1.2.0", jti: crypto.randomUUID() };
        const token = await new jose.SignJWT(claims)
          .setProtectedHeader({ alg: "ES256", kid: "key-1" })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setSubject("project_path:group/app:ref:refs/tags/v1.2.0")
          .setIssuedAt(now)
          .setExpirationTime(now + 600)
          .sign(key1.privateKey);
        const exchange = {
          grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
          subject_token: token,
          subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
        };
        const exchanged = await broker.api("POST", "/v1/sessions/exchange", exchange);
        expect(exchanged.status).toBe(200);
        expect(exchanged.body).toMatchObject({ vault: "ci-deploy", role: "member" });

        // Rotated keys: the change form holds the key set given; a JWKS URL besides it is refused as typed, then the new set is saved.
        await page.goto(`${broker.apiUrl}${PAGE}`);
        await page.click("#change-issuer-gitlab-box summary");
        expect(JSON.parse(await page.inputValue("#i-gitlab-jwks"))).toEqual({ keys: [key1.jwk] });
        expect(await page.inputValue("#i-gitlab-audiences")).toBe(`${AUDIENCE}\nci-jobs`);
        const rotated = JSON.stringify({ keys: [key1.jwk, key2.jwk] }, null, 2);
        await page.fill("#i-gitlab-jwks", rotated);
        await page.fill("#i-gitlab-jwks_url", "https://gitlab.example.com/oauth/discovery/keys");
        await submit(page, "#i-gitlab-submit");
        expect(await page.textContent("#i-gitlab-jwks-error")).toBe("Key set is instead of the JWKS URL: give one of them, not both.");
        expect(await page.inputValue("#i-gitlab-jwks")).toBe(rotated);
        await page.fill("#i-gitlab-jwks_url", "");
        await page.fill("#i-gitlab-audiences", AUDIENCE);
        await page.uncheck("#i-gitlab-require_jti");
        await submit(page, "#i-gitlab-submit");
        expect(await page.textContent("#flash")).toContain("Saved gitlab");
        const changed = await page.textContent("#issuer-facts-gitlab");
        expect(changed).toContain("key set given: key-1, key-2");
        expect(changed).not.toContain("ci-jobs");
        expect(changed).toContain("not required");
        expect(await issuers()).toMatchObject([{ name: "gitlab", jwks_kids: ["key-1", "key-2"], audiences: [AUDIENCE], require_jti: false }]);
        expect(await page.locator("#bindings-gitlab tbody tr").count()).toBe(2); // the bindings stay

        // Remove a binding behind its typed name: its agent goes.
        await submit(page, "#remove-gitlab-preview");
        expect(await page.textContent("#remove-binding")).toContain(
          "Its agent wl-gitlab-preview goes with it, and every session exchanged under it ends at once.",
        );
        await page.fill("#remove-binding-form-confirm", "preview");
        await submit(page, "#remove-binding-form-submit");
        expect(await page.textContent("#flash")).toContain("Binding preview removed, with its agent");
        expect(await bindingRow(page, "preview").count()).toBe(0);
        expect((await bindings()).map((b) => b.name)).toEqual(["deploy"]);

        // Remove the issuer: the warning says what goes with it; a wrong phrase posted without the browser's check changes nothing.
        await page.click("#remove-issuer-gitlab summary");
        expect(await page.textContent("#remove-issuer-gitlab .warning")).toContain(
          "its binding goes with it: the binding's agent is removed and every session exchanged under it ends at once",
        );
        const csrf = await cookieValue(page, "broker_csrf");
        const wrong = await post(page, `${PAGE}/issuers/gitlab/delete`, csrf, { confirm: "gitlib" });
        expect(wrong.status).toBe(303);
        expect(await issuers()).toHaveLength(1);
        await page.fill("#remove-issuer-gitlab-form-confirm", "gitlab");
        await submit(page, "#remove-issuer-gitlab-form-submit");
        expect(await page.textContent("#flash")).toContain("Issuer gitlab removed, with its bindings and their agents");
        expect(await page.textContent("#issuers")).toContain("No trusted issuers yet");
        expect(await issuers()).toEqual([]);
        expect((await broker.api("POST", "/v1/sessions/exchange", exchange)).status).toBe(400);

        // A form posted without the page's CSRF token (no JavaScript needed to forge it): refused, nothing added.
        const forged = await post(page, `${PAGE}/issuers`, "not-the-token", { name: "forged", issuer: ISSUER, audiences: AUDIENCE });
        expect(forged.status).toBe(403);
        expect(await forged.text()).toContain("Form refused");
        expect(await issuers()).toEqual([]);
      } finally {
        await browser.close();
      }
    },
    120_000,
  );

  browserTest("a member sees no link to the page and is refused it, forms included", async () => {
    const browser = await openRecordingBrowser();
    const { page } = browser;
    try {
      await page.goto(`${broker.apiUrl}/`);
      await signInOnPage(page, MEMBER);
      expect(await page.locator(`nav.site-nav a[href="${PAGE}"]`).count()).toBe(0);
      expect(await page.locator("nav.site-nav").textContent()).not.toContain("Workload identity");
      const res = await page.goto(`${broker.apiUrl}${PAGE}`);
      expect(res?.status()).toBe(403);
      expect(await page.textContent("h1")).toBe("Not allowed");
      expect(await page.locator("form[action^='/settings/workload-identity'], #workload-how").count()).toBe(0);

      // The member's own session and CSRF token, a form as the page would post it: refused before it is read.
      const csrf = await cookieValue(page, "broker_csrf");
      const added = await post(page, `${PAGE}/issuers`, csrf, { name: "sneaky", issuer: ISSUER, audiences: AUDIENCE, clock_skew_seconds: "60" });
      expect(added.status).toBe(403);
      expect(await added.text()).toContain("Not allowed");
      expect(await issuers()).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
