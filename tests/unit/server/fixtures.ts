// Shared set-up for the identity-and-access API tests: a recording wrapper around the in-process
// harness (every response is kept so leak checks can scan it), and helpers that build users,
// vaults, agents and scoped sessions through the public API only.

import { expect } from "bun:test";
import { createTestApi, type TestApi, type TestApiOptions } from "../../helpers/api.ts";

export const MINUTE = 60_000;
export const HOUR = 60 * MINUTE;
export const DAY = 24 * HOUR;
export const PASSWORD = "correct horse battery";

/** Anything shaped like a raw broker token (the logger's masked form `av_sess_[redacted]` does not match). */
export const RAW_TOKEN = /av_(?:sess|agt|inv|appr|uinv)_[A-Za-z0-9_-]{8,}/;

export interface Recorded {
  method: string;
  path: string;
  status: number;
  text: string;
  headers: string;
  body: any;
}

export interface Harness extends TestApi {
  /** Every response the server produced, in order. */
  readonly responses: Recorded[];
  /** Every raw token that appeared in a response body. */
  readonly tokens: Set<string>;
}

export interface As {
  token?: string;
  headers?: Record<string, string>;
}

export async function createHarness(opts: TestApiOptions = {}): Promise<Harness> {
  const api = await createTestApi(opts);
  const responses: Recorded[] = [];
  const tokens = new Set<string>();
  const call: TestApi["call"] = async (method, path, opts) => {
    const res = await api.call(method, path, opts);
    const text = typeof res.body === "string" ? res.body : JSON.stringify(res.body ?? null);
    responses.push({ method, path, status: res.status, text, headers: JSON.stringify(headerPairs(res.headers)), body: res.body });
    for (const m of text.matchAll(new RegExp(RAW_TOKEN.source, "g"))) tokens.add(m[0]);
    return res;
  };
  return { store: api.store, domain: api.domain, clock: api.clock, logs: api.logs, call, responses, tokens };
}

/** A response's headers as [name, value] pairs. */
export function headerPairs(headers: Headers): [string, string][] {
  const out: [string, string][] = [];
  headers.forEach((value, name) => out.push([name, value]));
  return out;
}

let counter = 0;
/** A unique credential value, so a leak can be traced to the test that set it. */
export function sentinel(tag = "secret"): string {
  counter += 1;
  return `SENTINEL-${tag}-${counter}-${crypto.randomUUID()}`;
}

export async function register(h: Harness, email: string, password = PASSWORD): Promise<{ token: string; user: { id: number; email: string; role: string } }> {
  const res = await h.call("POST", "/v1/auth/register", { body: { email, password } });
  expect(res.status).toBe(201);
  return res.body;
}

export async function login(h: Harness, email: string, password = PASSWORD) {
  return h.call("POST", "/v1/auth/login", { body: { email, password } });
}

export async function createVault(h: Harness, token: string, name: string): Promise<void> {
  const res = await h.call("POST", "/v1/vaults", { token, body: { name } });
  expect(res.status).toBe(201);
}

/** Registers `email` and has `adminToken` invite it into `vault` with `role`; returns the user's session token. */
export async function addUser(h: Harness, adminToken: string, vault: string, email: string, role: string): Promise<string> {
  const { token } = await register(h, email);
  const inv = await h.call("POST", `/v1/vaults/${vault}/invites`, { token: adminToken, body: { email, role } });
  expect(inv.status).toBe(201);
  const acc = await h.call("POST", `/v1/vault-invites/${inv.body.token}/accept`, { token });
  expect(acc.status).toBe(200);
  expect(acc.body).toEqual({ vault, role });
  return token;
}

export async function createAgentInvite(h: Harness, adminToken: string, vault: string, body: Record<string, unknown> = {}) {
  return h.call("POST", `/v1/vaults/${vault}/agent-invites`, { token: adminToken, body });
}

/** The path part of an invite_url (the harness serves http://broker.test). */
export function pathOf(url: string): string {
  return new URL(url).pathname;
}

/** Invites and redeems an agent with a grant of `role` on `vault`; returns its token and the headers it must send. */
export async function addAgent(h: Harness, adminToken: string, vault: string, role: string, name: string, ttl?: number | null) {
  const inv = await createAgentInvite(h, adminToken, vault, { name, role, ...(ttl === undefined ? {} : { token_ttl_seconds: ttl }) });
  expect(inv.status).toBe(201);
  const red = await h.call("POST", pathOf(inv.body.invite_url));
  expect(red.status).toBe(201);
  return { token: red.body.token as string, headers: { "x-vault": vault }, name };
}

export async function mintScoped(h: Harness, as: As, vault: string, body: Record<string, unknown> = {}) {
  return h.call("POST", "/v1/sessions", { token: as.token, headers: as.headers, body: { vault, ...body } });
}

export async function setCredential(h: Harness, as: As, vault: string, key: string, value: string) {
  const res = await h.call("PUT", `/v1/vaults/${vault}/credentials/${key}`, { token: as.token, headers: as.headers, body: { value } });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ key, updated_at: expect.any(String) });
}

/**
 * Asserts `secret` is in no response body or header (except those `allow` accepts) and in no log line.
 * Returns how many responses were allowed to carry it.
 */
export function expectNoLeak(h: Harness, secret: string, allow: (r: Recorded) => boolean = () => false): number {
  let allowed = 0;
  for (const r of h.responses) {
    if (allow(r)) {
      allowed += 1;
      continue;
    }
    expect({ where: `${r.method} ${r.path} body`, leaked: r.text.includes(secret) }).toEqual({ where: `${r.method} ${r.path} body`, leaked: false });
    expect({ where: `${r.method} ${r.path} headers`, leaked: r.headers.includes(secret) }).toEqual({ where: `${r.method} ${r.path} headers`, leaked: false });
  }
  for (const line of h.logs) expect(line.includes(secret)).toBe(false);
  return allowed;
}

/** No raw token the server ever issued (nor anything token-shaped) appears in a log line. */
export function expectNoTokensInLogs(h: Harness): void {
  for (const line of h.logs) {
    expect(RAW_TOKEN.test(line)).toBe(false);
    for (const t of h.tokens) expect(line.includes(t)).toBe(false);
  }
}

/** An agent (admin role) in `vault` files one bearer proposal for api.example.com with slot K; its approval page path. */
export async function fileAgentProposal(h: Harness, ownerToken: string, vault: string) {
  const agent = await addAgent(h, ownerToken, vault, "admin", "bot");
  const res = await h.call("POST", "/v1/proposals", {
    token: agent.token,
    headers: agent.headers,
    body: {
      services: [{ action: "set", host: "api.example.com", description: "Example", auth: { type: "bearer", token: "K" } }],
      credentials: [{ action: "set", key: "K", description: "A key" }],
    },
  });
  expect(res.status).toBe(201);
  const url = new URL(res.body.approval_url);
  return { id: res.body.id as number, path: `${url.pathname}${url.search}`, token: url.searchParams.get("token")! };
}
