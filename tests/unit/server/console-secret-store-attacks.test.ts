// Attacks on the console's secret store pages (issue 36) through app.request(): markup smuggled into every
// text a page shows that someone other than the viewer chose (a reference's path, field and version; a
// store's error in words; a share's path prefixes; a connection's settings; an agent's slot description),
// cross-site and token-less posts to every new form, secrets typed into a refused form, the pages of one
// vault showing another vault's connections or references, and approval pages answered with a reference
// the vault may not use or outside its share's prefixes. A stand-in for the stores' runtime says how each
// read went, its error text chosen by the test (a store's words reach pages through it).

import { beforeEach, describe, expect, test } from "bun:test";
import type { ReferenceStatus, SecretStoreRuntime } from "../../../src/identity/index.ts";
import { formatReference, type SecretReference } from "../../../src/policy/index.ts";
import { createPageBrowser, type PageBrowser, SAME_ORIGIN, setUpOwnerConsole, signIn } from "./console-fixtures.ts";
import { addAgent, addUser, createVault, type Harness, sentinel } from "./fixtures.ts";

let h: Harness;
let b: PageBrowser;
let owner: string;

/** Markup that would run if a page put it out raw. */
const SCRIPT = "<script>alert(1)</script>";
const IMG = "<img/src=x/onerror=alert(2)>";
const SVG = "'\"><svg/onload=alert(3)>";
/** What no page may hold unescaped. */
const RAW = ["<script>alert(", "<img/src=x", "<svg/onload", "onerror=alert(2)>", "onload=alert(3)>"];

function playStores(harness: Harness) {
  const runtime: SecretStoreRuntime = {
    // Every read "fails" with words quoting the reference, as a store's client error names the path it read.
    status: (_vaultId, r) => ({ lastError: `the store refused ${formatReference(r)} ${IMG}` }),
    readNow: async () => {},
    connectionChanged() {},
  };
  (harness.domain as { secretStores?: SecretStoreRuntime }).secretStores = runtime;
}

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
  playStores(h);
});

const VAULT_ADDRESS = "https://vault.example.com:8200";

async function apiConnection(name: string, extra: Record<string, unknown> = {}, token = owner) {
  const res = await h.call("POST", "/v1/secret-stores", {
    token,
    body: { name, kind: "vault", address: VAULT_ADDRESS, auth: { method: "token", token: sentinel("vault-token") }, ...extra },
  });
  expect(res.status).toBe(201);
  return res.body;
}

/** No page any of `browsers` received holds raw markup; returns how many pages were looked at. */
function expectNoRawMarkup(browsers: PageBrowser[]): number {
  let pages = 0;
  for (const br of browsers)
    for (const p of br.pages) {
      pages++;
      for (const raw of RAW)
        expect({ page: `${p.method} ${p.path}`, raw, found: p.html.includes(raw) }).toEqual({ page: `${p.method} ${p.path}`, raw, found: false });
    }
  return pages;
}

function expectNowhere(browsers: PageBrowser[], needles: string[]) {
  for (const br of browsers) {
    for (const p of br.pages)
      for (const n of needles) expect({ page: `${p.method} ${p.path}`, leaked: p.html.includes(n) }).toEqual({ page: `${p.method} ${p.path}`, leaked: false });
    for (const line of br.logs) for (const n of needles) expect(line.includes(n)).toBe(false);
  }
  for (const line of h.logs) for (const n of needles) expect(line.includes(n)).toBe(false);
}

describe("markup in what others chose", () => {
  test("a reference's path, field and version, and a store's error quoting them, are text on every page that shows them", async () => {
    await apiConnection("prod");
    expect((await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner })).status).toBe(200);
    // The grammar takes any printable ASCII but space: markup fits, as long as it has no space.
    const set = await h.call("PUT", "/v1/vaults/v1/credentials/HOSTILE", { token: owner, body: { ref: `prod:app/${SCRIPT}#${IMG}`, version: "7" } });
    expect(set.status).toBe(200);
    const viaForm = await b.submit("/vaults/v1/credentials", { source: "reference", key: "VIA_FORM", ref_text: `prod:${SVG}#${SCRIPT}`, version: "" });
    expect(viaForm.text).toContain("the first read failed"); // the flash quotes the reference and the store's words
    await addUser(h, owner, "v1", "member@example.com", "member");
    const member = await signIn(h, "member@example.com");
    for (const br of [b, member]) {
      for (const path of [
        "/vaults/v1/credentials",
        "/vaults/v1/credentials/HOSTILE",
        "/vaults/v1/credentials/VIA_FORM",
        "/vaults/v1/credentials/HOSTILE/reveal",
        "/vaults/v1/settings",
        "/vaults/v1/settings/secret-stores",
        "/vaults/v1/settings/secret-stores/prod",
      ])
        expect((await br.get(path)).status).toBe(200);
    }
    for (const path of ["/settings/secret-stores", "/settings/secret-stores/prod"]) expect((await b.get(path)).status).toBe(200);
    expect((await b.get("/settings/secret-stores/prod")).text).toContain("&lt;script&gt;");
    // Check now's flash quotes each failing reference and its error.
    const checked = await b.submit("/settings/secret-stores/prod/check", {});
    expect(checked.text).toContain("failed");
    expect(expectNoRawMarkup([b, member])).toBeGreaterThan(15);
  });

  test("a share's path prefixes, in the sharing list and in the flash that confirms them", async () => {
    await apiConnection("prod");
    const shared = await b.submit("/settings/secret-stores/prod/share", { vault: "v1", paths: `${SCRIPT}/\n${IMG}\n${SVG}` });
    expect(shared.text).toContain("at paths starting with");
    expect((await h.call("GET", "/v1/secret-stores/prod", { token: owner })).body.share_paths.v1).toEqual([`${SCRIPT}/`, IMG, SVG]);
    await addUser(h, owner, "v1", "admin@example.com", "admin");
    const admin = await signIn(h, "admin@example.com");
    await admin.get("/vaults/v1/settings/secret-stores/prod");
    await admin.get("/vaults/v1/settings");
    await b.get("/settings/secret-stores");
    expect(expectNoRawMarkup([b, admin])).toBeGreaterThan(3);
  });

  test("a connection's own settings (namespace, client id) as a vault admin typed them", async () => {
    await addUser(h, owner, "v1", "admin@example.com", "admin");
    const admin = await signIn(h, "admin@example.com");
    const added = await admin.submit("/vaults/v1/settings/secret-stores?kind=vault&method=token", {
      name: "own",
      address: VAULT_ADDRESS,
      namespace: SVG,
      auth_token: sentinel("t"),
    });
    // Either refused by the schema or shown as text: never markup.
    const az = await admin.submit("/vaults/v1/settings/secret-stores?kind=azure&method=client_credentials", {
      name: "own-az",
      vault_url: "https://x.vault.azure.net",
      auth_tenant: "contoso.onmicrosoft.com",
      auth_client_id: `${SCRIPT}${IMG}`,
      auth_client_secret: sentinel("cs"),
    });
    expect([added.status, az.status]).toEqual([200, 200]);
    for (const path of [
      "/vaults/v1/settings",
      "/vaults/v1/settings/secret-stores",
      "/vaults/v1/settings/secret-stores/own",
      "/vaults/v1/settings/secret-stores/own-az",
    ])
      await admin.get(path);
    for (const path of ["/settings/secret-stores", "/settings/secret-stores/own", "/settings/secret-stores/own-az"]) await b.get(path);
    expect(expectNoRawMarkup([b, admin])).toBeGreaterThan(8);
  });

  test("an agent's slot and service descriptions on the console's proposals page and on /approve, with the reference field beside them", async () => {
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.example.com", description: `svc ${SCRIPT}`, auth: { type: "bearer", token: "K" } }],
        credentials: [{ action: "set", key: "K", description: `${IMG} paste ${SVG} here` }],
        message: `urgent ${SCRIPT}`,
      },
    });
    expect(res.status).toBe(201);
    const url = new URL(res.body.approval_url);
    const page = await b.get(`${url.pathname}${url.search}`);
    expect(page.text).toContain('name="ref_K"');
    await b.get("/vaults/v1/proposals");
    // A refusal's notice quotes the reference the approver typed (markup included).
    const refused = await b.post(
      `/approve/${res.body.id}/decide`,
      { token: url.searchParams.get("token")!, decision: "allow", value_K: "", ref_K: `nope:${SCRIPT}` },
      SAME_ORIGIN,
    );
    expect(refused.status).toBe(400);
    const viaConsole = await b.submit(`/vaults/v1/proposals/${res.body.id}/approve`, { value_K: "", ref_K: `nope:${IMG}` });
    expect(viaConsole.text).toContain("no secret store connection named nope");
    expect(expectNoRawMarkup([b])).toBeGreaterThan(3);
    // The approve page is not a console page: its own answers are recorded here too.
    expect(page.text).not.toContain(SCRIPT);
    expect(refused.text).not.toContain(SCRIPT);
  });
});

describe("forms posted from elsewhere", () => {
  test("every new form refuses a post without the page's CSRF token, or from another site, and changes nothing", async () => {
    await apiConnection("prod");
    await apiConnection("keep");
    await h.call("PUT", "/v1/secret-stores/keep/vaults/v1", { token: owner });
    await h.call("PUT", "/v1/vaults/v1/credentials/DB", { token: owner, body: { ref: "keep:app/db#password" } });
    await b.get("/");
    const forms: [string, Record<string, string>][] = [
      ["/settings/secret-stores?kind=vault&method=token", { name: "csrf-made", address: VAULT_ADDRESS, auth_token: "t" }],
      ["/settings/secret-stores/prod/settings", { address: "https://evil.example.com", auth_token: "t" }],
      ["/settings/secret-stores/prod/check", {}],
      ["/settings/secret-stores/prod/share", { vault: "v1" }],
      ["/settings/secret-stores/keep/unshare", { vault: "v1" }],
      ["/settings/secret-stores/prod/delete", { confirm: "prod" }],
      ["/vaults/v1/settings/secret-stores?kind=vault&method=token", { name: "csrf-own", address: VAULT_ADDRESS, auth_token: "t" }],
      ["/vaults/v1/settings/secret-stores/prod/share", { vault: "v1" }],
      ["/vaults/v1/credentials", { source: "reference", key: "CSRF_REF", ref_text: "keep:app/other#x" }],
      ["/vaults/v1/credentials/DB", { source: "reference", ref_text: "keep:evil/path#x" }],
    ];
    const tries = [
      { name: "no token", headers: SAME_ORIGIN, csrf: false },
      { name: "cross-site", headers: { origin: "https://evil.example", "sec-fetch-site": "cross-site" }, csrf: true },
      { name: "same-site sibling", headers: { origin: "https://x.broker.test", "sec-fetch-site": "same-site" }, csrf: true },
    ];
    for (const [path, form] of forms)
      for (const t of tries) {
        const res = await b.post(path, t.csrf ? form : { ...form, csrf: "" }, t.headers, t.csrf);
        expect({ path, try: t.name, status: res.status }).toEqual({ path, try: t.name, status: 403 });
      }
    const after = (await h.call("GET", "/v1/secret-stores", { token: owner })).body.connections;
    expect(after.map((c: { name: string }) => c.name).sort()).toEqual(["keep", "prod"]);
    expect(after.find((c: { name: string }) => c.name === "prod").settings.address).toBe(VAULT_ADDRESS);
    expect(after.find((c: { name: string }) => c.name === "prod").shared_with).toEqual([]);
    expect(after.find((c: { name: string }) => c.name === "keep").shared_with).toEqual(["v1"]);
    const creds = (await h.call("GET", "/v1/vaults/v1/credentials", { token: owner })).body.credentials;
    expect(creds.map((c: { key: string; reference?: { text: string } }) => [c.key, c.reference?.text])).toEqual([["DB", "keep:app/db#password"]]);
  });

  test("/approve/:id/decide with a reference refuses a cross-site post and one without the page's token", async () => {
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.example.com", description: "x", auth: { type: "bearer", token: "K" } }],
        credentials: [{ action: "set", key: "K", description: "k" }],
      },
    });
    const url = new URL(res.body.approval_url);
    await b.get(`${url.pathname}${url.search}`);
    const form = { token: url.searchParams.get("token")!, decision: "allow", value_K: "", ref_K: "prod:attacker/chosen#x" };
    expect((await b.post(`/approve/${res.body.id}/decide`, form, { origin: "https://evil.example", "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await b.post(`/approve/${res.body.id}/decide`, { ...form, csrf: "" }, SAME_ORIGIN, false)).status).toBe(403);
    expect((await h.call("GET", `/v1/proposals/${res.body.id}`, { token: owner })).body.status).toBe("pending");
  });
});

describe("secrets typed into a refused form", () => {
  test("the change form of each kind and sign-in, refused, shows none of the secrets typed (same method or another)", async () => {
    const kinds: [string, Record<string, unknown>, string, Record<string, string>][] = [
      ["v-tok", { kind: "vault", address: VAULT_ADDRESS, auth: { method: "token", token: "t" } }, "token", { auth_token: sentinel("vault-token") }],
      [
        "v-app",
        { kind: "vault", address: VAULT_ADDRESS, auth: { method: "token", token: "t" } },
        "approle",
        { auth_role_id: sentinel("role-id"), auth_secret_id: sentinel("secret-id") },
      ],
      [
        "a-keys",
        { kind: "aws", region: "eu-west-1", auth: { method: "keys", access_key_id: "AKIDX", secret_access_key: "s" } },
        "keys",
        { auth_access_key_id: sentinel("akid"), auth_secret_access_key: sentinel("sak"), auth_session_token: sentinel("st") },
      ],
      [
        "az",
        {
          kind: "azure",
          vault_url: "https://x.vault.azure.net",
          auth: { method: "client_credentials", tenant: "t.example", client_id: "c", client_secret: "s" },
        },
        "client_credentials",
        { auth_tenant: "t.example", auth_client_id: "c", auth_client_secret: sentinel("client-secret") },
      ],
    ];
    const typed: string[] = [];
    for (const [name, body, method, secrets] of kinds) {
      expect((await h.call("POST", "/v1/secret-stores", { token: owner, body: { name, ...body } })).status).toBe(201);
      await b.get(`/settings/secret-stores/${name}?method=${method}`);
      for (const bad of [{ refresh_seconds: "5" }, { grace_seconds: "lots" }] as Record<string, string>[]) {
        const form: Record<string, string> = { ...secrets, ...bad };
        if (body.kind === "vault") form.address = VAULT_ADDRESS;
        if (body.kind === "aws") form.region = "eu-west-1";
        if (body.kind === "azure") form.vault_url = "https://x.vault.azure.net";
        const refused = await b.post(`/settings/secret-stores/${name}/settings?method=${method}`, form);
        expect({ name, status: refused.status }).toEqual({ name, status: 400 });
      }
      typed.push(
        ...Object.entries(secrets)
          .filter(([k]) => !["auth_tenant", "auth_client_id"].includes(k))
          .map(([, v]) => v),
      );
    }
    // Google's key file: a whole JSON document with a private key, typed into the add form and refused.
    const keyMaterial = sentinel("PRIVATE-KEY-MATERIAL");
    const googleKey = JSON.stringify({
      type: "service_account",
      client_email: "x@p.iam.gserviceaccount.com",
      private_key: `-----BEGIN PRIVATE KEY-----\n${keyMaterial}\n-----END PRIVATE KEY-----\n`,
    });
    const refusedAdd = await b.post("/settings/secret-stores?kind=google&method=service_account_key", {
      name: "g",
      project: "NOT A PROJECT",
      auth_key: googleKey,
    });
    expect(refusedAdd.status).toBe(400);
    typed.push(keyMaterial);
    expectNowhere([b], typed);
  });
});

describe("one vault's pages and another vault's connections", () => {
  test("a vault's admin sees neither another vault's references nor its share of a connection both use, nor its own connection", async () => {
    await createVault(h, owner, "v2");
    await apiConnection("both");
    await h.call("PUT", "/v1/secret-stores/both/vaults/v1", { token: owner, body: { paths: ["team-a/"] } });
    await h.call("PUT", "/v1/secret-stores/both/vaults/v2", { token: owner, body: { paths: ["team-b-secret-prefix/"] } });
    const v2own = await h.call("POST", "/v1/secret-stores", {
      token: owner,
      body: { name: "v2-own", kind: "vault", vault: "v2", address: "https://v2-internal.example.com", auth: { method: "token", token: "t" } },
    });
    expect(v2own.status).toBe(201);
    expect((await h.call("PUT", "/v1/vaults/v2/credentials/B_KEY", { token: owner, body: { ref: "both:team-b-secret-prefix/payroll#pw" } })).status).toBe(200);
    expect((await h.call("PUT", "/v1/vaults/v1/credentials/A_KEY", { token: owner, body: { ref: "both:team-a/db#pw" } })).status).toBe(200);
    await addUser(h, owner, "v1", "admin@example.com", "admin");
    const admin = await signIn(h, "admin@example.com");
    const seen: string[] = [];
    for (const path of [
      "/vaults/v1/settings",
      "/vaults/v1/settings/secret-stores",
      "/vaults/v1/settings/secret-stores/both",
      "/vaults/v1/credentials",
      "/vaults/v1/credentials/A_KEY",
    ]) {
      const p = await admin.get(path);
      expect({ path, status: p.status }).toEqual({ path, status: 200 });
      seen.push(p.text);
    }
    for (const text of seen) {
      expect(text).not.toContain("team-b-secret-prefix");
      expect(text).not.toContain("payroll");
      expect(text).not.toContain("B_KEY");
      expect(text).not.toContain("v2-internal");
      expect(text).not.toContain("v2-own");
    }
    expect(seen[2]).toContain("A_KEY");
    for (const path of [
      "/vaults/v2/settings/secret-stores",
      "/vaults/v2/settings/secret-stores/both",
      "/vaults/v2/settings/secret-stores/v2-own",
      "/vaults/v1/settings/secret-stores/v2-own",
      "/settings/secret-stores/both",
      "/settings/secret-stores/v2-own",
    ]) {
      const p = await admin.get(path);
      expect({ path, refused: [403, 404].includes(p.status) }).toEqual({ path, refused: true });
      expect(p.text).not.toContain("payroll");
      expect(p.text).not.toContain("v2-internal");
    }
    // Forms of the other vault's pages and of its connection, posted anyway.
    for (const [path, form] of [
      ["/vaults/v1/settings/secret-stores/v2-own/settings", { address: "https://evil.example.com", auth_token: "t" }],
      ["/vaults/v1/settings/secret-stores/v2-own/check", {}],
      ["/vaults/v1/settings/secret-stores/v2-own/delete", { confirm: "v2-own" }],
      ["/vaults/v2/settings/secret-stores/v2-own/delete", { confirm: "v2-own" }],
      ["/vaults/v1/settings/secret-stores/both/unshare", { vault: "v2" }],
      ["/vaults/v1/settings/secret-stores/both/share", { vault: "v1" }],
    ] as const) {
      const res = await admin.post(path, form);
      // A refusal is a 403/404 page, or (runAction's forms) a redirect whose flash says why; the state below is what counts.
      const shown = res.status === 303 ? (await admin.get(res.location!)).text : res.text;
      expect({ path, status: [303, 403, 404].includes(res.status), succeeded: /Shared:|Stopped sharing|removed\.|Saved:/.test(shown) }).toEqual({
        path,
        status: true,
        succeeded: false,
      });
    }
    const both = (await h.call("GET", "/v1/secret-stores/both", { token: owner })).body;
    expect(both.share_paths).toEqual({ v1: ["team-a/"], v2: ["team-b-secret-prefix/"] });
    expect((await h.call("GET", "/v1/secret-stores/v2-own", { token: owner })).body.settings.address).toBe("https://v2-internal.example.com");
  });

  test("a signed-in person who may not decide (another vault's admin) learns no connection from the approval link", async () => {
    await createVault(h, owner, "v2");
    await apiConnection("secret-name-of-v1-store");
    await h.call("PUT", "/v1/secret-stores/secret-name-of-v1-store/vaults/v1", { token: owner });
    await addUser(h, owner, "v2", "outsider@example.com", "admin");
    const outsider = await signIn(h, "outsider@example.com");
    const agent = await addAgent(h, owner, "v1", "admin", "bot");
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.example.com", description: "x", auth: { type: "bearer", token: "K" } }],
        credentials: [{ action: "set", key: "K", description: "k" }],
      },
    });
    const url = new URL(res.body.approval_url);
    const page = await outsider.get(`${url.pathname}${url.search}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain("secret-name-of-v1-store");
    expect(page.text).not.toContain('name="ref_K"');
    const decided = await outsider.post(
      `/approve/${res.body.id}/decide`,
      { token: url.searchParams.get("token")!, decision: "allow", value_K: "", ref_K: "secret-name-of-v1-store:x#y" },
      SAME_ORIGIN,
    );
    expect(decided.status).toBe(403);
    expect((await h.call("GET", `/v1/proposals/${res.body.id}`, { token: owner })).body.status).toBe("pending");
  });
});

describe("approval pages answered with a reference", () => {
  async function propose() {
    const agent = await addAgent(h, owner, "v1", "admin", `bot-${crypto.randomUUID().slice(0, 8)}`);
    const res = await h.call("POST", "/v1/proposals", {
      token: agent.token,
      headers: agent.headers,
      body: {
        services: [{ action: "set", host: "api.example.com", description: "x", auth: { type: "bearer", token: "K" } }],
        credentials: [{ action: "set", key: "K", description: "k" }],
      },
    });
    expect(res.status).toBe(201);
    const url = new URL(res.body.approval_url);
    return { id: res.body.id as number, path: `${url.pathname}${url.search}`, token: url.searchParams.get("token")! };
  }

  test("a reference outside the share's prefixes, or through a connection the vault may not use, is refused on both pages; the proposal stays pending", async () => {
    await createVault(h, owner, "v2");
    await apiConnection("narrow");
    await h.call("PUT", "/v1/secret-stores/narrow/vaults/v1", { token: owner, body: { paths: ["team-a/"] } });
    await apiConnection("not-shared");
    await h.call("POST", "/v1/secret-stores", {
      token: owner,
      body: { name: "v2-own", kind: "vault", vault: "v2", address: VAULT_ADDRESS, auth: { method: "token", token: "t" } },
    });
    const p = await propose();
    await b.get(p.path);
    const refs = [
      "narrow:prod/payments#key",
      "narrow:team-a/../prod/payments#key",
      "narrow:team-a/./x#key",
      "narrow:TEAM-A/x#key",
      "not-shared:team-a/x#key",
      "v2-own:team-a/x#key",
    ];
    for (const ref of refs) {
      const onApprove = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_K: "", ref_K: ref }, SAME_ORIGIN);
      expect({ ref, status: onApprove.status }).toEqual({ ref, status: 400 });
      const onConsole = await b.submit(`/vaults/v1/proposals/${p.id}/approve`, { value_K: "", ref_K: ref });
      expect({ ref, refused: /not one of them|no secret store connection named/.test(onConsole.text) }).toEqual({ ref, refused: true });
    }
    expect((await h.call("GET", `/v1/proposals/${p.id}`, { token: owner })).body.status).toBe("pending");
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: owner })).body.credentials).toEqual([]);
    // The API says the same.
    for (const ref of refs) {
      const api = await h.call("POST", `/v1/proposals/${p.id}/approve`, { token: owner, body: { credentials: { K: { ref } } } });
      expect({ ref, status: api.status }).toEqual({ ref, status: 400 });
    }
    const ok = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_K: "", ref_K: "narrow:team-a/db#key" }, SAME_ORIGIN);
    expect(ok.status).toBe(303);
    expect((await h.call("GET", "/v1/vaults/v1/credentials", { token: owner })).body.credentials[0].reference.text).toBe("narrow:team-a/db#key");
  });

  test("a value and a reference for one slot, however spelled, are refused; the value is never shown back", async () => {
    await apiConnection("prod");
    await h.call("PUT", "/v1/secret-stores/prod/vaults/v1", { token: owner });
    const p = await propose();
    await b.get(p.path);
    const value = sentinel("typed-value");
    for (const form of [
      { value_K: value, ref_K: "prod:app/k" },
      { value_K: value, ref_K: "  prod:app/k  " },
      { value_K: ` ${value}`, ref_K: "prod:app/k", version_K: "2" },
    ] as Record<string, string>[]) {
      const onApprove = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", ...form }, SAME_ORIGIN);
      expect(onApprove.status).toBe(400);
      const onConsole = await b.submit(`/vaults/v1/proposals/${p.id}/approve`, form);
      expect(onConsole.text).toContain("not both");
    }
    // A slot key the proposal does not ask for, answered with a reference, is refused too (never written).
    const extra = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_K: value, ref_OTHER_KEY: "prod:app/other" }, SAME_ORIGIN);
    expect(extra.status).toBe(400);
    expect((await h.call("GET", `/v1/proposals/${p.id}`, { token: owner })).body.status).toBe("pending");
    expectNowhere([b], [value]);
  });
});
