// Attacks on service templates in process (the e2e side, with a hostile provider and the connect flow, is
// tests/e2e/templates-attacks.test.ts): a hostile agent's proposals naming templates (keys pointed at other
// credentials, settings and hosts smuggled in, prototype names, template ids), what the approval page and
// the console say against what is stored once approved, the catalogue-drift path (who may make a
// service's rules change), the catalogue's search and API reflecting what they are sent, and the connect
// settings' endpoints.
//
// Findings are tests that fail today and pass once fixed (named "found: …"); the rest hold.

import { beforeEach, describe, expect, test } from "bun:test";
import { readConnectApps } from "../../../src/config-connect.ts";
import { buildProposalHint } from "../../../src/egress/hint.ts";
import { templateById } from "../../../src/templates/index.ts";
import { toRow } from "../../../src/workflows/services.ts";
import { createPageBrowser, type PageBrowser, SAME_ORIGIN, signIn } from "./console-fixtures.ts";
import { addAgent, addUser, createHarness, createVault, expectNoLeak, type Harness, mintScoped, register, sentinel, setCredential } from "./fixtures.ts";

let h: Harness;
let owner: string;
let b: PageBrowser;
let agent: { token: string; headers: Record<string, string> };
let awsSecret: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "v1");
  agent = await addAgent(h, owner, "v1", "proxy", "bot");
  b = await signIn(h, "owner@example.com");
  awsSecret = sentinel("aws-secret");
});

const propose = (body: Record<string, unknown>) => h.call("POST", "/v1/proposals", { token: agent.token, headers: agent.headers, body });
const services = async () => (await h.call("GET", "/v1/vaults/v1/services", { token: owner })).body.services as any[];
const service = async (host: string) => (await services()).find((s) => s.host === host);
const slot = (key: string) => ({ key, description: `the ${key}` });
/** The approval page's path (with its token) of a filed proposal. */
const approvalPath = (filed: { body: { approval_url: string } }) => {
  const u = new URL(filed.body.approval_url);
  return `${u.pathname}${u.search}`;
};
const rulesOf = (id: string, ...ops: ("read" | "write" | "destructive")[]) => ops.flatMap((op) => templateById(id)!.operations[op]!.rules);

/** The vault holds AWS keys used by an S3 service today. */
async function withAws() {
  await setCredential(h, { token: owner }, "v1", "AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE12");
  await setCredential(h, { token: owner }, "v1", "AWS_SECRET_ACCESS_KEY", awsSecret);
  const added = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { template: "aws-s3", host: "s3.us-east-1.amazonaws.com" } });
  expect(added.status).toBe(201);
}

describe("a template's host under a shared domain", () => {
  // The AWS templates take "the endpoint in your region"; the host check accepts any name under the
  // last two labels, amazonaws.com: IAM, STS, another service, anyone's API Gateway. The words then say
  // "Amazon S3 (iam.amazonaws.com), read only: list buckets and objects" while the rules allow GET /**
  // on IAM, whose query API takes every action (CreateAccessKey, AttachUserPolicy) as a GET, signed with
  // the person's keys.
  test.each([
    ["aws-s3", "iam.amazonaws.com"],
    ["aws-s3", "sts.amazonaws.com"],
    ["aws-s3", "lambda.us-east-1.amazonaws.com"],
    ["aws-s3", "abc123.execute-api.us-east-1.amazonaws.com"],
    ["aws-lambda", "s3.us-east-1.amazonaws.com"],
    ["aws-bedrock", "iam.amazonaws.com"],
  ])("found: %s is refused for %s (another AWS service, or anyone's endpoint)", async (template, host) => {
    const filed = await propose({ services: [{ template, host }], credentials: [slot("AWS_ACCESS_KEY_ID"), slot("AWS_SECRET_ACCESS_KEY")] });
    expect(filed.status).toBe(400);
    expect(filed.body.field).toBe("services[0].host");
  });

  test("held: the S3 template in another region, and the approval page words its host", async () => {
    const filed = await propose({
      services: [{ template: "aws-s3", host: "s3.eu-west-1.amazonaws.com" }],
      credentials: [slot("AWS_ACCESS_KEY_ID"), slot("AWS_SECRET_ACCESS_KEY")],
    });
    expect(filed.status).toBe(201);
    const page = await b.get(approvalPath(filed));
    expect(page.text).toContain("Amazon S3 (s3.eu-west-1.amazonaws.com), read only");
  });

  test.each(["iam.amazonaws.com", "sts.amazonaws.com", "abc123.execute-api.us-east-1.amazonaws.com"])(
    "found: the 403 hint for %s names no template (today: Amazon Bedrock, read only)",
    (host) => {
      const hint = buildProposalHint("http://broker.test", host, 443) as { template?: { id: string } };
      expect(hint.template?.id).toBeUndefined();
    },
  );

  test.each([
    ["shopify", "acme.myshopify.com:8443", "a port"],
    ["shopify", "*.myshopify.com", "a wildcard over the public suffix"],
    ["shopify", "10.0.0.1", "an IP"],
    ["shopify", "acme.myshopify.com.evil.com", "another domain ending alike"],
    ["shopify", "myshopify.com", "the suffix itself"],
    ["supabase", "evil.supabase.co.evil.com", "another domain"],
    ["supabase", "supabase.co:443@evil.com", "userinfo"],
    ["jira", "*.atlassian.net", "the template's wildcard itself"],
    ["github", "api.stripe.com", "another template's host"],
    ["github", "api.github.com.evil.com", "a lookalike"],
  ])("held: %s with host %s (%s) is refused", async (template, host) => {
    const filed = await propose({ services: [{ template, host, ...(template === "jira" && { settings: { username: "a@b.c" } }) }], credentials: [slot("K")] });
    expect(filed.status).toBe(400);
  });

  test("held: a look-alike store name in another script is kept and shown as punycode, never as the look-alike", async () => {
    const filed = await propose({ services: [{ template: "shopify", host: "аcme.myshopify.com" }], credentials: [slot("SHOPIFY_ACCESS_TOKEN")] });
    expect(filed.status).toBe(201);
    const page = await b.get(approvalPath(filed));
    expect(page.text).toContain("xn--cme-5cd.myshopify.com");
    expect(page.text).not.toContain("аcme");
    expect(page.text).toContain("Shopify Admin API (xn--cme-5cd.myshopify.com), read only");
  });
});

describe("keys pointing a template at another credential", () => {
  test("held: GitHub with the AWS secret key as its token: the page names the key, how it is sent, and warns of the new host", async () => {
    await withAws();
    const filed = await propose({ services: [{ template: "github", keys: { token: "AWS_SECRET_ACCESS_KEY" } }], message: "just GitHub" });
    expect(filed.status).toBe(201);
    const page = await b.get(approvalPath(filed));
    expect(page.text).toContain("GitHub (api.github.com), read only");
    expect(page.text).toContain("AWS_SECRET_ACCESS_KEY, sent as Authorization: Bearer &lt;value&gt;");
    expect(page.text).toContain("This proposal sends your existing credential AWS_SECRET_ACCESS_KEY to a new host, api.github.com.");
    const console = await b.get("/vaults/v1/proposals");
    expect(console.text).toContain("This proposal sends your existing credential AWS_SECRET_ACCESS_KEY to a new host, api.github.com.");
    expectNoLeak(h, awsSecret);
  });

  test("held: the S3 template with its two keys swapped (the secret in the clear Credential= field) is warned", async () => {
    await withAws();
    const filed = await propose({
      services: [
        { template: "aws-s3", host: "s3.us-east-1.amazonaws.com", keys: { access_key_id: "AWS_SECRET_ACCESS_KEY", secret_access_key: "AWS_ACCESS_KEY_ID" } },
      ],
    });
    expect(filed.status).toBe(201);
    const page = await b.get(approvalPath(filed));
    expect(page.text).toContain("This proposal sends your existing credential AWS_SECRET_ACCESS_KEY to a new host, s3.us-east-1.amazonaws.com.");
    expect(page.text).toContain("This proposal replaces the existing service for s3.us-east-1.amazonaws.com.");
  });

  test("held: the console's template form asks before sending a stored key to the template's host", async () => {
    await withAws();
    const asked = await b.submit("/vaults/v1/services", { template: "github", op_read: "on", key_token: "AWS_SECRET_ACCESS_KEY" });
    expect(asked.text).toContain("sends your existing credential");
    expect(await service("api.github.com")).toBeUndefined();
  });
});

describe("odd template bodies from an agent", () => {
  const ODD: [string, Record<string, unknown>, string][] = [
    ["a ':' in a username", { template: "twilio", settings: { username: "AC1:evil" } }, "settings.username"],
    ["CR LF in a username", { template: "twilio", settings: { username: "AC1\r\nX-Injected: 1" } }, "settings.username"],
    ["LF in a username", { template: "twilio", settings: { username: "AC1\n" } }, "settings.username"],
    ["a path in app_id", { template: "github-app", settings: { app_id: "1/../2", installation_id: "1" } }, "settings.app_id"],
    ["text in installation_id", { template: "github-app", settings: { app_id: "1", installation_id: "1; rm" } }, "settings.installation_id"],
    ["api_url as a setting", { template: "github-app", settings: { app_id: "1", installation_id: "1", api_url: "https://evil.example" } }, "settings.api_url"],
    ["header as a setting", { template: "github", settings: { header: "authorization" } }, "settings.header"],
    ["a key field the template lacks", { template: "github", keys: { header: "X" } }, "keys.header"],
    ["a key that is no key name", { template: "github", keys: { token: "lower-case" } }, "keys.token"],
    ["template and auth", { template: "github", auth: { type: "bearer", token: "X" } }, "auth"],
    ["template and rules", { template: "github", rules: [{ methods: ["DELETE"], paths: ["/**"] }] }, "rules"],
    ["an unknown operation", { template: "github", operations: ["admin"] }, "operations[0]"],
    ["no operation", { template: "github", operations: [] }, "operations"],
    ["template __proto__", { template: "__proto__" }, "template"],
    ["template constructor", { template: "constructor" }, "template"],
    ["template toString", { template: "toString" }, "template"],
    ["a 100 000-character template id", { template: "x".repeat(100_000) }, "template"],
    ["keys.__proto__", JSON.parse('{"template":"github","keys":{"__proto__":"AWS_SECRET_ACCESS_KEY"}}'), "keys.__proto__"],
    ["settings.__proto__", JSON.parse('{"template":"twilio","settings":{"__proto__":{"username":"x"},"username":"AC1"}}'), "settings.__proto__"],
    ["keys.constructor", JSON.parse('{"template":"github","keys":{"constructor":"AWS_SECRET_ACCESS_KEY"}}'), "keys.constructor"],
  ];
  test.each(ODD)("held: %s is refused", async (_what, svc, field) => {
    const filed = await propose({ services: [svc], credentials: [slot("TWILIO_AUTH_TOKEN"), slot("GITHUB_APP_PRIVATE_KEY"), slot("GITHUB_TOKEN")] });
    expect(filed.status).toBe(400);
    expect(filed.body.field).toBe(`services[0].${field}`);
    expect(JSON.stringify(filed.body).length).toBeLessThan(2000); // a long id is not echoed whole
  });

  test("held: repeated operations are kept once, in catalogue order", async () => {
    const filed = await propose({ services: [{ template: "github", operations: ["write", "read", "write", "read"] }], credentials: [slot("GITHUB_TOKEN")] });
    expect(filed.status).toBe(201);
    const asked = (await h.call("GET", `/v1/proposals/${filed.body.id}`, { token: owner, headers: { "x-vault": "v1" } })).body.services[0];
    expect(asked).toMatchObject({ operations: ["read", "write"], rules: rulesOf("github", "read", "write") });
  });

  test("found: a username with a bidi override is refused (the header prefix refuses them: both are shown to the approver)", async () => {
    const filed = await propose({
      services: [{ template: "twilio", settings: { username: "AC1\u202etnuocca-rehto" } }],
      credentials: [slot("TWILIO_AUTH_TOKEN")],
    });
    expect(filed.status).toBe(400);
    expect(filed.body.field).toBe("services[0].settings.username");
  });

  test("found: an empty setting is not the person's own value (the template's fill is required)", async () => {
    const filed = await propose({ services: [{ template: "twilio", settings: { username: "" } }], credentials: [slot("TWILIO_AUTH_TOKEN")] });
    expect(filed.status).toBe(400);
    expect(filed.body.field).toBe("services[0].settings.username");
  });

  test("found: PATCH with settings but no template is refused, as POST refuses it (not silently dropped)", async () => {
    await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { template: "twilio", settings: { username: "AC1" } } });
    const res = await h.call("PATCH", "/v1/vaults/v1/services/api.twilio.com", { token: owner, body: { settings: { username: "AC2" } } });
    expect(res.status).toBe(400);
    expect(res.body.field).toBe("settings");
  });
});

describe("the catalogue-drift path: nothing but a person changes a service's rules", () => {
  const STALE = [{ methods: ["GET"], paths: ["/old"] }];
  async function staleGithub() {
    const added = await h.call("POST", "/v1/vaults/v1/services", { token: owner, body: { template: "github", operations: ["read"] } });
    expect(added.status).toBe(201);
    await h.domain.store.db.run("UPDATE services SET rules = ? WHERE host = ?", [JSON.stringify(STALE), "api.github.com"]);
  }

  test("held: reading services (API, /discover, console) shows catalogue_rules and changes nothing", async () => {
    await staleGithub();
    expect((await service("api.github.com")).template.catalogue_rules).toEqual(rulesOf("github", "read"));
    await h.call("GET", "/discover", { token: agent.token, headers: agent.headers });
    await b.get("/vaults/v1/services");
    await b.get("/vaults/v1/services/api.github.com/edit");
    expect((await service("api.github.com")).rules).toEqual(STALE);
  });

  test("held: an agent's and a scoped session's PATCH naming the template are refused", async () => {
    await staleGithub();
    const admin = await addAgent(h, owner, "v1", "admin", "admin-bot");
    for (const as of [agent, admin]) {
      const res = await h.call("PATCH", "/v1/vaults/v1/services/api.github.com", {
        token: as.token,
        headers: as.headers,
        body: { template: "github", operations: ["read", "write", "destructive"] },
      });
      expect(res.status).toBe(403);
    }
    const scoped = (await mintScoped(h, { token: owner }, "v1", { role: "admin" })).body.token;
    const res = await h.call("PATCH", "/v1/vaults/v1/services/api.github.com", { token: scoped, body: { template: "github", operations: ["read"] } });
    expect(res.status).toBe(403);
    expect((await service("api.github.com")).rules).toEqual(STALE);
  });

  test("held: the console's 'Apply the catalogue's rules' refuses a proxy-role person and a cross-site post", async () => {
    await staleGithub();
    await addUser(h, owner, "v1", "proxy@example.com", "proxy");
    const proxy = await signIn(h, "proxy@example.com");
    const refused = await proxy.submit("/vaults/v1/services/api.github.com/catalogue", {});
    expect(refused.text).toContain("does not allow this");
    await b.get("/");
    const csrf = await b.post("/vaults/v1/services/api.github.com/catalogue", {}, { origin: "https://evil.example", "sec-fetch-site": "cross-site" });
    expect(csrf.status).toBe(403);
    const noToken = await b.post("/vaults/v1/services/api.github.com/catalogue", {}, SAME_ORIGIN, false);
    expect(noToken.status).toBe(403);
    expect((await service("api.github.com")).rules).toEqual(STALE);
    // The owner's own click applies it.
    const done = await b.submit("/vaults/v1/services/api.github.com/catalogue", {});
    expect(done.text).toContain("it now has this release");
    expect((await service("api.github.com")).rules).toEqual(rulesOf("github", "read"));
  });

  test("found: applying the catalogue's rules to a connected account keeps its auth (it turns it into bearer GITHUB_TOKEN)", async () => {
    // A connected GitHub account as connect-complete.ts stores it, its rules from an older release.
    const auth = {
      type: "oauth2_refresh" as const,
      token_url: "https://github.com/login/oauth/access_token",
      client_id: "GITHUB_CLIENT_ID",
      client_secret: "GITHUB_CLIENT_SECRET",
      refresh_token: "GITHUB_REFRESH_TOKEN",
      client_auth: "basic" as const,
    };
    const vaultId = (await h.domain.store.vaults.byName("v1"))!.id;
    await h.domain.store.services.put(
      toRow(vaultId, "api.github.com", "GitHub, connected account", auth, true, STALE, { template: "github", operations: ["read"] }),
      h.domain.now(),
    );
    expect((await service("api.github.com")).template.catalogue_rules).toEqual(rulesOf("github", "read"));
    await b.submit("/vaults/v1/services/api.github.com/catalogue", {});
    const after = await service("api.github.com");
    expect(after.auth).toEqual(auth); // "only what the catalogue changed (its rules) changes"
  });
});

describe("what the approval page says against what is stored", () => {
  async function fileStripe() {
    const filed = await propose({ services: [{ template: "stripe", operations: ["read"] }], credentials: [slot("STRIPE_SECRET_KEY")] });
    expect(filed.status).toBe(201);
    const page = await b.get(approvalPath(filed));
    expect(page.text).toContain("Stripe (api.stripe.com), read only");
    const box = /<textarea[^>]*name="rules:api.stripe.com"[^>]*>([^<]*)<\/textarea>/.exec(page.text)?.[1] ?? "";
    return { filed, token: new URL(filed.body.approval_url).searchParams.get("token")!, box: box.replaceAll("&#39;", "'").replaceAll("&quot;", '"') };
  }
  const value = () => sentinel("stripe");

  test("held: Allow with the box as shown stores exactly the template's rules, and the template", async () => {
    const { filed, token, box } = await fileStripe();
    expect(box.length).toBeGreaterThan(0);
    const v = value();
    const res = await b.post(`/approve/${filed.body.id}/decide`, { token, decision: "allow", value_STRIPE_SECRET_KEY: v, "rules:api.stripe.com": box });
    expect(res.status).toBe(303);
    const s = await service("api.stripe.com");
    expect(s.rules).toEqual(rulesOf("stripe", "read"));
    expect(s.template).toMatchObject({ id: "stripe", operations: ["read"], said: "Stripe (api.stripe.com), read only" });
    expectNoLeak(h, v);
  });

  test("held: a narrowed box is stored as the person's rules and the service no longer claims the template", async () => {
    const { filed, token } = await fileStripe();
    const res = await b.post(`/approve/${filed.body.id}/decide`, {
      token,
      decision: "allow",
      value_STRIPE_SECRET_KEY: value(),
      "rules:api.stripe.com": "GET /v1/charges",
    });
    expect(res.status).toBe(303);
    const s = await service("api.stripe.com");
    expect(s.rules).toEqual([{ methods: ["GET"], paths: ["/v1/charges"] }]);
    expect(s.template).toBeUndefined();
  });

  test("held: a widened box is stored as typed and the service no longer claims 'read only'", async () => {
    const { filed, token } = await fileStripe();
    const res = await b.post(`/approve/${filed.body.id}/decide`, {
      token,
      decision: "allow",
      value_STRIPE_SECRET_KEY: value(),
      "rules:api.stripe.com": "GET POST DELETE /**",
    });
    expect(res.status).toBe(303);
    const s = await service("api.stripe.com");
    expect(s.template).toBeUndefined();
    expect(s.rules).toEqual([{ methods: ["GET", "POST", "DELETE"], paths: ["/**"] }]);
  });

  test("held: the API approval with other rules for the host drops the template too", async () => {
    const { filed } = await fileStripe();
    const res = await h.call("POST", `/v1/proposals/${filed.body.id}/approve`, {
      token: owner,
      headers: { "x-vault": "v1" },
      body: { credentials: { STRIPE_SECRET_KEY: value() }, rules: { "api.stripe.com": null } },
    });
    expect(res.status).toBe(200);
    const s = await service("api.stripe.com");
    expect(s.rules).toBeUndefined();
    expect(s.template).toBeUndefined();
  });
});

describe("the catalogue's search and API reflect nothing as markup", () => {
  test("held: q with markup is escaped; a huge q is cut to 100 characters", async () => {
    const page = await b.get(`/vaults/v1/services/new?q=${encodeURIComponent('"><script>alert(1)</script><img src=x onerror=alert(2)>')}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain("<script>alert");
    expect(page.text).not.toContain("<img src=x");
    expect(page.text).toContain("&lt;script&gt;");
    const huge = await b.get(`/vaults/v1/services/new?q=${"a".repeat(50_000)}`);
    expect(huge.status).toBeLessThan(500);
    expect(huge.text).not.toContain("a".repeat(101));
    const unicode = await b.get(`/vaults/v1/services/new?q=${encodeURIComponent("\u202e\u0000github")}`);
    expect(unicode.status).toBe(200);
  });

  test("held: /v1/templates/<id> answers 404 JSON for markup, prototype names and long ids, echoing none", async () => {
    for (const id of ["%3Cscript%3Ealert(1)%3C%2Fscript%3E", "__proto__", "constructor", "hasOwnProperty", "x".repeat(5000), "github%00", "..%2F..%2Fetc"]) {
      const res = await h.call("GET", `/v1/templates/${id}`);
      expect(res.status).toBe(404);
      expect(JSON.stringify(res.body)).not.toContain("<script");
      expect(JSON.stringify(res.body)).not.toContain("xxxxxxxxxx");
    }
    const bad = await b.get("/vaults/v1/services/new?template=%3Cscript%3Ealert(1)%3C%2Fscript%3E");
    expect(bad.status).toBe(404);
    expect(bad.text).not.toContain("<script>alert");
  });
});

describe("connect settings (BROKER_CONNECT_<ID>_*)", () => {
  test.each([
    ["http://evil.example.com/authorize", "an http authorize URL on a non-loopback host"],
    ["http://localhost.evil.example/authorize", "a name that starts like localhost"],
    ["http://127.0.0.1.nip.io/authorize", "a name that starts like 127.0.0.1"],
    ["https://user:pw@github.com/login/oauth/authorize", "credentials"],
    ["javascript:alert(1)", "a script URL"],
    ["https://github.com/login/oauth/authorize#x", "a fragment"],
  ])("held: AUTHORIZE_URL %s (%s) is refused", (url) => {
    const problems: string[] = [];
    const apps = readConnectApps(
      { BROKER_CONNECT_GITHUB_CLIENT_ID: "id", BROKER_CONNECT_GITHUB_CLIENT_SECRET: "s", BROKER_CONNECT_GITHUB_AUTHORIZE_URL: url },
      problems,
    );
    expect(apps).toEqual([]);
    expect(problems.join("\n")).toContain("AUTHORIZE_URL");
  });

  test("held: a token URL is never plain HTTP, not even on loopback", () => {
    const problems: string[] = [];
    readConnectApps(
      { BROKER_CONNECT_GITHUB_CLIENT_ID: "id", BROKER_CONNECT_GITHUB_CLIENT_SECRET: "s", BROKER_CONNECT_GITHUB_TOKEN_URL: "http://127.0.0.1/token" },
      problems,
    );
    expect(problems.join("\n")).toContain("TOKEN_URL");
  });
});
