// Service rules on the pages, through app.request(): the approval page and the console's Proposals
// page show each host's rules in words beside today's (wider marked), and the person narrows them
// in a box (refusals come back as typed, values never); the Services page lists, adds, edits and
// removes rules as text.

import { beforeEach, describe, expect, test } from "bun:test";
import { addAgent, type Harness, sentinel, setCredential } from "./fixtures.ts";
import { type PageBrowser, setUpOwnerConsole } from "./console-fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;
let agent: { token: string; headers: Record<string, string> };

beforeEach(async () => {
  ({ h, owner, b } = await setUpOwnerConsole());
  agent = await addAgent(h, owner, "v1", "proxy", "gh-bot");
});

const HOST = "api.github.test";
const ASKED = [
  { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
  { methods: ["DELETE"], paths: ["/repos/**"] },
];
const storedService = async (host = HOST) =>
  (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services.find((s: { host: string }) => s.host === host);

async function propose(rules: unknown = ASKED, withSlot = true) {
  const res = await h.call("POST", "/v1/proposals", {
    token: agent.token,
    headers: agent.headers,
    body: {
      services: [{ host: HOST, description: "GitHub issues", auth: { type: "bearer", token: "GH_TOKEN" }, ...(rules ? { rules } : {}) }],
      credentials: withSlot ? [{ key: "GH_TOKEN", description: "A token" }] : [],
    },
  });
  expect(res.status).toBe(201);
  const url = new URL(res.body.approval_url);
  return { id: res.body.id as number, page: `${url.pathname}${url.search}`, token: url.searchParams.get("token")! };
}

/** The text of a textarea named `name` in `html` (hono/jsx escapes it like any text). */
function boxText(html: string, name: string): string | undefined {
  const m = new RegExp(`<textarea[^>]*name="${name.replace(/[.*]/g, "\\$&")}"[^>]*>([^<]*)</textarea>`).exec(html);
  return m?.[1];
}

describe("the approval page", () => {
  test("a new host's rules in words and in the box; the person narrows them, and the narrowed rules are stored", async () => {
    const p = await propose();
    const page = await b.get(p.page);
    expect(page.status).toBe(200);
    expect(page.text).toContain("GET and HEAD on /repos/*/issues/**; DELETE on /repos/**");
    expect(page.text).toContain("new host");
    expect(boxText(page.text, `rules:${HOST}`)).toBe("GET HEAD /repos/*/issues/**\nDELETE /repos/**");
    const value = sentinel("page-rules");
    const res = await b.post(`/approve/${p.id}/decide`, {
      token: p.token,
      decision: "allow",
      value_GH_TOKEN: value,
      [`rules:${HOST}`]: "GET HEAD /repos/*/issues/**\n",
    });
    expect(res.status).toBe(303);
    expect((await storedService()).rules).toEqual([ASKED[0]]);
    const result = await b.get(res.location!);
    expect(result.text).toContain("Approved.");
    expect(result.text).toContain("Allowed now");
    for (const pg of b.pages) expect(pg.html.includes(value)).toBe(false);
  });

  test("bad rules are refused with the line named; the rules come back as typed, the value never", async () => {
    const p = await propose();
    const value = sentinel("refused");
    const typed = "GET HEAD /repos/*/issues/**\nGET /repos/../admin";
    const res = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_GH_TOKEN: value, [`rules:${HOST}`]: typed });
    expect(res.status).toBe(400);
    expect(res.text).toContain(`Rules for ${HOST}, line 2 (/repos/../admin): dot segments are not allowed`);
    expect(boxText(res.text, `rules:${HOST}`)).toBe(typed);
    expect(res.text).not.toContain(value);
    expect((await h.store.proposals.byId(p.id))?.status).toBe("pending");

    const emptied = await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_GH_TOKEN: value, [`rules:${HOST}`]: "  \n" });
    expect(emptied.status).toBe(400);
    expect(emptied.text).toContain("the box is empty, which would allow every method and path");
    expect((await h.store.proposals.byId(p.id))?.status).toBe("pending");
  });

  test("a form without the boxes keeps the rules asked for; with no rules asked, an empty box means none", async () => {
    const p = await propose();
    expect((await b.post(`/approve/${p.id}/decide`, { token: p.token, decision: "allow", value_GH_TOKEN: sentinel() })).status).toBe(303);
    expect((await storedService()).rules).toEqual(ASKED);
    const open = await propose(null, false);
    const page = await b.get(open.page);
    expect(page.text).toContain("every method and path");
    expect(boxText(page.text, `rules:${HOST}`)).toBe("");
    // Narrowing "everything" by typing rules is allowed too.
    expect((await b.post(`/approve/${open.id}/decide`, { token: open.token, decision: "allow", [`rules:${HOST}`]: "get /repos/a/issues" })).status).toBe(303);
    expect((await storedService()).rules).toEqual([{ methods: ["GET"], paths: ["/repos/a/issues"] }]);
  });

  test("against a current service: now and after approval, wider marked with what it adds", async () => {
    await setCredential(h, { token: owner }, "v1", "GH_TOKEN", sentinel());
    expect(
      (await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { host: HOST, auth: { type: "bearer", token: "GH_TOKEN" }, rules: [ASKED[0]] } }))
        .status,
    ).toBe(201);
    const wider = await propose(ASKED, false);
    const page = (await b.get(wider.page)).text;
    expect(page).toContain("changes a current service");
    expect(page).toMatch(/Allowed now<\/dt><dd id="service-0-rules-now">GET and HEAD on \/repos\/\*\/issues\/\*\*<\/dd>/);
    expect(page).toMatch(/After approval<\/dt><dd id="service-0-rules-asked">GET and HEAD on \/repos\/\*\/issues\/\*\*; DELETE on \/repos\/\*\*/);
    expect(page).toContain("wider than now");
    expect(page).toContain("Adds DELETE on /repos/**.");
    await h.call("POST", `/v1/proposals/${wider.id}/reject`, { token: owner });

    const narrower = await propose([{ methods: ["GET"], paths: ["/repos/a/issues/**"] }], false);
    const text = (await b.get(narrower.page)).text;
    expect(text).toContain("(narrower than now)");
    expect(text).not.toContain("wider than now");
  });
});

describe("the console's Proposals page", () => {
  test("rules in words and a box per host; narrowing applies; a refusal keeps the typed rules and drops the value", async () => {
    const p = await propose();
    const page = await b.get("/vaults/v1/proposals");
    expect(page.text).toContain("GET and HEAD on /repos/*/issues/**; DELETE on /repos/**");
    expect(boxText(page.text, `rules:${HOST}`)).toBe("GET HEAD /repos/*/issues/**\nDELETE /repos/**");
    const value = sentinel("console-rules");
    const bad = await b.post(`/vaults/v1/proposals/${p.id}/approve`, { value_GH_TOKEN: value, [`rules:${HOST}`]: "GET HEAD /repos/*/issues/**\nFETCH /x" });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain(`Rules for ${HOST}, line 2: FETCH is not a method`);
    expect(boxText(bad.text, `rules:${HOST}`)).toBe("GET HEAD /repos/*/issues/**\nFETCH /x");
    expect(bad.text).not.toContain(value);
    const ok = await b.submit(`/vaults/v1/proposals/${p.id}/approve`, { value_GH_TOKEN: value, [`rules:${HOST}`]: "GET,HEAD /repos/*/issues/**" });
    expect(ok.text).toContain(`Proposal #${p.id} approved`);
    expect((await storedService()).rules).toEqual([ASKED[0]]);
    for (const pg of b.pages) expect(pg.html.includes(value)).toBe(false);
  });
});

describe("the console's Services page", () => {
  test("rules added as text, listed in words, edited, refused with the line named (form kept), and removed", async () => {
    const add = await b.submit("/vaults/v1/services", {
      host: HOST,
      auth_type: "passthrough",
      enabled: "on",
      rules: "GET HEAD /repos/*/issues/**\nPOST /repos/*/issues",
    });
    expect(add.text).toContain(`Service ${HOST} added`);
    expect(add.text).toContain("GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues");
    expect((await storedService()).rules).toEqual([ASKED[0], { methods: ["POST"], paths: ["/repos/*/issues"] }]);

    const edit = await b.get(`/vaults/v1/services/${HOST}/edit`);
    expect(boxText(edit.text, "rules")).toBe("GET HEAD /repos/*/issues/**\nPOST /repos/*/issues");
    const bad = await b.submit(`/vaults/v1/services/${HOST}`, {
      auth_type: "passthrough",
      enabled: "on",
      description: "kept",
      rules: "GET /repos/*/issues/**\nGET /a//b",
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain("Rules, line 2 (/a//b): empty segments (//) are not allowed");
    expect(boxText(bad.text, "rules")).toBe("GET /repos/*/issues/**\nGET /a//b");
    expect(bad.text).toContain('value="kept"');

    expect((await b.submit(`/vaults/v1/services/${HOST}`, { auth_type: "passthrough", enabled: "on", rules: "GET /repos/**" })).text).toContain(
      "GET on /repos/**",
    );
    expect((await storedService()).rules).toEqual([{ methods: ["GET"], paths: ["/repos/**"] }]);
    // Disabling posts no box: the rules stay.
    await b.submit(`/vaults/v1/services/${HOST}/disable`, {});
    expect((await storedService()).rules).toEqual([{ methods: ["GET"], paths: ["/repos/**"] }]);
    // An empty box removes them: every method and path again.
    const cleared = await b.submit(`/vaults/v1/services/${HOST}`, { auth_type: "passthrough", enabled: "on", rules: "" });
    expect(cleared.text).toContain("every method and path");
    expect((await storedService()).rules).toBeUndefined();
  });
});
