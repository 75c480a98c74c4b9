// The catalogue's shape: every template reads through the same grammars a person's own service does
// (hosts, auth, rules), so a template can never make a service the API would refuse; ids are unique and
// sorted, every provider the catalogue promises is there, links are https, key names are UPPER_SNAKE,
// and no two templates claim one exact host except where that is deliberate (listed below). A few
// operations are then checked for what they let through and what they hold for a person.

import { describe, expect, test } from "bun:test";
import { parseWith, ServiceAuthInput } from "../../../src/contract/index.ts";
import { canonicalPath, matchRule, needsApproval, parseHostPattern, RulesList, type Rules } from "../../../src/policy/index.ts";
import { RULE_LIMITS } from "../../../src/policy/path-rules.ts";
import { OPERATION_NAMES, operationsOf, rulesFor, templateById, templateKeyFields, TEMPLATES, type Template } from "../../../src/templates/index.ts";

/** Every provider the catalogue promises, by template id. */
const PROVIDERS = [
  ...["github", "github-app", "gitlab", "bitbucket"],
  ...[
    "openai",
    "anthropic",
    "gemini",
    "mistral",
    "groq",
    "cohere",
    "deepseek",
    "xai",
    "openrouter",
    "together",
    "fireworks",
    "perplexity",
    "huggingface",
    "replicate",
  ],
  ...["stripe", "slack", "discord", "telegram", "twilio", "sendgrid", "mailgun", "resend"],
  ...["linear", "notion", "jira", "confluence", "asana", "sentry", "datadog", "pagerduty", "airtable"],
  ...["cloudflare", "vercel", "netlify", "supabase", "shopify", "aws-s3", "aws-lambda", "aws-bedrock", "google-maps"],
];

/** Host patterns more than one template claims on purpose: the same API reached two ways, or one site serving two products. */
const DELIBERATE_OVERLAPS: Record<string, string[]> = {
  "api.github.com": ["github", "github-app"], // a token, or an app installation's minted token
  "*.atlassian.net": ["confluence", "jira"], // one Atlassian Cloud site: Jira under /rest, Confluence under /wiki
};

const each = (fn: (t: Template) => void) => () => {
  for (const t of AS_TEMPLATES) {
    try {
      fn(t);
    } catch (e) {
      throw new Error(`${t.id}: ${(e as Error).message}`);
    }
  }
};

describe("the catalogue as a whole", () => {
  test("at least 40 templates, ids unique, lower-case, sorted", () => {
    expect(TEMPLATES.length).toBeGreaterThanOrEqual(40);
    const ids = TEMPLATES.map((t) => t.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9][a-z0-9-]*$/);
    expect(ids).toEqual([...ids].sort());
  });

  test("every promised provider is there, and templateById finds each", () => {
    expect(PROVIDERS.filter((id) => !templateById(id))).toEqual([]);
    for (const t of TEMPLATES) expect(templateById(t.id)).toBe(t);
    expect(templateById("no-such-template")).toBeUndefined();
  });

  test("no two templates claim the same exact host unless listed as deliberate", () => {
    const claims = new Map<string, string[]>();
    for (const t of TEMPLATES) for (const h of t.hosts) claims.set(h, [...(claims.get(h) ?? []), t.id]);
    const shared = Object.fromEntries([...claims].filter(([, ids]) => ids.length > 1).map(([h, ids]) => [h, ids.sort()]));
    expect(shared).toEqual(DELIBERATE_OVERLAPS);
  });
});

/** The catalogue's entries are typed by their own restatement (catalogue/shape.ts); the compiler holds it to Template here. */
const AS_TEMPLATES: readonly Template[] = TEMPLATES;
const TEMPLATE_FIELDS = ["id", "name", "hosts", "auth", "docs", "obtain", "fill", "operations", "connect"];

describe("each template", () => {
  test(
    "holds only Template's fields",
    each((t) => {
      for (const field of Object.keys(t)) expect(TEMPLATE_FIELDS).toContain(field);
    }),
  );

  test(
    "has a name, at least one host, and each host reads as an agent's proposal would (no IP, canonical already)",
    each((t) => {
      expect(t.name.length).toBeGreaterThan(0);
      expect(t.hosts.length).toBeGreaterThan(0);
      for (const h of t.hosts) expect(parseHostPattern(h, { allowIp: false }).text).toBe(h);
    }),
  );

  test(
    "its auth reads unchanged through the contract's service auth",
    each((t) => {
      expect(parseWith(ServiceAuthInput, t.auth, "auth")).toEqual(t.auth);
    }),
  );

  test(
    "suggests credential key names in UPPER_SNAKE, at least one",
    each((t) => {
      const keys = templateKeyFields(t);
      expect(keys.length).toBeGreaterThan(0);
      for (const [, key] of keys) expect(key).toMatch(/^[A-Z][A-Z0-9_]*$/);
    }),
  );

  test(
    "links to the provider's auth docs and to where the credential is made, both https",
    each((t) => {
      for (const link of [t.docs, t.obtain]) {
        const u = new URL(link);
        expect(u.protocol).toBe("https:");
        expect(u.username + u.password).toBe("");
      }
    }),
  );

  test(
    "offers read and write, only known operations, each with a short summary and rules the rules grammar reads as written",
    each((t) => {
      expect(t.operations.read).toBeDefined();
      expect(t.operations.write).toBeDefined();
      for (const name of Object.keys(t.operations)) expect(OPERATION_NAMES as readonly string[]).toContain(name);
      for (const name of operationsOf(t)) {
        const op = t.operations[name]!;
        expect(op.summary.length).toBeGreaterThan(0);
        expect(op.summary.length).toBeLessThanOrEqual(200);
        expect(parseWith(RulesList, op.rules, `operations.${name}.rules`)).toEqual(op.rules.map((r) => ({ ...r })));
        // An operation that only holds would let nothing through: every one allows something.
        expect(op.rules.some((r) => r.approve === undefined)).toBe(true);
      }
    }),
  );

  test(
    "all its operations together still fit one service's rules",
    each((t) => {
      const all = rulesFor(t, operationsOf(t));
      expect(all.length).toBeLessThanOrEqual(RULE_LIMITS.rules);
      parseWith(RulesList, all, "rules");
    }),
  );

  test(
    "names in fill only settings it holds an example for",
    each((t) => {
      for (const field of Object.keys(t.fill ?? {})) {
        if (field === "host") continue;
        expect(t.auth[field as keyof typeof t.auth]).toBeDefined();
      }
    }),
  );
});

/** Whether `rules` let `method path` through, and whether they hold it for a person. */
function decide(rules: Rules, method: string, path: string): "refused" | "allowed" | "held" {
  const c = canonicalPath(path);
  if (!c.ok) throw new Error(c.reason);
  if (matchRule(rules, method, c.segments) < 0) return "refused";
  return needsApproval(rules, method, c.segments) ? "held" : "allowed";
}

const rulesOf = (id: string, ...ops: ("read" | "write" | "destructive")[]) => rulesFor(templateById(id)!, ops);

describe("what a few operations let through", () => {
  test("GitHub: read is reads only; write holds each merge; destructive holds deleting a repository", () => {
    const read = rulesOf("github", "read");
    expect(decide(read, "GET", "/repos/o/r/issues")).toBe("allowed");
    expect(decide(read, "POST", "/graphql")).toBe("refused");
    const write = rulesOf("github", "read", "write");
    expect(decide(write, "POST", "/graphql")).toBe("allowed");
    expect(decide(write, "PUT", "/repos/o/r/pulls/7/merge")).toBe("held");
    expect(decide(write, "POST", "/repos/o/r/merges")).toBe("held");
    expect(decide(write, "DELETE", "/repos/o/r/git/refs/heads/x")).toBe("refused");
    const all = rulesOf("github", "read", "write", "destructive");
    expect(decide(all, "DELETE", "/repos/o/r")).toBe("held");
    expect(decide(all, "DELETE", "/repos/o/r/git/refs/heads/x")).toBe("allowed");
  });

  test("Stripe: refunds and payouts are held under write and destructive alike", () => {
    const write = rulesOf("stripe", "read", "write");
    expect(decide(write, "POST", "/v1/customers")).toBe("allowed");
    expect(decide(write, "POST", "/v1/refunds")).toBe("held");
    expect(decide(write, "POST", "/v1/refunds/re_1/cancel")).toBe("held");
    expect(decide(write, "POST", "/v1/payouts")).toBe("held");
    // destructive brings refunds and payouts too (an approval rule also allows), held; other POSTs stay write's
    expect(decide(rulesOf("stripe", "read", "destructive"), "POST", "/v1/refunds")).toBe("held");
    expect(decide(rulesOf("stripe", "read", "destructive"), "POST", "/v1/customers")).toBe("refused");
    expect(decide(rulesOf("stripe", "write", "destructive"), "DELETE", "/v1/customers/cus_1")).toBe("allowed");
  });

  test("model APIs: inference needs write", () => {
    expect(decide(rulesOf("openai", "read"), "POST", "/v1/chat/completions")).toBe("refused");
    expect(decide(rulesOf("openai", "read"), "GET", "/v1/models")).toBe("allowed");
    expect(decide(rulesOf("openai", "write"), "POST", "/v1/chat/completions")).toBe("allowed");
    expect(decide(rulesOf("openai", "write"), "POST", "/v1/fine_tuning/jobs")).toBe("held");
    expect(decide(rulesOf("anthropic", "write"), "POST", "/v1/messages")).toBe("allowed");
    expect(decide(rulesOf("gemini", "write"), "POST", "/v1beta/models/gemini-2.0-flash:generateContent")).toBe("allowed");
    expect(decide(rulesOf("aws-bedrock", "write"), "POST", "/model/anthropic.claude-3-haiku-20240307-v1:0/converse")).toBe("allowed");
  });

  test("Slack and Telegram: methods by name; deletions held", () => {
    expect(decide(rulesOf("slack", "read"), "POST", "/api/conversations.history")).toBe("allowed");
    expect(decide(rulesOf("slack", "read"), "POST", "/api/chat.postMessage")).toBe("refused");
    expect(decide(rulesOf("slack", "write"), "POST", "/api/chat.postMessage")).toBe("allowed");
    expect(decide(rulesOf("slack", "write", "destructive"), "POST", "/api/chat.delete")).toBe("held");
    expect(decide(rulesOf("telegram", "read"), "GET", "/getMe")).toBe("allowed");
    expect(decide(rulesOf("telegram", "write"), "POST", "/sendMessage")).toBe("allowed");
    expect(decide(rulesOf("telegram", "write", "destructive"), "POST", "/deleteMessage")).toBe("held");
  });

  test("Notion's query endpoints are reads though POSTs; Jira and Confluence split one site by path", () => {
    expect(decide(rulesOf("notion", "read"), "POST", "/v1/databases/abc/query")).toBe("allowed");
    expect(decide(rulesOf("notion", "read"), "POST", "/v1/pages")).toBe("refused");
    expect(decide(rulesOf("jira", "read", "write"), "GET", "/wiki/api/v2/pages")).toBe("refused");
    expect(decide(rulesOf("confluence", "read"), "GET", "/wiki/api/v2/pages")).toBe("allowed");
    expect(decide(rulesOf("confluence", "read"), "GET", "/rest/api/3/issue/X-1")).toBe("refused");
  });
});
