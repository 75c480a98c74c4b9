// The identity-provider parts of the pages (issue 13): "Sign in with <name>" on the sign-in and
// approval pages only when a provider is configured (Domain.oidc), the account page's linked
// providers with Unlink and a Link form that posts, with the CSRF field, to the API's link flow.

import { describe, expect, test } from "bun:test";
import { createApi } from "../../../src/server/app.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { randomBytes } from "../../../src/crypto/index.ts";
import { type Domain, type OidcClient } from "../../../src/identity/index.ts";
import { mintUserSession } from "../../../src/identity/sessions.ts";
import { PASSWORDLESS_PARAMS } from "../../../src/crypto/passwords.ts";
import { providerLoginHref } from "../../../src/server/ui/sign-in-provider.tsx";
import { createBrowser, SAME_ORIGIN, signInPage } from "./console-fixtures.ts";
import { createHarness, createVault, fileAgentProposal, type Harness, register } from "./fixtures.ts";

const ISSUER = "https://id.example.com/realms/acme";

/** Just enough of a configured provider for the pages: its name (the flows are the API's, not under test here). */
const provider: OidcClient = {
  name: "Acme SSO",
  issuer: ISSUER,
  redirectUri: "http://broker.test/v1/auth/oidc/callback",
  buildAuthorizationUrl: () => `${ISSUER}/auth`,
  redeem: () => Promise.reject(new Error("not in these tests")),
};

/** A page browser on `h`'s store, with or without the provider. */
function browserOf(h: Harness, opts: { oidc?: boolean; session?: string } = {}) {
  const domain: Domain = { ...h.domain, oidc: opts.oidc ? provider : undefined };
  return createBrowser(createApi({ domain, log: createMemoryLogger() }), { session: opts.session });
}

async function withOwner() {
  const h = await createHarness();
  const owner = await register(h, "owner@example.com");
  return { h, owner };
}

const LOGIN_LINK = /<a href="\/v1\/auth\/oidc\/login\?return_to=([^"]*)" class="btn btn-secondary" id="provider-sign-in">Sign in with Acme SSO<\/a>/;

describe("Sign in with <provider> on the sign-in page", () => {
  test("shown when a provider is configured, returning to /", async () => {
    const { h } = await withOwner();
    const page = await browserOf(h, { oidc: true }).get("/");
    expect(page.status).toBe(200);
    expect(decodeURIComponent(LOGIN_LINK.exec(page.text)?.[1] ?? "")).toBe("/");
  });

  test("absent when identity-provider sign-in is off", async () => {
    const { h } = await withOwner();
    const page = await browserOf(h).get("/");
    expect(page.text).toContain('id="sign-in-form"');
    expect(page.text).not.toContain("Sign in with");
    expect(page.text).not.toContain("/v1/auth/oidc");
  });

  test("absent on the first-user page: the owner registers with a password", async () => {
    const page = await browserOf(await createHarness(), { oidc: true }).get("/");
    expect(page.text).toContain("Create the owner account");
    expect(page.text).not.toContain("/v1/auth/oidc");
  });
});

describe("Sign in with <provider> on the approval page", () => {
  async function pendingProposal() {
    const { h, owner } = await withOwner();
    await createVault(h, owner.token, "v1");
    return { h, ...(await fileAgentProposal(h, owner.token, "v1")) };
  }

  test("returns to the approval page itself, token and all, as a same-origin path", async () => {
    const { h, path, token } = await pendingProposal();
    const page = await browserOf(h, { oidc: true }).get(path);
    expect(page.status).toBe(200);
    const returnTo = decodeURIComponent(LOGIN_LINK.exec(page.text)?.[1] ?? "");
    expect(returnTo).toBe(path);
    expect(returnTo.startsWith("/approve/")).toBe(true);
    expect(new URLSearchParams(returnTo.split("?")[1]).get("token")).toBe(token);
  });

  test("absent when off, and once the viewer is signed in", async () => {
    const { h, path } = await pendingProposal();
    expect((await browserOf(h).get(path)).text).not.toContain("/v1/auth/oidc");
    const signedIn = browserOf(h, { oidc: true });
    expect((await signInPage(signedIn, "owner@example.com")).status).toBe(303);
    const page = await signedIn.get(path);
    expect(page.text).toContain('name="decision"');
    expect(page.text).not.toContain("/v1/auth/oidc");
  });

  test("the link starts the API's flow (302 to the provider), and the API takes the page's return_to", async () => {
    const { h, path } = await pendingProposal();
    const b = browserOf(h, { oidc: true });
    const href =
      LOGIN_LINK.exec((await b.get(path)).text)?.[0]
        .match(/href="([^"]+)"/)?.[1]
        ?.replaceAll("&amp;", "&") ?? "";
    const res = await b.get(href);
    expect(res.status).toBe(302);
    expect(res.location).toBe(`${ISSUER}/auth`);
  });
});

describe("providerLoginHref", () => {
  test("keeps a same-origin path whole, query and all; anything else becomes /", () => {
    const path = `/approve/7?token=${encodeURIComponent("a&b=c#d")}`;
    expect(new URL(providerLoginHref(path), "http://x").searchParams.get("return_to")).toBe(path);
    for (const bad of ["//evil.example/x", "/\\evil.example", "https://evil.example/", "approve/1", "/a\nb", ""]) {
      expect(providerLoginHref(bad)).toBe("/v1/auth/oidc/login?return_to=%2F");
    }
  });
});

describe("Sign-in providers on the account page", () => {
  async function linked(h: Harness, userId: number, email: string, issuer = ISSUER) {
    return h.store.identities.create({ userId, issuer, subject: `sub-${crypto.randomUUID()}`, email, createdAt: h.clock.now() });
  }

  test("lists linked identities (issuer host, email there, when) with Unlink, and a Link form carrying the CSRF field", async () => {
    const { h, owner } = await withOwner();
    await linked(h, owner.user.id, "owner@acme.example");
    const b = browserOf(h, { oidc: true, session: owner.token });
    const page = await b.get("/account");
    expect(page.status).toBe(200);
    const section = page.text.slice(page.text.indexOf('id="providers"'));
    expect(section).toContain("Sign-in providers");
    expect(section).toContain(`<span title="${ISSUER}">id.example.com</span>`);
    expect(section).toContain("owner@acme.example");
    expect(section).toContain('<time datetime="2026-01-01T00:00:00.000Z">2026-01-01 00:00 UTC</time>');
    expect(section).toMatch(
      /<form method="post" action="\/account\/identities\/\d+\/unlink" class="inline-form"><input type="hidden" name="csrf" value="[A-Za-z0-9_-]{43}"\/>/,
    );
    expect(section).toMatch(
      /<form method="post" action="\/v1\/auth\/oidc\/link" id="link-provider" aria-label="Link Acme SSO"><input type="hidden" name="csrf" value="[A-Za-z0-9_-]{43}"\/>/,
    );
    expect(section).toContain("Link Acme SSO");
  });

  test("with nothing linked: says so and offers Link", async () => {
    const { h, owner } = await withOwner();
    const page = await browserOf(h, { oidc: true, session: owner.token }).get("/account");
    expect(page.text).toContain('id="no-identities"');
    expect(page.text).toContain('action="/v1/auth/oidc/link"');
  });

  test("off: no section at all, unless identities linked earlier remain (listed, Unlink only)", async () => {
    const { h, owner } = await withOwner();
    const before = await browserOf(h, { session: owner.token }).get("/account");
    expect(before.text).not.toContain("Sign-in providers");
    await linked(h, owner.user.id, "owner@acme.example");
    const after = await browserOf(h, { session: owner.token }).get("/account");
    expect(after.text).toContain("Sign-in providers");
    expect(after.text).toContain("turned off on this broker");
    expect(after.text).toContain("/unlink");
    expect(after.text).not.toContain("/v1/auth/oidc/link");
  });

  test("Unlink removes the identity and says so", async () => {
    const { h, owner } = await withOwner();
    const identity = await linked(h, owner.user.id, "owner@acme.example");
    const b = browserOf(h, { oidc: true, session: owner.token });
    const res = await b.submit(`/account/identities/${identity.id}/unlink`, {});
    expect(res.location).toBe("/account#providers");
    expect(res.text).toContain("Unlinked id.example.com. It no longer signs you in.");
    expect(res.text).toContain('id="no-identities"');
    expect(await h.store.identities.forUser(owner.user.id)).toEqual([]);
  });

  test("a provider-only person cannot unlink their last way in (409 from the domain, shown as an error)", async () => {
    const { h } = await withOwner();
    const user = await h.store.users.create({
      email: "pat@acme.example",
      passwordHash: randomBytes(32),
      passwordSalt: randomBytes(16),
      passwordParams: PASSWORDLESS_PARAMS,
      role: "member",
      createdAt: h.clock.now(),
    });
    const identity = await linked(h, user.id, "pat@acme.example");
    const session = await mintUserSession(h.store, user.id, h.clock.now());
    const b = browserOf(h, { oidc: true, session: session.token.reveal() });
    const res = await b.submit(`/account/identities/${identity.id}/unlink`, {});
    expect(res.text).toContain('class="flash flash-error"');
    expect(res.text).toContain("This is your only way to sign in");
    expect((await h.store.identities.forUser(user.id)).length).toBe(1);
  });

  test("someone else's identity, a made-up id and a post without the CSRF field change nothing", async () => {
    const { h, owner } = await withOwner();
    const other = await register(h, "other@example.com");
    const theirs = await linked(h, other.user.id, "other@acme.example");
    const b = browserOf(h, { oidc: true, session: owner.token });
    for (const id of [String(theirs.id), "999999", "abc"]) {
      const res = await b.submit(`/account/identities/${id}/unlink`, {});
      expect(res.text).toContain("No such linked identity.");
    }
    const forged = await b.post(`/account/identities/${theirs.id}/unlink`, {}, SAME_ORIGIN, false);
    expect(forged.status).toBe(403);
    expect((await h.store.identities.forUser(other.user.id)).length).toBe(1);
  });

  test("Link posts to the API's flow (303 to the provider); coming back with ?linked=1 says it worked", async () => {
    const { h, owner } = await withOwner();
    const b = browserOf(h, { oidc: true, session: owner.token });
    await b.get("/account");
    const res = await b.post("/v1/auth/oidc/link", {});
    expect(res.status).toBe(303);
    expect(res.location).toBe(`${ISSUER}/auth`);
    // form-action covers the redirect after the post: the account page lets its forms end at the provider, no other page does.
    const account = await b.get("/account");
    expect(account.headers.get("content-security-policy")).toContain("form-action 'self' https://id.example.com;");
    expect((await b.get("/")).headers.get("content-security-policy")).toContain("form-action 'self';");
    const back = await b.get("/account?linked=1");
    expect(back.text).toContain('<div class="flash flash-success" role="status" id="flash">Linked Acme SSO. You can now sign in with it.</div>');
  });

  test("signed out: the unlink route sends the visitor to sign in", async () => {
    const { h, owner } = await withOwner();
    const identity = await linked(h, owner.user.id, "owner@acme.example");
    const b = browserOf(h, { oidc: true });
    const res = await b.submit(`/account/identities/${identity.id}/unlink`, {});
    expect(res.location).toBe("/");
    expect((await h.store.identities.forUser(owner.user.id)).length).toBe(1);
  });
});
