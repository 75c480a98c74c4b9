// Issue 31 item 5, acceptance: "the forms servers quote values in" (architecture.md D15, D22). A hostile
// upstream (echo-forms-upstream.ts) turns the credential it was given into base64/base64url at every
// alignment, hex, percent-escapes, HTML and JSON escapes, UTF-16, other case, invisible characters,
// same-named header lines and masked-key texts, and sends it in the body (plain, gzip, many small
// pieces) or in a header. Nothing the agent receives may reveal the value in any decodable form
// (echo-forms-check.ts), the text around the echo arrives intact, and no log line or audit record holds
// the value. The checker is tested first, so these cannot pass vacuously.
//
// The matrix: the bearer service with every form on all three paths (/proxy, the CONNECT tunnel over
// HTTP/1.1 and over HTTP/2), in the body and in a header, plus gzip and small chunks on /proxy (the
// body transport is the same code on every path); the basic (with username), custom-header and short
// (8 character) services with every form on /proxy, in the body (in a header for the header-only
// forms). One response per form and place; the cases of a block share one broker, upstream and a few
// kept-alive connections (HTTP/2: one session) and are fetched together, each test checking its own.
// The ATTACK sections at the end are ways found beyond item 5's list: the ones held are tests, the
// ones README's "Not covered" names are test.todo (echo-forms-tricks.ts, NOT_COVERED).

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import zlib from "node:zlib";
import { createTestPki } from "../helpers/pki.ts";
import { revealed, RUN } from "./echo-forms-check.ts";
import {
  AFTER,
  AROUND_HEADER,
  BEFORE,
  FORMS,
  renderCase,
  sent,
  startFormsH2Upstream,
  startRawH1Upstream,
  WS_SCENARIOS,
  type Form,
  type Place,
  type Subjects,
} from "./echo-forms-upstream.ts";
import { expectNoLeak, startBroker, type Broker } from "./proxy-fixture.ts";
import { bodyText, INGRESS, mask, PROXY, TUNNEL_H1, TUNNEL_H2, wsExchange, type Agent, type AgentEnv, type Got, type Ingress } from "./echo-forms-agents.ts";
import { NOT_COVERED, reassembleParts, TRICKS, WS_NOT_COVERED } from "./echo-forms-tricks.ts";
import { basicProxyAuth } from "./tunnel-fixture.ts";

const B62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
function base62(n: number): string {
  return [...crypto.getRandomValues(new Uint8Array(n))].map((b) => B62[b % 62]).join("");
}

interface Svc {
  readonly name: string;
  readonly host: string;
  readonly key: string;
  /** SECRET: the credential value, generated per run. */
  readonly value: string;
  readonly auth: Record<string, unknown>;
  readonly user: string;
}

const SERVICES: readonly Svc[] = [
  { name: "bearer", host: "upstream.test", key: "BEARER_KEY", value: `sk-live-${base62(32)}`, auth: { type: "bearer", token: "BEARER_KEY" }, user: "user" },
  {
    name: "basic (username alice)",
    host: "basic.upstream.test",
    key: "BASIC_KEY",
    value: base62(28),
    auth: { type: "basic", token: "BASIC_KEY", username: "alice" },
    user: "alice",
  },
  {
    name: "custom header X-Api-Key (prefix 'Token ')",
    host: "header.upstream.test",
    key: "HEADER_KEY",
    value: `ghp_${base62(36)}`,
    auth: { type: "header", header: "X-Api-Key", token: "HEADER_KEY", prefix: "Token " },
    user: "user",
  },
  {
    name: "short bearer (8 characters)",
    host: "short.upstream.test",
    key: "SHORT_KEY",
    value: base62(8),
    auth: { type: "bearer", token: "SHORT_KEY" },
    user: "user",
  },
];

const subjectsFor = (svc: Svc): Subjects => ({ value: svc.value, bearer: `Bearer ${svc.value}`, userpass: `${svc.user}:${svc.value}` });
const appliesTo = (form: Form, svc: Svc) => !form.longOnly || svc.value.length > RUN;

// ---------------------------------------------------------------------------------------------------
// The checker itself: it must find every form when handed it directly, or the e2e tests prove nothing.

describe("the checker finds every form it is handed directly", () => {
  for (const svc of SERVICES) {
    test(`${svc.name}: every form, every place, as the upstream sends it`, () => {
      const missed: string[] = [];
      for (const form of FORMS.filter((f) => appliesTo(f, svc))) {
        for (const at of form.places) {
          const r = renderCase(form, subjectsFor(svc), at);
          const head = r.headers.map(([k, v]) => `${k}: ${v}`).join("\r\n");
          const found = at === "header" ? revealed(head, svc.value) : revealed(r.body, svc.value);
          if (!found) missed.push(`${form.id} @ ${at}`);
          // Each form that carries the whole value is read back whole, not merely caught by a 12-character run.
          else if (!form.longOnly && !found.startsWith("the whole value")) missed.push(`${form.id} @ ${at}: only ${found}`);
          // Client-joined header lines (fetch, node:http2) are found too.
          if (
            at === "header" &&
            !revealed(
              `x-echo: ${r.headers
                .filter(([k]) => k === "x-echo")
                .map(([, v]) => v)
                .join(", ")}`,
              svc.value,
            )
          )
            missed.push(`${form.id} @ header joined with ", "`);
          if (at === "gzip" && !revealed(zlib.gunzipSync(zlib.gzipSync(r.body)), svc.value)) missed.push(`${form.id} @ gzip round trip`);
        }
      }
      expect(missed).toEqual([]);
    });
  }

  test("every attack form too (the ATTACK tests below), the whole value each time", () => {
    const missed: string[] = [];
    for (const svc of SERVICES) {
      for (const form of TRICKS) {
        for (const at of form.places) {
          const r = renderCase(form, subjectsFor(svc), at);
          const all = [`HTTP/1.1 200 ${r.statusMessage ?? "OK"}`, ...[...r.headers, ...(r.trailers ?? [])].map(([k, v]) => `${k}: ${v}`)].join("\r\n");
          const text = `${all}\r\n\r\n${r.body.toString("utf8")}`;
          const found =
            at === "header"
              ? revealed(all, svc.value)
              : at === "custom"
                ? form.reassemble
                  ? revealed(form.reassemble(text), svc.value)
                  : revealed(text, svc.value)
                : revealed(r.body, svc.value);
          if (!found?.startsWith("the whole value")) missed.push(`${svc.name}: ${form.id} @ ${at}: ${found ?? "nothing"}`);
        }
      }
    }
    expect(missed).toEqual([]);
  });

  test("says what it found without printing the value", () => {
    const v = SERVICES[0]!.value;
    const found = revealed(`x: ${Buffer.from(`ab${v}`).toString("base64url")}`, v)!;
    expect(found).toContain("whole value");
    expect(found).toContain("base64");
    expect(found).not.toContain(v);
    for (let i = 0; i + RUN <= v.length; i++) expect(found).not.toContain(v.slice(i, i + RUN));
  });

  test("finds the value in the forms it decodes on top of each other, and a run of 12 in any of them", () => {
    const v = SERVICES[0]!.value;
    const b64 = Buffer.from(`Bearer ${v}`).toString("base64");
    const cases = [
      encodeURIComponent(b64), // percent-encoded base64
      Buffer.from(b64).toString("base64"), // base64 twice
      [...b64].map((c) => `&#${c.charCodeAt(0)};`).join(""), // HTML entities of base64
      Buffer.from(`pad${v.slice(5, 5 + RUN)}pad`).toString("hex"), // hex of a 12-run
      [...v].map((c) => `&#x200b;${c}`).join(""), // a zero-width character as an entity between every character
      `${v.slice(0, 20)}&shy${v.slice(20)}`, // a named entity without its semicolon
    ];
    for (const c of cases) expect(revealed(c, v)).not.toBeNull();
  });

  test("finds nothing in redacted output, other values, or 11 characters of the value", () => {
    const v = SERVICES[0]!.value;
    const other = `sk-live-${base62(32)}`;
    const clean = [
      `${BEFORE}\nyou sent: Bearer [redacted]\n${AFTER}\n`,
      `x-echo: you sent: ${Buffer.from(`Bearer ${other}`).toString("base64")}`,
      Buffer.from(`${other}`, "utf16le"),
      `Incorrect API key provided: ${v.slice(0, RUN - 1)}...`,
      `Incorrect API key provided: ...${v.slice(-(RUN - 1))}`,
      Buffer.from(v.slice(3, 3 + RUN - 1)).toString("hex"),
    ];
    for (const c of clean) expect(revealed(c, v)).toBeNull();
  });
});

// ---------------------------------------------------------------------------------------------------
// End to end: the same forms through the real broker, on both ingress paths.

let broker: Broker;
let h1: { port: number; close(): Promise<void> };
let h2: { port: number; close(): Promise<void> };
let env: AgentEnv;
let rid = 0;

beforeAll(async () => {
  const pki = await createTestPki({ dns: SERVICES.map((s) => s.host) });
  h1 = await startRawH1Upstream(pki);
  h2 = await startFormsH2Upstream(pki);
  broker = await startBroker({ caPem: pki.caPem, tunnel: true });
  for (const svc of SERVICES) {
    broker.dns.set(svc.host, ["127.0.0.1"]);
    await broker.setCredential(svc.key, svc.value);
    for (const port of [h1.port, h2.port]) await broker.addService(`${svc.host}:${port}`, svc.auth);
  }
  env = {
    apiUrl: broker.apiUrl,
    sessionToken: broker.sessionToken,
    proxyPort: Number(broker.proxyAddress!.split(":").at(-1)),
    proxyAuth: basicProxyAuth(broker.sessionToken, broker.vault),
    brokerCa: await (await fetch(`${broker.apiUrl}/v1/ca.pem`)).text(),
    h1Port: h1.port,
    h2Port: h2.port,
  };
}, 60_000);

afterAll(async () => {
  await broker?.stop();
  await h1?.close();
  await h2?.close();
});

/** `revealed`, remembered by input: the same bytes (an echo redacted alike on several paths) are checked once. */
const seen = new Map<string, string | null>();
function reveals(received: string | Buffer, value: string): string | null {
  const key = `${value}\0${typeof received === "string" ? `s${received}` : `b${received.toString("latin1")}`}`;
  if (!seen.has(key)) seen.set(key, revealed(received, value));
  return seen.get(key)!;
}

/** One request of a block: a form in one place, and what came back. */
interface Job {
  readonly index: number;
  readonly at: Place;
  readonly rid: string;
  got?: Got;
  error?: string;
  /** What the upstream sent for it. */
  up?: { headers: string; body: Buffer };
}

/** How many cases of a block are in flight at once (kept-alive connections, or HTTP/2 streams). */
const WIDTH = 6;

/**
 * The cases of one describe block: registered while the block is defined, fetched together the first
 * time a test asks (a few connections, several cases in flight), each test then checking its own.
 */
class Batch {
  private readonly jobs = new Map<string, Job>();
  private done: Promise<void> | undefined;

  constructor(
    readonly ingress: Ingress,
    readonly svc: Svc,
    readonly table: string,
  ) {}

  add(index: number, at: Place): void {
    this.jobs.set(`${index}@${at}`, { index, at, rid: String(++rid) });
  }

  async result(index: number, at: Place): Promise<Job> {
    await (this.done ??= this.fetchAll());
    return this.jobs.get(`${index}@${at}`)!;
  }

  private async fetchAll(): Promise<void> {
    const queue = [...this.jobs.values()];
    const shared = this.ingress.multiplexed ? await this.ingress.open(env, this.svc.host) : undefined;
    const worker = async () => {
      let agent: Agent | undefined = shared;
      try {
        for (let job = queue.shift(); job; job = queue.shift()) {
          try {
            agent ??= await this.ingress.open(env, this.svc.host);
            job.got = await agent.get(`/${this.table}/${job.index}?at=${job.at}&rid=${job.rid}`);
          } catch (err) {
            job.error = String(err);
            if (!shared) {
              agent?.close();
              agent = undefined;
            }
          }
          job.up = sent.get(job.rid);
          sent.delete(job.rid);
        }
      } finally {
        if (!shared) agent?.close();
      }
    };
    try {
      await Promise.all(Array.from({ length: WIDTH }, worker));
    } finally {
      shared?.close();
    }
  }
}

/** Everything wrong with one case in one place: leaks (what was found, never the value) and damage. */
function checkCase(svc: Svc, form: Form, job: Job): string[] {
  const { at, up, got } = job;
  if (!up) return [`${at}: the upstream never answered this case (agent got ${got?.status ?? job.error})`];
  if (!got) return [`${at}: no answer: ${job.error}`];
  const problems: string[] = [];
  const upAll = `${up.headers}\n\n${up.body.toString("utf8")}`;
  if (
    !(reveals(at === "header" ? up.headers : at === "custom" ? upAll : up.body, svc.value) ?? (form.reassemble && reveals(form.reassemble(upAll), svc.value)))
  ) {
    problems.push(`${at}: TEST BUG: the checker does not see the upstream's echo`);
  }
  const text = bodyText(got.plain, got.contentType);
  const views: [string, string | Buffer][] = [["status line and headers", got.head]];
  // Views that are the same bytes as another are checked once: the body as framed when nothing was
  // decoded, the decoded body when it is ASCII read as such (the text view reads those same bytes too).
  if (!got.body.equals(got.plain)) views.push(["body as framed", got.body]);
  if (!(got.plain.every((b) => b < 0x80) && text === got.plain.toString("latin1"))) views.push(["body decoded", got.plain]);
  views.push(["body as text", text]);
  if (form.reassemble) views.push(["pieces put back together from everything received", form.reassemble(`${got.head}\n\n${text}`)]);
  for (const [what, r] of views) {
    const found = reveals(r, svc.value);
    if (found) {
      problems.push(`${at}: LEAK in ${what}: ${found}`);
      break;
    }
  }
  if (process.env.ECHO_FORMS_DEBUG)
    console.log(at, got.status, JSON.stringify(mask(got.head, svc.value)), JSON.stringify(mask(got.plain.toString("latin1"), svc.value)));
  if (got.status !== 200) problems.push(`${at}: status ${got.status}, not 200`);
  if (!text.includes(BEFORE) || !text.includes(AFTER)) problems.push(`${at}: the body around the echo did not arrive intact`);
  if (!got.head.toLowerCase().includes(`${AROUND_HEADER[0]}: ${AROUND_HEADER[1]}`)) problems.push(`${at}: the header beside the echo did not arrive`);
  return problems;
}

/** One test per form: its case in each of `places`, fetched with the rest of `batch`. */
function caseTest(batch: Batch, form: Form, index: number, places: readonly Place[]): void {
  for (const at of places) batch.add(index, at);
  test(form.id, async () => {
    const problems: string[] = [];
    for (const at of places) problems.push(...checkCase(batch.svc, form, await batch.result(index, at)));
    expect(problems).toEqual([]);
  }, 60_000);
}

const [BEARER, ...OTHERS] = SERVICES as [Svc, ...Svc[]];
const BODY_AND_HEADER = (f: Form) => f.places.filter((p) => p === "body" || p === "header");
const BODY_ONLY = (f: Form) => (f.places.includes("body") ? ["body" as const] : f.places);
const MATRIX: readonly [Ingress, Svc, string, (f: Form) => readonly Place[]][] = [
  [PROXY, BEARER, "body, gzip, small chunks, header", (f) => f.places],
  [TUNNEL_H1, BEARER, "body, header", BODY_AND_HEADER],
  [TUNNEL_H2, BEARER, "body, header", BODY_AND_HEADER],
  ...OTHERS.map((svc): [Ingress, Svc, string, (f: Form) => readonly Place[]] => [PROXY, svc, "body (header-only forms: header)", BODY_ONLY]),
];

for (const [ingress, svc, where, placesOf] of MATRIX) {
  describe(`${ingress.name}, ${svc.name}: ${where}`, () => {
    const batch = new Batch(ingress, svc, "form");
    for (const [i, form] of FORMS.entries()) if (appliesTo(form, svc)) caseTest(batch, form, i, placesOf(form));
  });
}

// ---------------------------------------------------------------------------------------------------
// ATTACKS beyond item 5's list (echo-forms-tricks.ts), tried against the normalizing scanner of
// e6ffe3d/7e98554: every one of them got the value out on at least one path when it was added (the
// h1 trailer cases pass only because HTTP/1.1 trailers are not forwarded at all). Those README lists
// under "Not covered" are test.todo.

const notCovered = (id: string) => `${id} — not covered, see README 'Not covered'`;

for (const ingress of INGRESS) {
  describe(`ATTACK beyond item 5: ${ingress.name}, ${BEARER.name}`, () => {
    const batch = new Batch(ingress, BEARER, "trick");
    const todo = NOT_COVERED.filter((n) => !n.on || n.on.includes(ingress.name));
    for (const [i, form] of TRICKS.entries()) if (!todo.some((n) => n.id === form.id)) caseTest(batch, form, i, form.places);
    for (const n of todo) test.todo(notCovered(n.id));
  });
}

describe("ATTACK beyond item 5: WebSocket messages through the tunnel, bearer", () => {
  for (const scenario of Object.keys(WS_SCENARIOS)) {
    test(scenario, async () => {
      const got = await wsExchange(env, BEARER.host, `/ws/${encodeURIComponent(scenario)}`);
      const all = `${got.head}\n\n${got.messages.join("\n")}`;
      const problems: string[] = [];
      const found = revealed(all, BEARER.value);
      const joined = revealed(reassembleParts(all), BEARER.value);
      if (found) problems.push(`LEAK in the messages: ${found}`);
      else if (joined) problems.push(`LEAK in the pieces put back together: ${joined}`);
      if (got.status !== 101) problems.push(`status ${got.status}, not 101`);
      if (!all.includes(BEFORE) || !all.includes(AFTER)) problems.push("the messages around the echo did not arrive intact");
      expect(problems).toEqual([]);
    }, 30_000);
  }
  for (const n of WS_NOT_COVERED) test.todo(notCovered(n.id));
});

test("no log line or audit record holds any of the values", async () => {
  await Promise.all(SERVICES.map((svc) => expectNoLeak(broker, svc.value)));
});
