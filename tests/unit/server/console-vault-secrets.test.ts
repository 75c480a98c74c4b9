// The console's credentials and services pages through app.request(): every action of a member,
// a proxy-role person refused everything but the names, the reveal only after the password (and
// the sign-in throttle), a stored sentinel in no HTML but the one reveal response, the new-host
// warning, the public-suffix refusal as a flash, CSRF refusals.

import { beforeEach, describe, expect, test } from "bun:test";
import { addUser, type Harness, PASSWORD, sentinel, setCredential } from "./fixtures.ts";
import { type PageBrowser, SAME_ORIGIN, setUpOwnerConsole, signIn } from "./console-fixtures.ts";

let h: Harness;
let b: PageBrowser;
let owner: string;
beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
});

const storedKeys = async () => (await h.call("GET", "/v1/vaults/v1/credentials", { token: owner })).body.credentials.map((c: { key: string }) => c.key);
const storedServices = async () => (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services;

describe("credentials page", () => {
  test("empty state, set, replace, delete with confirmation; values never echoed", async () => {
    const empty = await b.get("/vaults/v1/credentials");
    expect(empty.status).toBe(200);
    expect(empty.text).toContain("No credentials yet");
    expect(empty.text).toContain('type="password"');

    const first = sentinel("first");
    const set = await b.submit("/vaults/v1/credentials", { key: "API_KEY", value: first });
    expect(set.text).toContain("Credential API_KEY saved.");
    expect(set.text).toContain("API_KEY");
    expect(await storedKeys()).toEqual(["API_KEY"]);

    const manage = await b.get("/vaults/v1/credentials/API_KEY");
    expect(manage.status).toBe(200);
    expect(manage.text).toContain("Replace value");
    const second = sentinel("second");
    const replaced = await b.submit("/vaults/v1/credentials/API_KEY", { value: second });
    expect(replaced.text).toContain("The value of API_KEY was replaced.");
    expect((await h.call("GET", "/v1/vaults/v1/credentials/API_KEY", { token: owner })).body.value).toBe(second);

    const bad = await b.submit("/vaults/v1/credentials", { key: "lower case", value: "x" });
    expect(bad.text).toContain("Key must be a credential key name");

    const unconfirmed = await b.submit("/vaults/v1/credentials/API_KEY/delete", { confirm: "nope" });
    expect(unconfirmed.text).toContain("Type API_KEY exactly to confirm");
    expect(await storedKeys()).toEqual(["API_KEY"]);
    const deleted = await b.submit("/vaults/v1/credentials/API_KEY/delete", { confirm: "API_KEY" });
    expect(deleted.text).toContain("Credential API_KEY deleted.");
    expect(await storedKeys()).toEqual([]);

    for (const p of b.pages) expect({ path: p.path, leaked: p.html.includes(first) || p.html.includes(second) }).toEqual({ path: p.path, leaked: false });
    for (const line of b.logs) expect(line.includes(first) || line.includes(second)).toBe(false);
  });

  test("reveal: only after the right password, on one no-store POST response; the sentinel is in no other page", async () => {
    const secret = sentinel("reveal");
    await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
    for (const path of [
      "/vaults/v1",
      "/vaults/v1/credentials",
      "/vaults/v1/credentials/API_KEY",
      "/vaults/v1/credentials/API_KEY/reveal",
      "/vaults/v1/services",
    ]) {
      expect((await b.get(path)).status).toBe(200);
    }
    expect(b.pages.at(-2)!.html).toContain('action="/vaults/v1/credentials/API_KEY/reveal"');
    const wrong = await b.submit("/vaults/v1/credentials/API_KEY/reveal", { password: "not my password" });
    expect(wrong.text).toContain("That password is not right. Nothing was shown.");
    const short = await b.submit("/vaults/v1/credentials/API_KEY/reveal", { password: "x" });
    expect(short.text).toContain("That password is not right.");

    const shown = await b.post("/vaults/v1/credentials/API_KEY/reveal", { password: PASSWORD });
    expect(shown.status).toBe(200);
    expect(shown.text).toContain(secret);
    expect(shown.headers.get("cache-control")).toBe("no-store");
    expect(shown.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(b.jar.get("broker_flash")).toBeUndefined();

    const carrying = b.pages.filter((p) => p.html.includes(secret));
    expect(carrying.map((p) => `${p.method} ${p.path} ${p.status}`)).toEqual(["POST /vaults/v1/credentials/API_KEY/reveal 200"]);
    await b.get("/vaults/v1/credentials");
    expect(b.pages.at(-1)!.html.includes(secret)).toBe(false);
    for (const line of b.logs) expect(line.includes(secret)).toBe(false);
  });

  test("reveal failures count towards the sign-in throttle", async () => {
    await setCredential(h, { token: owner }, "v1", "API_KEY", sentinel("throttled"));
    let last = "";
    for (let i = 0; i < 12; i++) last = (await b.submit("/vaults/v1/credentials/API_KEY/reveal", { password: `wrong password ${i}` })).text;
    expect(last).toContain("Too many attempts");
    const right = await b.post("/vaults/v1/credentials/API_KEY/reveal", { password: PASSWORD });
    expect(right.status).toBe(303); // still throttled: nothing shown
  });

  test("a proxy-role person sees names only: no forms, every action refused, nothing changed", async () => {
    const secret = sentinel("proxy");
    await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
    await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    const p = await signIn(h, "proxy@example.com");
    const list = await p.get("/vaults/v1/credentials");
    expect(list.status).toBe(200);
    expect(list.text).toContain("API_KEY");
    expect(list.text).toContain("cannot see or change their values");
    expect(list.text).not.toContain('type="password"');
    expect(list.text).not.toContain("/vaults/v1/credentials/API_KEY");
    for (const path of ["/vaults/v1/credentials/API_KEY", "/vaults/v1/credentials/API_KEY/reveal"]) expect((await p.get(path)).status).toBe(403);

    const attempts: [string, Record<string, string>][] = [
      ["/vaults/v1/credentials", { key: "API_KEY", value: "changed value" }],
      ["/vaults/v1/credentials/API_KEY", { value: "changed value" }],
      ["/vaults/v1/credentials/API_KEY/delete", { confirm: "API_KEY" }],
    ];
    for (const [path, form] of attempts) expect((await p.submit(path, form)).text).toContain("does not allow this");
    const reveal = await p.post("/vaults/v1/credentials/API_KEY/reveal", { password: PASSWORD });
    expect(reveal.status).not.toBe(200);
    expect((await h.call("GET", "/v1/vaults/v1/credentials/API_KEY", { token: owner })).body.value).toBe(secret);

    const services = await p.get("/vaults/v1/services");
    expect(services.text).not.toContain("Add a service");
    expect((await p.get("/vaults/v1/services/example.com/edit")).status).toBe(403);
    expect((await p.submit("/vaults/v1/services", { host: "api.example.com", auth_type: "bearer", credential_key: "API_KEY", enabled: "on" })).text).toContain(
      "does not allow this",
    );
    expect(await storedServices()).toEqual([]);
    for (const page of p.pages) expect(page.html.includes(secret)).toBe(false);
  });

  test("cross-site posts are refused and change nothing", async () => {
    for (const [headers, csrf] of [
      [{ origin: "http://evil.example" }, true],
      [{ "sec-fetch-site": "cross-site" }, true],
      [SAME_ORIGIN, false],
    ] as const) {
      expect((await b.post("/vaults/v1/credentials", { key: "EVIL", value: "x" }, headers, csrf)).status).toBe(403);
      expect((await b.post("/vaults/v1/services", { host: "evil.example", auth_type: "passthrough", enabled: "on" }, headers, csrf)).status).toBe(403);
    }
    await setCredential(h, { token: owner }, "v1", "API_KEY", sentinel("csrf"));
    const res = await b.post("/vaults/v1/credentials/API_KEY/reveal", { password: PASSWORD }, { "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    expect(res.text).toContain("Form refused");
    expect(await storedKeys()).toEqual(["API_KEY"]);
    expect(await storedServices()).toEqual([]);
  });
});

describe("services page", () => {
  test("add every auth type, edit, disable, enable, remove", async () => {
    expect((await b.get("/vaults/v1/services")).text).toContain("No services yet");
    const forms: Record<string, string>[] = [
      { host: "api.bearer.test", auth_type: "bearer", credential_key: "BEARER_KEY", description: "Bearer API", enabled: "on" },
      { host: "api.basic.test", auth_type: "basic", credential_key: "BASIC_KEY", username: "robot", enabled: "on" },
      { host: "api.header.test:8443", auth_type: "header", credential_key: "HEADER_KEY", header_name: "X-Api-Key", header_prefix: "Token ", enabled: "on" },
      { host: "*.pass.test", auth_type: "passthrough", credential_key: "IGNORED", username: "ignored", description: "Open" },
    ];
    for (const f of forms) expect((await b.submit("/vaults/v1/services", f)).text).toContain(`Service ${f.host} added`);
    const byHost = Object.fromEntries((await storedServices()).map((s: { host: string }) => [s.host, s]));
    expect(byHost["api.bearer.test"]).toEqual({
      host: "api.bearer.test",
      description: "Bearer API",
      auth: { type: "bearer", token: "BEARER_KEY" },
      enabled: true,
    });
    expect(byHost["api.basic.test"].auth).toEqual({ type: "basic", token: "BASIC_KEY", username: "robot" });
    expect(byHost["api.header.test:8443"].auth).toEqual({ type: "header", token: "HEADER_KEY", header: "x-api-key", prefix: "Token " });
    expect(byHost["*.pass.test"]).toEqual({ host: "*.pass.test", description: "Open", auth: { type: "passthrough" }, enabled: false });

    const list = await b.get("/vaults/v1/services");
    for (const text of ["api.header.test:8443", "x-api-key", "Bearer API", "robot", "Passthrough", "disabled", "enabled"]) expect(list.text).toContain(text);

    const edit = await b.get(`/vaults/v1/services/${encodeURIComponent("api.basic.test")}/edit`);
    expect(edit.status).toBe(200);
    expect(edit.text).toContain('value="robot"');
    const saved = await b.submit("/vaults/v1/services/api.basic.test", {
      auth_type: "basic",
      credential_key: "BASIC_KEY",
      description: "now without user",
      enabled: "on",
    });
    expect(saved.text).toContain("Service api.basic.test updated.");
    expect((await storedServices()).find((s: { host: string }) => s.host === "api.basic.test")).toEqual({
      host: "api.basic.test",
      description: "now without user",
      auth: { type: "basic", token: "BASIC_KEY" },
      enabled: true,
    });

    expect((await b.submit("/vaults/v1/services/api.bearer.test/disable", {})).text).toContain("Service api.bearer.test disabled");
    expect((await storedServices()).find((s: { host: string }) => s.host === "api.bearer.test").enabled).toBe(false);
    expect((await b.submit("/vaults/v1/services/api.bearer.test/enable", {})).text).toContain("Service api.bearer.test enabled");

    const path = `/vaults/v1/services/${encodeURIComponent("*.pass.test")}/remove`;
    expect((await b.submit(path, { confirm: "wrong" })).text).toContain("Type *.pass.test exactly to confirm");
    expect((await b.submit(path, { confirm: "*.pass.test" })).text).toContain("Service *.pass.test removed.");
    expect((await storedServices()).map((s: { host: string }) => s.host).sort()).toEqual(["api.basic.test", "api.bearer.test", "api.header.test:8443"]);
  });

  test("refusals keep the typed form: public-suffix wildcard, duplicate host, bad header", async () => {
    const ps = await b.post("/vaults/v1/services", { host: "*.co.uk", auth_type: "passthrough", description: "typed text", enabled: "on" });
    expect(ps.status).toBe(400);
    expect(ps.text).toContain('id="flash"');
    expect(ps.text).toMatch(/public suffix/i);
    expect(ps.text).toContain('value="typed text"');
    await b.submit("/vaults/v1/services", { host: "api.x.test", auth_type: "passthrough", enabled: "on" });
    const dup = await b.post("/vaults/v1/services", { host: "api.x.test", auth_type: "passthrough", enabled: "on" });
    expect(dup.status).toBe(409);
    expect(dup.text).toContain("already exists");
    const header = await b.post("/vaults/v1/services", { host: "api.y.test", auth_type: "header", credential_key: "K", header_name: "Host", enabled: "on" });
    expect(header.status).toBe(400);
    expect(header.text).toContain("header name the broker does not reserve");
    expect((await storedServices()).map((s: { host: string }) => s.host)).toEqual(["api.x.test"]);
  });

  test("sending an existing credential to a new host asks first; confirming applies it", async () => {
    const secret = sentinel("newhost");
    await setCredential(h, { token: owner }, "v1", "API_KEY", secret);
    await b.submit("/vaults/v1/services", { host: "api.good.test", auth_type: "bearer", credential_key: "API_KEY", enabled: "on" });
    expect((await storedServices()).map((s: { host: string }) => s.host)).toEqual([]); // asked first
    const warn = b.pages.at(-1)!;
    expect(warn.status).toBe(200);
    expect(warn.html).toContain("sends your existing credential");
    expect(warn.html).toContain("api.good.test");
    const ok = await b.submit("/vaults/v1/services", {
      host: "api.good.test",
      auth_type: "bearer",
      credential_key: "API_KEY",
      enabled: "on",
      confirm_new_host: "yes",
    });
    expect(ok.text).toContain("Service api.good.test added.");

    // Editing the service it already goes to: no question. Pointing another service at it: asked.
    await b.submit("/vaults/v1/services/api.good.test", { auth_type: "header", credential_key: "API_KEY", header_name: "X-Key", enabled: "on" });
    expect(b.pages.at(-1)!.html).toContain("Service api.good.test updated.");
    await b.submit("/vaults/v1/services", { host: "api.other.test", auth_type: "passthrough", enabled: "on" });
    const edit = await b.post("/vaults/v1/services/api.other.test", { auth_type: "bearer", credential_key: "API_KEY", enabled: "on" });
    expect(edit.status).toBe(200);
    expect(edit.text).toContain("sends your existing credential");
    expect((await storedServices()).find((s: { host: string }) => s.host === "api.other.test").auth).toEqual({ type: "passthrough" });
    for (const p of b.pages) expect(p.html.includes(secret)).toBe(false);
  });
});

describe("red-team mends", () => {
  test("a not-found page never quotes the key or host taken from the URL", async () => {
    const spoof = "SESSION EXPIRED. Sign in again at https://broker-login.evil.example";
    for (const path of [
      `/vaults/v1/credentials/${encodeURIComponent(spoof)}/reveal`,
      `/vaults/v1/credentials/${encodeURIComponent(spoof)}`,
      `/vaults/v1/services/${encodeURIComponent(spoof)}/edit`,
    ]) {
      const res = await b.get(path);
      expect(res.status).toBe(404);
      expect(res.text).not.toContain("broker-login.evil.example");
      expect(res.text).not.toContain("SESSION EXPIRED");
    }
  });

  test("a CSRF cookie this server did not mint is refused, even when the form echoes it", async () => {
    const planted = new Map(b.jar);
    b.jar.set([...b.jar.keys()].find((k) => k.endsWith("broker_csrf")) ?? "broker_csrf", "x");
    const res = await b.post("/vaults/v1/credentials", { key: "PLANTED", value: sentinel("planted"), csrf: "x" }, SAME_ORIGIN, false);
    expect(res.status).toBe(403);
    expect(await storedKeys()).not.toContain("PLANTED");
    for (const [k, v] of planted) b.jar.set(k, v);
  });
});
