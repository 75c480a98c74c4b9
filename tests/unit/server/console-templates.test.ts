// The console's add-a-service steps through app.request(): the catalogue searched on the server, a
// template's form (operations, key choices, the person's own settings, a typed host where the template
// needs one) saved through the API's schemas, a new key leading on to the Credentials page, a custom
// form showing one auth type only, the catalogue's newer rules shown and applied with the service's own
// keys kept, and a proxy-role person refused every step. No value reaches any page.

import { beforeEach, describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { createMemoryLogger } from "../../../src/log.ts";
import { consoleContext, type ConsoleEnv } from "../../../src/server/console/context.tsx";
import { vaultServiceRoutes } from "../../../src/server/console/vault-services.tsx";
import { addUser, type Harness, sentinel, setCredential } from "./fixtures.ts";
import { createBrowser, type PageBrowser, setUpOwnerConsole, signIn } from "./console-fixtures.ts";

let h: Harness;
let b: PageBrowser;
let owner: string;
beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
});

const stored = async () => (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services;
const one = async (host: string) => (await stored()).find((s: { host: string }) => s.host === host);

describe("the catalogue", () => {
  test("the list links to the add pages; the search filters by id, name and host on the server", async () => {
    const list = await b.get("/vaults/v1/services");
    expect(list.text).toContain('href="/vaults/v1/services/new"');
    expect(list.text).not.toContain('id="add-service-form"');
    const all = await b.get("/vaults/v1/services/new");
    for (const id of ["github", "stripe", "openai"]) expect(all.text).toContain(`id="template-${id}"`);
    expect(all.text).toContain('id="custom-service"');
    const byHost = await b.get("/vaults/v1/services/new?q=api.stripe");
    expect(byHost.text).toContain('id="template-stripe"');
    expect(byHost.text).not.toContain('id="template-github"');
    const byName = await b.get("/vaults/v1/services/new?q=GitHub%20app");
    expect(byName.text).toContain('id="template-github-app"');
    expect(byName.text).not.toContain('id="template-gitlab"');
    const none = await b.get("/vaults/v1/services/new?q=no-such-api-anywhere");
    expect(none.text).toContain('id="no-template"');
    expect((await b.get("/vaults/v1/services/new?template=no-such")).status).toBe(404);
  });
});

describe("a template's form", () => {
  test("read by default; a stored key chosen; saved with the template's words; write added on edit, the key kept", async () => {
    const secret = sentinel("github");
    await setCredential(h, { token: owner }, "v1", "MY_GH", secret);
    const form = await b.get("/vaults/v1/services/new?template=github");
    expect(form.text).toMatch(/id="op-read"[^>]*checked/);
    expect(form.text).not.toMatch(/id="op-write"[^>]*checked/);
    expect(form.text).toContain('<option value="MY_GH">MY_GH</option>');
    expect(form.text).toContain('value="GITHUB_TOKEN"'); // the suggested name for a new key
    expect(form.text).not.toContain("Connect with"); // no provider configured
    const add = { template: "github", op_read: "on", key_token: "MY_GH", key_token_new: "GITHUB_TOKEN", description: "" };
    const asked = await b.post("/vaults/v1/services", add);
    expect(asked.text).toContain("sends your existing credential");
    const done = await b.submit("/vaults/v1/services", { ...add, confirm_new_host: "yes" });
    expect(done.text).toContain("Service api.github.com added.");
    expect(done.text).toContain("GitHub (api.github.com), read only");
    expect(await one("api.github.com")).toMatchObject({ auth: { type: "bearer", token: "MY_GH" }, template: { id: "github", operations: ["read"] } });

    const edit = await b.get("/vaults/v1/services/api.github.com/edit");
    expect(edit.text).toMatch(/id="op-read"[^>]*checked/);
    expect(edit.text).toContain('<option value="MY_GH" selected="">MY_GH</option>');
    const saved = await b.submit("/vaults/v1/services/api.github.com", {
      template: "github",
      op_read: "on",
      op_write: "on",
      key_token: "MY_GH",
      enabled: "on",
    });
    expect(saved.text).toContain("GitHub (api.github.com), read and write");
    expect(await one("api.github.com")).toMatchObject({ auth: { token: "MY_GH" }, template: { operations: ["read", "write"] } });
    for (const p of b.pages) expect(p.html.includes(secret)).toBe(false);
  });

  test("a new key: saved, then the Credentials page asks for its value with the name filled in", async () => {
    const res = await b.post("/vaults/v1/services", { template: "openai", op_read: "on", key_token: "*new", key_token_new: "OPENAI_PROD" });
    expect(res.status).toBe(303);
    expect(res.location).toBe("/vaults/v1/credentials?key=OPENAI_PROD#set-credential");
    const next = await b.get(res.location!);
    expect(next.text).toContain("Service api.openai.com added. Next, store the value of OPENAI_PROD");
    expect(next.text).toMatch(/name="key"[^>]*value="OPENAI_PROD"/);
    expect(await one("api.openai.com")).toMatchObject({ auth: { token: "OPENAI_PROD" }, template: { id: "openai" } });
    // Only a key name is ever prefilled.
    expect((await b.get("/vaults/v1/credentials?key=%3Cscript%3E")).text).not.toContain("&lt;script&gt;");
  });

  test("the person's own settings and host: asked for, refused when missing with the form kept, then stored", async () => {
    const form = await b.get("/vaults/v1/services/new?template=jira");
    expect(form.text).toContain('name="host"');
    expect(form.text).toContain('name="fill_username"');
    const missing = await b.post("/vaults/v1/services", { template: "jira", op_read: "on", key_token: "JIRA_TOKEN", host: "acme.atlassian.net" });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain("Username is needed for Jira Cloud");
    expect(missing.text).toContain('value="acme.atlassian.net"');
    const noHost = await b.post("/vaults/v1/services", { template: "jira", op_read: "on", key_token: "JIRA_TOKEN", fill_username: "me@example.com" });
    expect(noHost.status).toBe(400);
    expect(noHost.text).toContain('value="me@example.com"');
    const ok = await b.submit("/vaults/v1/services", {
      template: "jira",
      op_read: "on",
      key_token: "JIRA_TOKEN",
      host: "acme.atlassian.net",
      fill_username: "me@example.com",
    });
    expect(ok.text).toContain("Service acme.atlassian.net added.");
    expect(await one("acme.atlassian.net")).toMatchObject({
      auth: { type: "basic", token: "JIRA_TOKEN", username: "me@example.com" },
      template: { id: "jira" },
    });
  });

  test("'Connect with GitHub' only where the server says its provider is configured", async () => {
    const page = "/vaults/v1/services/new?template=github";
    expect((await b.get(page)).text).not.toContain("/services/connect/github");
    const app = new Hono<ConsoleEnv>();
    app.use("*", consoleContext(h.domain, createMemoryLogger()));
    app.route(
      "/",
      vaultServiceRoutes(undefined, (_c, id) => id === "github"),
    );
    const withConnect = createBrowser(app, { session: owner });
    const form = await withConnect.get(page);
    expect(form.text).toContain('href="/vaults/v1/services/connect/github"');
    expect(form.text).toContain("Connect with GitHub");
    expect((await withConnect.get("/vaults/v1/services/new?template=gitlab")).text).not.toContain("Connect with");
    expect((await withConnect.get("/vaults/v1/services/new?q=github")).text).toMatch(/id="template-github"[\s\S]*?connect<\/span>/);
  });

  test("the catalogue's newer rules: shown with a button that applies them, keeping the service's keys and settings", async () => {
    await b.submit("/vaults/v1/services", {
      template: "bitbucket",
      op_read: "on",
      key_token: "*new",
      key_token_new: "BB_KEY",
      fill_username: "me@example.com",
    });
    const old = [{ methods: ["GET"], paths: ["/old"] }];
    await h.domain.store.db.run("UPDATE services SET rules = ? WHERE host = ?", [JSON.stringify(old), "api.bitbucket.org"]);
    const list = await b.get("/vaults/v1/services");
    expect(list.text).toContain("catalogue changed");
    expect(list.text).toContain('action="/vaults/v1/services/api.bitbucket.org/catalogue"');
    const applied = await b.submit("/vaults/v1/services/api.bitbucket.org/catalogue", {});
    expect(applied.text).toContain("Service api.bitbucket.org updated");
    expect(applied.text).not.toContain("catalogue changed");
    const s = await one("api.bitbucket.org");
    expect(s.auth).toEqual({ type: "basic", token: "BB_KEY", username: "me@example.com" });
    expect(s.rules).not.toEqual(old);
    expect(s.template.catalogue_rules).toBeUndefined();
  });
});

describe("a custom service", () => {
  test("the type first, then only its fields; a new key name chosen in the select's place", async () => {
    const choice = await b.get("/vaults/v1/services/new?custom=1");
    expect(choice.text).toContain('href="/vaults/v1/services/new?custom=1&amp;type=query"');
    expect(choice.text).not.toContain('name="host"');
    const query = await b.get("/vaults/v1/services/new?custom=1&type=query");
    expect(query.text).toContain('name="query_param"');
    for (const other of ["header_name", "username", "path_template", "token_url", "access_key_id", "app_id"])
      expect(query.text).not.toContain(`name="${other}"`);
    await setCredential(h, { token: owner }, "v1", "OTHER", sentinel("other"));
    const res = await b.post("/vaults/v1/services", {
      host: "maps.example.com",
      auth_type: "query",
      credential_key: "*new",
      credential_key_new: "MAPS_KEY",
      query_param: "key",
      enabled: "on",
    });
    expect(res.location).toBe("/vaults/v1/credentials?key=MAPS_KEY#set-credential");
    expect((await one("maps.example.com")).auth).toEqual({ type: "query", token: "MAPS_KEY", param: "key" });
    const edit = await b.get("/vaults/v1/services/maps.example.com/edit");
    expect(edit.text).toContain('name="query_param"');
    expect(edit.text).not.toContain('name="header_name"');
    expect(edit.text).toContain('href="/vaults/v1/services/maps.example.com/edit?type=choose"');
    const asHeader = await b.get("/vaults/v1/services/maps.example.com/edit?type=header");
    expect(asHeader.text).toContain('name="header_name"');
    expect(asHeader.text).not.toContain('name="query_param"');
  });

  test("a proxy-role person gets none of the add or edit pages", async () => {
    await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    const p = await signIn(h, "proxy@example.com");
    expect((await p.get("/vaults/v1/services")).text).not.toContain("/services/new");
    for (const path of ["/vaults/v1/services/new", "/vaults/v1/services/new?template=github", "/vaults/v1/services/new?custom=1&type=bearer"]) {
      expect((await p.get(path)).status).toBe(403);
    }
    expect((await p.submit("/vaults/v1/services", { template: "github", op_read: "on", key_token: "K" })).text).toContain("does not allow this");
    expect(await stored()).toEqual([]);
  });
});
