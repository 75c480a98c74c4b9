// Attacks on workload identity's second round (issue 39, docs/architecture.md D27): key sets given as documents,
// require_jti, PUT /v1/workload-issuers/{name}, the workload (`iss`, `sub`) named in every audit record and shown by
// the logs API, the console's Logs and Agents pages, `broker logs`, the hash chain and the OCSF export; and the
// console's Workload identity page. Played as a hostile workload, a hostile token issuer, hostile page content and a
// careless owner. Each test names what it proves; those that found a hole would fail without its fix:
// - a private key hidden in a key set document (under `__proto__`, in a nested or a top-level member) was stored and
//   shown back: only a key's public members are kept now;
// - keys that can never verify a token (use "enc", P-521, RSA under 2048 bits, a shared kid) were accepted;
// - a `sub` with NUL failed the exchange with a 500 on PostgreSQL, one with a lone surrogate was kept as U+FFFD (two
//   subjects reading as one in the audit), and one with control or bidi characters reached the terminal through
//   `broker logs`: such a subject, or one over 2048 characters, is refused, and the CLI's tables show control
//   characters as escapes;
// - the jti ledger was kept per issuer row: removing and re-adding an issuer (or moving its `iss` to another row)
//   let an exchanged token in again; it is kept per `iss` now;
// - a renewal by the same binding's agent and subject under another `iss` (an issuer changed by PUT) kept the old
//   `iss` in every later audit record: a renewal must come from the session's own issuer.
// No credential, platform token or session token appears in any response or log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as jose from "jose";
import { main } from "../../src/cli/index.ts";
import { formatTable } from "../../src/cli/kit/output.ts";
import { ocsfApiActivity } from "../../src/cli/commands/audit-ocsf.ts";
import { LOG_TAIL_SCRIPT } from "../../src/server/console/log-tail-script.ts";
import { pgMissing, sharedPgCluster } from "../helpers/postgres.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { browserTestFor, openBrowser } from "./browser.ts";
import { startBroker, type Broker } from "./proxy-fixture.ts";

const GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt";
const AUD = "https://broker.example";
const ISS = "https://ci.wl2.example";
const SECRET = `sk_wl2_${crypto.randomUUID()}`;
const browserTest = browserTestFor("workload attacks 2");

interface Key {
  kid: string;
  alg: string;
  priv: CryptoKey;
  jwk: jose.JWK;
  privJwk: jose.JWK;
}

async function makeKey(alg = "ES256", kid: string = crypto.randomUUID()): Promise<Key> {
  const { privateKey, publicKey } = await jose.generateKeyPair(alg, { extractable: true });
  return { kid, alg, priv: privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg, use: "sig" }, privJwk: await jose.exportJWK(privateKey) };
}

let upstream: TestUpstream;
let broker: Broker;
let hp = "";
let key: Key;
let owner = "";
/** Every response body the broker gave, and every token or signature that must never appear in one or in a log line. */
const responses: string[] = [];
const secrets: string[] = [SECRET];

async function api(method: string, path: string, body?: unknown, token = owner) {
  const r = await broker.api(method, path, body, token);
  responses.push(JSON.stringify(r.body ?? ""));
  return r;
}

async function page(path: string, token = owner, init: RequestInit = {}) {
  const res = await fetch(`${broker.apiUrl}${path}`, { redirect: "manual", ...init, headers: { cookie: `broker_session=${token}`, ...init.headers } });
  const text = await res.text();
  responses.push(text);
  return { status: res.status, text, headers: res.headers };
}

async function sign(claims: Record<string, unknown>, o: { key?: Key; iss?: string; kid?: string | null; alg?: string; ttlSec?: number } = {}) {
  const k = o.key ?? key;
  const iat = Math.floor(Date.now() / 1000);
  const header: jose.JWTHeaderParameters = { alg: o.alg ?? k.alg, typ: "JWT" };
  if (o.kid !== null) header.kid = o.kid ?? k.kid;
  const t = await new jose.SignJWT({ iss: o.iss ?? ISS, aud: AUD, iat, exp: iat + (o.ttlSec ?? 600), ...claims }).setProtectedHeader(header).sign(k.priv);
  secrets.push(t.split(".")[2]!);
  return t;
}

async function exchange(token: string, bearer?: string) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (bearer) headers.authorization = `Bearer ${bearer}`;
  const res = await fetch(`${broker.apiUrl}/v1/sessions/exchange`, {
    method: "POST",
    headers,
    body: JSON.stringify({ grant_type: GRANT, subject_token: token, subject_token_type: JWT_TYPE }),
  });
  const text = await res.text();
  const body = JSON.parse(text);
  if (res.status === 200) secrets.push(body.access_token);
  else responses.push(text); // a success hands out its session by design; a refusal must echo nothing
  return { status: res.status, body };
}

async function session(claims: Record<string, unknown>, o?: Parameters<typeof sign>[1]) {
  const r = await exchange(await sign(claims, o));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.access_token as string;
}

async function refused(token: string, words?: RegExp) {
  const r = await exchange(token);
  expect(r.status, JSON.stringify(r.body)).toBe(400);
  if (words) expect(JSON.stringify(r.body)).toMatch(words);
  return r;
}

/** An issuer trusting a key set document; a binding `any` admitting every subject into the fixture's vault. */
async function trust(name: string, iss: string, keys: jose.JWK[], extra: Record<string, unknown> = {}) {
  const r = await api("POST", "/v1/workload-issuers", { name, issuer: iss, jwks: JSON.stringify({ keys }), audiences: [AUD], clock_skew_seconds: 0, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const b = await api("POST", `/v1/workload-issuers/${name}/bindings`, { name: "any", vault: broker.vault, conditions: { sub: "*" } });
  expect(b.status, JSON.stringify(b.body)).toBe(201);
}

/** A request through the proxy with `token`, and the audit record it made. */
async function proxied(token: string, path: string) {
  const res = await fetch(`${broker.apiUrl}/proxy/${hp}${path}`, { headers: { authorization: `Bearer ${token}` } });
  responses.push(await res.text());
  expect(res.status).toBe(200);
  for (let i = 0; i < 50; i++) {
    const logs = (await api("GET", `/v1/vaults/${broker.vault}/logs?limit=1000`)).body.logs as any[];
    const found = logs.find((l) => l.path === path);
    if (found) return found;
    await Bun.sleep(100);
  }
  throw new Error(`no audit record for ${path}`);
}

async function verifyChain() {
  const r = await api("GET", `/v1/vaults/${broker.vault}/audit/verify`);
  expect(r.status).toBe(200);
  return r.body as { ok: boolean; breaks: unknown[] };
}

beforeAll(async () => {
  upstream = await startUpstream(
    (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end('{"ok":true}'); // never reflects what it received (the injected credential)
    },
    { names: { ips: ["127.0.0.1"] } },
  );
  broker = await startBroker({ caPem: upstream.pki.caPem });
  owner = broker.userToken;
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("API_KEY", SECRET);
  await broker.addService(hp, { type: "bearer", token: "API_KEY" });
  key = await makeKey();
  await trust("ci", ISS, [key.jwk]);
}, 60_000);

afterAll(async () => {
  try {
    for (const s of secrets) {
      for (const r of responses) expect(r.includes(s), `a token or credential in a response: ${r.slice(0, 200)}`).toBe(false);
      for (const l of broker.logLines) expect(l.includes(s), `a token or credential in a log line: ${l.slice(0, 200)}`).toBe(false);
    }
    const audit = JSON.stringify(await broker.auditLogs());
    for (const s of secrets) expect(audit.includes(s)).toBe(false);
  } finally {
    await broker?.stop();
    await upstream?.close();
  }
});

describe("key sets given as documents", () => {
  test("a private key hidden under __proto__, in a nested member or beside keys is never stored or shown", async () => {
    const k = await makeKey("RS256", "hidden");
    const d = k.privJwk.d!;
    const pub = JSON.stringify(k.jwk).slice(1, -1);
    const documents = [
      `{"keys":[{"__proto__":{"d":"${d}"},${pub}}]}`,
      JSON.stringify({ keys: [{ ...k.jwk, private: k.privJwk }] }),
      JSON.stringify({ keys: [{ ...k.jwk, x5c: [d] }] }),
      JSON.stringify({ keys: [k.jwk], private: { keys: [k.privJwk] } }),
      `{"__proto__":{"d":"${d}"},"keys":[{${pub}}]}`,
    ];
    const restore = () =>
      api("PUT", "/v1/workload-issuers/ci", { name: "ci", issuer: ISS, jwks: JSON.stringify({ keys: [key.jwk] }), audiences: [AUD], clock_skew_seconds: 0 });
    try {
      for (const [i, jwks] of documents.entries()) {
        const name = `hide-${i}`;
        const added = await api("POST", "/v1/workload-issuers", { name, issuer: `https://hide${i}.example`, jwks, audiences: [AUD] });
        const changed = await api("PUT", "/v1/workload-issuers/ci", { name: "ci", issuer: ISS, jwks, audiences: [AUD], clock_skew_seconds: 0 });
        for (const r of [added, changed]) {
          expect(r.status === 201 || r.status === 200 || r.status === 400).toBe(true);
          expect(JSON.stringify(r.body)).not.toContain(d);
        }
        expect(JSON.stringify((await api("GET", "/v1/workload-issuers")).body)).not.toContain(d);
        expect((await page("/settings/workload-identity")).text).not.toContain(d);
        const row = await broker.server.store.workload.issuerByName("ci");
        expect(row!.jwks).not.toContain(d);
        if (added.status === 201) await api("DELETE", `/v1/workload-issuers/${name}`);
      }
    } finally {
      // The fixture's issuer as it was: a public key's members are kept as given.
      const back = await restore();
      expect(back.status).toBe(200);
      expect(JSON.parse(back.body.jwks)).toEqual({ keys: [key.jwk] });
    }
  });

  test("keys that could never verify a token are refused: use enc, key_ops without verify, P-521, RSA under 2048 bits, a shared or non-string kid", async () => {
    const { generateKeyPairSync } = await import("node:crypto");
    const small = generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({ format: "jwk" }) as jose.JWK;
    const p521 = await jose.exportJWK((await jose.generateKeyPair("ES512", { extractable: true })).publicKey);
    const k2 = await makeKey("ES256", key.kid);
    const bad: [string, jose.JWK[]][] = [
      ["use enc", [{ ...key.jwk, use: "enc" }]],
      ["key_ops encrypt", [{ ...key.jwk, use: undefined, key_ops: ["encrypt"] }]],
      ["P-521", [p521]],
      ["RSA 1024", [small]],
      ["shared kid", [key.jwk, k2.jwk]],
      ["kid a number", [{ ...key.jwk, kid: 7 as unknown as string }]],
    ];
    for (const [what, keys] of bad) {
      const r = await api("POST", "/v1/workload-issuers", { name: "never", issuer: "https://never.example", jwks: JSON.stringify({ keys }), audiences: [AUD] });
      expect({ what, status: r.status }).toEqual({ what, status: 400 });
      expect(r.body.message).toMatch(/jwks/);
    }
  });

  test("a private or symmetric key, HS256 or none, a key of the wrong type for its alg, 21 keys, or no key list are refused", async () => {
    const bad: unknown[] = [
      { keys: [key.privJwk] },
      { keys: [{ kty: "oct", k: "c2VjcmV0" }] },
      { keys: [{ kty: "oct", k: "c2VjcmV0", alg: "HS256" }] },
      { keys: [{ ...key.jwk, alg: "HS256" }] },
      { keys: [{ ...key.jwk, alg: "none" }] },
      { keys: [{ ...key.jwk, alg: "RS256" }] }, // an EC key declaring an RSA algorithm
      { keys: [{ ...key.jwk, kty: ["EC"] }] },
      { keys: Array.from({ length: 21 }, (_, i) => ({ ...key.jwk, kid: `k${i}` })) },
      { keys: [] },
      { keys: { 0: key.jwk, length: 1 } },
      [key.jwk],
      null,
      "not json",
    ];
    for (const doc of bad) {
      const jwks = typeof doc === "string" ? doc : JSON.stringify(doc);
      const r = await api("POST", "/v1/workload-issuers", { name: "bad", issuer: "https://bad.example", jwks, audiences: [AUD] });
      expect({ jwks: jwks.slice(0, 60), status: r.status }).toEqual({ jwks: jwks.slice(0, 60), status: 400 });
      expect(JSON.stringify(r.body)).not.toContain(key.privJwk.d!);
    }
    const both = await api("POST", "/v1/workload-issuers", {
      name: "bad",
      issuer: "https://bad.example",
      jwks: JSON.stringify({ keys: [key.jwk] }),
      jwks_url: "https://bad.example/jwks",
      audiences: [AUD],
    });
    expect(both.status).toBe(400);
  });

  test("a token signed with an algorithm its key does not declare, or without kid when the set has several keys, is refused", async () => {
    const rsa = await makeKey("RS256", "rsa-1");
    const rsa2 = await makeKey("RS256", "rsa-2");
    await trust("algs", "https://algs.example", [rsa.jwk, rsa2.jwk]);
    try {
      // The control: named kid, declared alg.
      expect((await exchange(await sign({ sub: "ok" }, { key: rsa, iss: "https://algs.example" }))).status).toBe(200);
      // The same private key, used for PS256 and RS512: the key set says RS256.
      for (const alg of ["PS256", "RS512"]) {
        const same = { ...rsa, alg, priv: (await jose.importJWK(rsa.privJwk, alg)) as CryptoKey };
        await refused(await sign({ sub: alg }, { key: same, iss: "https://algs.example" }));
      }
      await refused(await sign({ sub: "nokid" }, { key: rsa, iss: "https://algs.example", kid: null }), /kid/);
      // The kid of one key with the signature of the other.
      await refused(await sign({ sub: "swap" }, { key: rsa2, iss: "https://algs.example", kid: "rsa-1" }), /signature/);
    } finally {
      await api("DELETE", "/v1/workload-issuers/algs");
    }
  });
});

describe("require_jti", () => {
  test("an empty, numeric, list or object jti is no jti: refused where one is required", async () => {
    const k = await makeKey();
    await trust("jti", "https://jti.example", [k.jwk], { require_jti: true });
    try {
      for (const jti of ["", 42, ["a"], { id: "a" }, null]) await refused(await sign({ sub: "j", jti }, { key: k, iss: "https://jti.example" }), /jti/);
      expect((await exchange(await sign({ sub: "j", jti: crypto.randomUUID() }, { key: k, iss: "https://jti.example" }))).status).toBe(200);
    } finally {
      await api("DELETE", "/v1/workload-issuers/jti");
    }
  });

  test("PUT keeps the jti ledger: a token exchanged before the change is refused after it", async () => {
    const t = await sign({ sub: "put-replay", jti: crypto.randomUUID() });
    expect((await exchange(t)).status).toBe(200);
    const changed = await api("PUT", "/v1/workload-issuers/ci", {
      name: "ci",
      issuer: ISS,
      jwks: JSON.stringify({ keys: [key.jwk] }),
      audiences: [AUD, "other"],
      clock_skew_seconds: 0,
      require_jti: true,
    });
    expect(changed.status).toBe(200);
    await refused(t, /jti/);
    await api("PUT", "/v1/workload-issuers/ci", {
      name: "ci",
      issuer: ISS,
      jwks: JSON.stringify({ keys: [key.jwk] }),
      audiences: [AUD],
      clock_skew_seconds: 0,
    });
  });

  test("removing and re-adding an issuer under the same name does not let an exchanged token in again", async () => {
    const k = await makeKey();
    const iss = "https://readd.example";
    await trust("readd", iss, [k.jwk], { require_jti: true });
    const t = await sign({ sub: "replayed", jti: crypto.randomUUID() }, { key: k, iss });
    expect((await exchange(t)).status).toBe(200);
    expect((await api("DELETE", "/v1/workload-issuers/readd")).status).toBe(204);
    await trust("readd", iss, [k.jwk], { require_jti: true });
    try {
      await refused(t, /jti/);
    } finally {
      await api("DELETE", "/v1/workload-issuers/readd");
    }
  });

  test("moving an iss to another issuer row (PUT) does not forget the tokens its first row exchanged", async () => {
    const k = await makeKey();
    const iss = "https://moved.example";
    await trust("first", iss, [k.jwk]);
    const t = await sign({ sub: "moved", jti: crypto.randomUUID() }, { key: k, iss });
    expect((await exchange(t)).status).toBe(200);
    // The first row now trusts another iss; a second row takes over the first iss with the same keys.
    const moved = await api("PUT", "/v1/workload-issuers/first", {
      name: "first",
      issuer: "https://elsewhere.example",
      jwks: JSON.stringify({ keys: [k.jwk] }),
      audiences: [AUD],
    });
    expect(moved.status).toBe(200);
    await trust("second", iss, [k.jwk]);
    try {
      await refused(t, /jti/);
    } finally {
      await api("DELETE", "/v1/workload-issuers/first");
      await api("DELETE", "/v1/workload-issuers/second");
    }
  });
});

describe("the workload named in the audit", () => {
  test("a subject with HTML is named as given in the logs API and escaped on the Logs and Agents pages; the chain verifies", async () => {
    const sub = `repo:org/x:ref:refs/heads/"><img src=x onerror=alert(1)><script>alert(2)</script>&amp;`;
    const s = await session({ sub });
    const record = await proxied(s, "/html-subject");
    expect(record.workload).toEqual({ issuer: ISS, subject: sub });
    expect(record.principal_name).toBe("wl-ci-any");
    for (const path of [`/vaults/${broker.vault}/logs`, `/vaults/${broker.vault}/agents`]) {
      const { status, text } = await page(path);
      expect(status).toBe(200);
      expect(text).not.toContain("<img src=x");
      expect(text).not.toContain("<script>alert(2)");
      expect(text).toContain("&lt;img src=x onerror=alert(1)&gt;");
    }
    // The live tail's feed carries it as data; the tail builds rows with textContent only.
    const feed = await page(`/vaults/${broker.vault}/logs/feed?after=0`);
    expect(JSON.parse(feed.text).logs.some((r: any) => r.workload === sub && r.workload_issuer === ISS)).toBe(true);
    expect(LOG_TAIL_SCRIPT).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    expect(await verifyChain()).toMatchObject({ ok: true, breaks: [] });
  });

  browserTest("the live tail shows a new record's HTML subject as text, running none of it", async () => {
    const b = await openBrowser();
    try {
      const { page: p } = b;
      let dialogs = 0;
      p.on("dialog", (d) => {
        dialogs++;
        void d.dismiss();
      });
      await p.context().addCookies([{ name: "broker_session", value: owner, url: broker.apiUrl }]);
      await p.goto(`${broker.apiUrl}/vaults/${broker.vault}/logs`);
      await p.waitForFunction(() => document.getElementById("live-status")?.textContent?.startsWith("Live"));
      const sub = `tail:<img src=x onerror="window.__pwned=1">`;
      await proxied(await session({ sub }), "/tail-subject");
      await p.waitForFunction((s) => [...document.querySelectorAll("#logs code.name")].some((c) => c.textContent === s), sub, { timeout: 15_000 });
      expect(await p.evaluate(() => (window as any).__pwned)).toBeUndefined();
      expect(await p.locator("#logs img").count()).toBe(0);
      expect(dialogs).toBe(0);
    } finally {
      await b.close();
    }
  });

  test("a subject with a lone surrogate is refused: stored as U+FFFD, two subjects would read as one in the audit", async () => {
    await refused(await sign({ sub: "repo:org/x\ud800:ref:main" }), /sub/);
    await refused(await sign({ sub: "\udfff" }), /sub/);
    expect(await verifyChain()).toMatchObject({ ok: true, breaks: [] });
  });

  test("a subject with control or bidi characters is refused (terminal escapes, NUL, newlines, RTL override)", async () => {
    for (const sub of [
      "repo:x\u001b[2J\u001b]0;pwned\u0007",
      "a\u0000b",
      "line\nforged 200 GET",
      "cr\rx",
      "del\u007f",
      "csi\u009b31m",
      "repo:org/\u202enur-yolped",
      "\u2066iso\u2069",
      "lrm\u200e",
    ]) {
      await refused(await sign({ sub }), /sub/);
    }
  });

  test("a subject over 2048 characters is refused; one of 2048 is named in full", async () => {
    await refused(await sign({ sub: `spiffe://big/${"a".repeat(10_000)}` }), /sub/);
    const sub = `spiffe://edge/${"b".repeat(2048 - "spiffe://edge/".length)}`;
    const record = await proxied(await session({ sub }), "/long-subject");
    expect(record.workload.subject).toBe(sub);
  });

  test("the CLI's logs table shows a stored subject's control characters as escapes, never raw (records made before the refusal)", async () => {
    const s = await session({ sub: "plain" });
    // A session exchanged before subjects were checked: its subject as an older broker stored it.
    const evil = "old\u001b[31mRED\u001b]8;;https://evil.example\u0007link\u202egnp.exe\u009bX";
    await broker.server.store.db.run("UPDATE sessions SET workload_subject = ? WHERE workload_subject = ?", [evil, "plain"]);
    // (the session was never used before: no cached principal holds the subject it was minted with)
    const record = await proxied(s, "/escaped-subject");
    expect(record.workload.subject).toBe(evil);
    const out = await cliOut(["logs", "--vault", broker.vault, "--host", hp]);
    expect(out).toContain("WORKLOAD");
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/);
    expect(out).toContain("\\u001b[31mRED");
    // The same for any table the CLI prints.
    const table = formatTable([{ v: "a\u001b[2Jb\tc\u202ed\r\ne" }], [{ title: "V", value: (r: { v: string }) => r.v }]);
    expect(table).toBe("V\na\\u001b[2Jb\\tc\\u202ed\\ne");
  });

  test("the OCSF export of workload records is valid JSON naming the workload; the hash chain verifies", async () => {
    const sub = 'repo:org/"quoted"\\back:ref:<b>';
    await proxied(await session({ sub }), "/ocsf-subject");
    const exp = await api("GET", `/v1/vaults/${broker.vault}/audit/export?limit=1000`);
    expect(exp.status).toBe(200);
    const rec = (exp.body.records as any[]).find((r) => r.path === "/ocsf-subject");
    expect(rec).toMatchObject({ workload_issuer: ISS, workload_subject: sub });
    const ocsf = JSON.parse(JSON.stringify(ocsfApiActivity(rec, exp.body.vault_id, {}))) as any;
    expect(JSON.stringify(ocsf)).toContain(JSON.stringify(sub).slice(1, -1));
    expect(await verifyChain()).toMatchObject({ ok: true, breaks: [] });
  });
});

describe("who may put a workload in the audit", () => {
  test("a person's and a scoped session's requests name no workload, whatever headers they send", async () => {
    const headers = { "x-workload-subject": "forged", "x-workload-issuer": ISS, "x-broker-workload": "forged" };
    for (const [token, path] of [
      [broker.sessionToken, "/scoped-forge"],
      [owner, "/owner-forge"],
    ] as const) {
      const res = await fetch(`${broker.apiUrl}/proxy/${hp}${path}`, { headers: { authorization: `Bearer ${token}`, "x-vault": broker.vault, ...headers } });
      responses.push(await res.text());
      expect(res.status).toBe(200);
    }
    await Bun.sleep(400);
    const logs = (await api("GET", `/v1/vaults/${broker.vault}/logs?limit=1000`)).body.logs as any[];
    for (const path of ["/scoped-forge", "/owner-forge"]) expect(logs.find((l) => l.path === path)).toMatchObject({ workload: null });
  });

  test("a workload session mints no session of its own, so none inherits or claims a subject", async () => {
    const s = await session({ sub: "parent" });
    const r = await api("POST", "/v1/sessions", { vault: broker.vault, role: "proxy" }, s);
    expect(r.status).toBe(403);
  });

  test("a renewal keeps the subject: another subject's token is refused and the audit still names the first", async () => {
    const s = await session({ sub: "renew-a" });
    expect((await exchange(await sign({ sub: "renew-b" }), s)).status).toBe(400);
    expect((await exchange(await sign({ sub: "renew-a" }), s)).status).toBe(200);
    expect((await proxied(s, "/renewed")).workload).toEqual({ issuer: ISS, subject: "renew-a" });
  });

  test("a renewal must come from the session's own iss: after PUT moves the issuer, the old session is not renewed", async () => {
    const k = await makeKey();
    await trust("mover", "https://mover-a.example", [k.jwk]);
    try {
      const s = await session({ sub: "same-sub" }, { key: k, iss: "https://mover-a.example" });
      const moved = await api("PUT", "/v1/workload-issuers/mover", {
        name: "mover",
        issuer: "https://mover-b.example",
        jwks: JSON.stringify({ keys: [k.jwk] }),
        audiences: [AUD],
      });
      expect(moved.status).toBe(200);
      const r = await exchange(await sign({ sub: "same-sub" }, { key: k, iss: "https://mover-b.example" }), s);
      expect(r.status).toBe(400);
      // Still its first issuer's session: the audit names the iss its token carried.
      expect((await proxied(s, "/mover")).workload).toEqual({ issuer: "https://mover-a.example", subject: "same-sub" });
    } finally {
      await api("DELETE", "/v1/workload-issuers/mover");
    }
  });
});

describe("PUT /v1/workload-issuers/{name}", () => {
  test("anyone but the owner is refused; a renaming body, an unknown name and a key set with a URL are refused", async () => {
    const body = { name: "ci", issuer: "https://evil.example", jwks: JSON.stringify({ keys: [key.jwk] }), audiences: ["evil"] };
    const wl = await session({ sub: "put-attacker" });
    for (const token of [broker.sessionToken, wl]) expect((await api("PUT", "/v1/workload-issuers/ci", body, token)).status).toBe(403);
    expect((await api("PUT", "/v1/workload-issuers/ci", { ...body, name: "other" })).status).toBe(400);
    expect((await api("PUT", "/v1/workload-issuers/nope", { ...body, name: "nope" })).status).toBe(404);
    expect((await api("PUT", "/v1/workload-issuers/ci", { ...body, jwks_url: "https://evil.example/jwks" })).status).toBe(400);
    const now = (await api("GET", "/v1/workload-issuers")).body.issuers.find((i: any) => i.name === "ci");
    expect(now).toMatchObject({ issuer: ISS, audiences: [AUD] });
  });

  test("switching from a key set to discovery and back keeps the bindings; a token is checked by the settings of the moment", async () => {
    const k = await makeKey();
    await trust("switch", "https://switch.example", [k.jwk]);
    try {
      const disc = await api("PUT", "/v1/workload-issuers/switch", { name: "switch", issuer: "https://127.0.0.1:1", audiences: [AUD] });
      expect(disc.body).toMatchObject({ jwks: null, jwks_kids: null, jwks_url: null });
      await refused(await sign({ sub: "s" }, { key: k, iss: "https://switch.example" }), /not trusted/);
      const back = await api("PUT", "/v1/workload-issuers/switch", {
        name: "switch",
        issuer: "https://switch.example",
        jwks: JSON.stringify({ keys: [k.jwk] }),
        audiences: [AUD],
      });
      expect(back.status).toBe(200);
      expect((await api("GET", "/v1/workload-issuers/switch/bindings")).body.bindings.map((b: any) => b.name)).toEqual(["any"]);
      expect((await exchange(await sign({ sub: "s" }, { key: k, iss: "https://switch.example" }))).status).toBe(200);
    } finally {
      await api("DELETE", "/v1/workload-issuers/switch");
    }
  });

  test("exchanges racing PUTs that swap the keys are each answered 200 or 400, never 500", async () => {
    const k1 = await makeKey();
    const k2 = await makeKey();
    await trust("race", "https://race.example", [k1.jwk]);
    try {
      const puts = Array.from({ length: 10 }, (_, i) =>
        api("PUT", "/v1/workload-issuers/race", {
          name: "race",
          issuer: "https://race.example",
          jwks: JSON.stringify({ keys: [i % 2 ? k1.jwk : k2.jwk] }),
          audiences: [AUD],
        }),
      );
      const exchanges = Array.from({ length: 20 }, async (_, i) =>
        exchange(await sign({ sub: `race-${i}` }, { key: i % 2 ? k1 : k2, iss: "https://race.example" })),
      );
      const all = await Promise.all([...puts, ...exchanges]);
      for (const r of all) expect([200, 400]).toContain(r.status);
    } finally {
      await api("DELETE", "/v1/workload-issuers/race");
    }
  });
});

describe.skipIf(pgMissing)("on PostgreSQL", () => {
  test("a subject with NUL is a 400 naming the sub, not a 500 from the session's insert", async () => {
    const cluster = await sharedPgCluster();
    const pg = await startBroker({ caPem: upstream.pki.caPem, env: { BROKER_DATABASE_URL: await cluster.createDatabase() } });
    try {
      const k = await makeKey();
      const iss = "https://pg.example";
      const add = await pg.api(
        "POST",
        "/v1/workload-issuers",
        { name: "pg", issuer: iss, jwks: JSON.stringify({ keys: [k.jwk] }), audiences: [AUD] },
        pg.userToken,
      );
      expect(add.status).toBe(201);
      expect((await pg.api("POST", "/v1/workload-issuers/pg/bindings", { name: "any", vault: pg.vault, conditions: { sub: "*" } }, pg.userToken)).status).toBe(
        201,
      );
      const exchangeOn = async (sub: string) =>
        pg.api("POST", "/v1/sessions/exchange", { grant_type: GRANT, subject_token: await sign({ sub }, { key: k, iss }), subject_token_type: JWT_TYPE });
      const nul = await exchangeOn("repo:x\u0000y");
      responses.push(JSON.stringify(nul.body));
      expect(nul.status).toBe(400);
      expect(nul.body.message).toMatch(/sub/);
      const ok = await exchangeOn("repo:x");
      expect(ok.status).toBe(200);
      secrets.push(ok.body.access_token);
      for (const l of pg.logLines) for (const s of secrets) expect(l.includes(s)).toBe(false);
    } finally {
      await pg.stop();
      await cluster.release();
    }
  }, 60_000);
});

describe("workloads seen and the console", () => {
  let member = "";
  beforeAll(async () => {
    // (its answer hands out the member's session by design: not one of the responses checked for tokens)
    const reg = await broker.api("POST", "/v1/auth/register", { email: "member@example.com", password: "another horse battery" });
    expect(reg.status).toBe(201);
    member = reg.body.token;
    secrets.push(member);
    const store = broker.server.store;
    const user = await store.users.byEmail("member@example.com");
    const vault = await store.vaults.byName(broker.vault);
    await store.access.setMember(vault!.id, user!.id, "member", Date.now());
    expect((await api("POST", "/v1/vaults", { name: "other" })).status).toBe(201);
    await store.access.setMember((await store.vaults.byName("other"))!.id, user!.id, "admin", Date.now());
    await session({ sub: "seen-by-admins-only" });
  });

  test("a member of the vault sees no workload subjects; an admin of another vault sees none of this one's", async () => {
    const mine = await page(`/vaults/${broker.vault}/agents`, member);
    expect(mine.status).toBe(200);
    expect(mine.text).not.toContain("seen-by-admins-only");
    expect(mine.text).not.toContain("Workloads seen");
    const other = await page("/vaults/other/agents", member);
    expect(other.status).toBe(200);
    expect(other.text).not.toContain("seen-by-admins-only");
    const owners = await page(`/vaults/${broker.vault}/agents`);
    expect(owners.text).toContain("seen-by-admins-only");
  });

  test("the Agents page lists at most 100 workloads however many subjects signed in", async () => {
    for (let i = 0; i < 105; i++) await session({ sub: `many-${i}` });
    const { text } = await page(`/vaults/${broker.vault}/agents`);
    expect(text).toContain("Workloads seen (100)");
    expect(text).toContain("many-104");
    expect(text).not.toContain("seen-by-admins-only"); // the oldest fell off
  });

  test("the Workload identity page is the owner's: a member is refused it and its forms", async () => {
    const seen = await page("/settings/workload-identity", member);
    expect(seen.status).toBe(403);
    expect(seen.text).not.toContain(ISS);
    const form = { name: "evil", issuer: "https://evil.example", audiences: "x", clock_skew_seconds: "60" };
    const posted = await page("/settings/workload-identity/issuers", member, {
      method: "POST",
      headers: { origin: broker.apiUrl, "sec-fetch-site": "same-origin", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(form),
    });
    expect(posted.status).toBeGreaterThanOrEqual(400);
    expect((await api("GET", "/v1/workload-issuers")).body.issuers.some((i: any) => i.name === "evil")).toBe(false);
  });

  test("the owner's form posted without the page's CSRF token, or from another site, changes nothing", async () => {
    const form = new URLSearchParams({ name: "csrf", issuer: "https://csrf.example", audiences: "x", clock_skew_seconds: "60" });
    const attempts = [
      { origin: broker.apiUrl, "sec-fetch-site": "same-origin" },
      { origin: "https://evil.example", "sec-fetch-site": "cross-site" },
    ];
    for (const h of attempts) {
      const r = await page("/settings/workload-identity/issuers", owner, {
        method: "POST",
        headers: { ...h, "content-type": "application/x-www-form-urlencoded" },
        body: form,
      });
      expect(r.status).toBeGreaterThanOrEqual(400);
    }
    const del = await page("/settings/workload-identity/issuers/ci/delete", owner, {
      method: "POST",
      headers: { origin: "https://evil.example", "sec-fetch-site": "cross-site", "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ confirm: "ci" }),
    });
    expect(del.status).toBeGreaterThanOrEqual(400);
    const names = (await api("GET", "/v1/workload-issuers")).body.issuers.map((i: any) => i.name);
    expect(names).toContain("ci");
    expect(names).not.toContain("csrf");
  });

  test("HTML in an issuer URL, audiences and claim patterns is escaped on the Workload identity page", async () => {
    const k = await makeKey("ES256", `kid"><img src=x onerror=alert(3)>`);
    const issuer = `https://xss.example/"><script>alert(1)</script>`;
    const r = await api("POST", "/v1/workload-issuers", {
      name: "xss",
      issuer,
      jwks: JSON.stringify({ keys: [k.jwk] }),
      audiences: [`<img src=x onerror=alert(2)>`],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    const b = await api("POST", "/v1/workload-issuers/xss/bindings", {
      name: "b",
      vault: broker.vault,
      conditions: { "<b>claim</b>": `"><svg onload=alert(4)>` },
    });
    expect(b.status, JSON.stringify(b.body)).toBe(201);
    try {
      const { status, text } = await page("/settings/workload-identity");
      expect(status).toBe(200);
      for (const raw of ["<script>alert(1)", "<img src=x onerror=alert(2)>", "<img src=x onerror=alert(3)>", "<svg onload=alert(4)>", "<b>claim</b>"]) {
        expect(text).not.toContain(raw);
      }
      expect(text).toContain("&lt;img src=x onerror=alert(2)&gt;");
    } finally {
      await api("DELETE", "/v1/workload-issuers/xss");
    }
  });
});

/** `broker <args>` in-process against the fixture's broker as its owner: what it printed on stdout. */
async function cliOut(args: string[]): Promise<string> {
  const saved = { addr: process.env.BROKER_ADDR, token: process.env.BROKER_SESSION_TOKEN, dir: process.env.BROKER_CONFIG_DIR };
  process.env.BROKER_ADDR = broker.apiUrl;
  process.env.BROKER_SESSION_TOKEN = owner;
  process.env.BROKER_CONFIG_DIR = mkdtempSync(join(tmpdir(), "wl2-cli-"));
  let out = "";
  let err = "";
  let notes = "";
  const write = process.stdout.write.bind(process.stdout);
  const writeErr = process.stderr.write.bind(process.stderr);
  const text = (chunk: string | Uint8Array) => (typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8"));
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += text(chunk);
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    notes += text(chunk); // the CLI's notes (a cut cell's hint)
    return true;
  }) as typeof process.stderr.write;
  try {
    const code = await main(args, { out: (t) => void (out += t), err: (t) => void (err += t) });
    expect({ code, err }).toEqual({ code: 0, err: "" });
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
    for (const [k, v] of Object.entries({ BROKER_ADDR: saved.addr, BROKER_SESSION_TOKEN: saved.token, BROKER_CONFIG_DIR: saved.dir })) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  responses.push(out, notes);
  return out;
}
