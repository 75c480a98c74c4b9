// Another vault's value (issue 31, item 4; architecture.md D22): an upstream that keeps the last
// Authorization it received and returns it in the next answer (a request bin, a shared logging API)
// is reached by several vaults of one broker. Vault B's agent (a bearer service of its own) and
// vault C's (passthrough, nothing injected) must read "[redacted]" where vault A's value, or vault
// M's minted token, comes back: on /proxy and through the CONNECT tunnel, and for A's value after a
// human rotated it.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dumpResponse, expectNoLeak } from "./proxy-fixture.ts";
import { startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

let env: TunnelEnv;
/** What the storing upstream returns next: the Authorization it received last. */
let kept = "";
/** Vault A's current value (the fixture's, until a test rotates it). */
let aValue = "";
const issued: string[] = [];
const seen: string[] = [];
const secrets: string[] = [];
const agents = new Map<string, { vault: string; token: string }>();

function storing(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader("content-type", "application/json");
  if (req.url === "/token") {
    const token = `at-${crypto.randomUUID()}`;
    issued.push(token);
    res.end(JSON.stringify({ access_token: token, token_type: "Bearer", expires_in: 3600 }));
    return;
  }
  const previous = kept;
  kept = req.headers.authorization ?? "";
  res.setHeader("x-previous", previous);
  res.end(JSON.stringify({ previous }));
}

async function must(method: string, path: string, body?: unknown): Promise<any> {
  const r = await env.broker.api(method, path, body, env.broker.userToken);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status}`);
  return r.body;
}

async function addVault(name: string, creds: Record<string, string>, auth: Record<string, unknown>): Promise<void> {
  await must("POST", "/v1/vaults", { name });
  for (const [key, value] of Object.entries(creds)) await must("PUT", `/v1/vaults/${name}/credentials/${key}`, { value });
  await must("POST", `/v1/vaults/${name}/services`, { host: env.authority, auth });
  agents.set(name, { vault: name, token: (await must("POST", "/v1/sessions", { vault: name, role: "proxy" })).token });
}

beforeAll(async () => {
  env = await startTunnelEnv({ handler: (req, res) => storing(req, res) });
  agents.set("a", { vault: env.broker.vault, token: env.broker.sessionToken }); // the fixture's vault: bearer env.secret
  secrets.push(env.secret);
  aValue = env.secret;
  const b = `sk-vault-b-${crypto.randomUUID()}`;
  secrets.push(b);
  await addVault("b", { B_KEY: b }, { type: "bearer", token: "B_KEY" });
  await addVault("c", {}, { type: "passthrough" });
  const clientSecret = `cs-vault-m-${crypto.randomUUID()}`;
  secrets.push(clientSecret);
  await addVault(
    "m",
    { M_ID: "client-m", M_SECRET: clientSecret },
    { type: "oauth2_client_credentials", token_url: `https://${env.authority}/token`, client_id: "M_ID", client_secret: "M_SECRET" },
  );
});

afterAll(async () => {
  for (const s of [...secrets, ...issued]) await expectNoLeak(env.broker, s, seen);
  await env.stop();
});

/** One call as `agent`'s vault, on /proxy or through the tunnel; returns the answer's text (kept for the leak check). */
async function call(agent: string, via: "proxy" | "tunnel"): Promise<{ previous: string; header: string | null; text: string }> {
  const { vault, token } = agents.get(agent)!;
  const res =
    via === "proxy"
      ? await env.broker.proxy(env.authority, "/bin", { headers: { authorization: `Bearer ${token}` } })
      : await fetch(`https://${env.authority}/bin`, { proxy: `http://${token}:${vault}@127.0.0.1:${env.proxyPort}`, tls: { ca: env.caPem } } as RequestInit);
  expect(res.status).toBe(200);
  const header = res.headers.get("x-previous");
  const text = await dumpResponse(res);
  seen.push(text);
  return { previous: JSON.parse(text.slice(text.indexOf("\n\n") + 2)).previous, header, text };
}

/** What the upstream was sent last, compared without printing it. */
const lastSent = () => env.upstream.received.at(-1)!.rawHeaders.find(([k]) => k.toLowerCase() === "authorization")?.[1] ?? "";

for (const via of ["proxy", "tunnel"] as const) {
  describe(`through ${via === "proxy" ? "/proxy" : "the CONNECT tunnel"}`, () => {
    test("vault A's value, kept by the upstream, reaches vault B's agent as [redacted]", async () => {
      await call("a", via);
      expect(lastSent() === `Bearer ${aValue}`).toBe(true);
      const b = await call("b", via);
      expect(b.previous).toBe("Bearer [redacted]");
      expect(b.header).toBe("Bearer [redacted]");
      expect(b.text.includes(aValue)).toBe(false);
    });

    test("a passthrough service's agent (vault C, nothing injected) reads [redacted] too", async () => {
      await call("a", via);
      const c = await call("c", via);
      expect(c.previous).toBe("Bearer [redacted]");
      expect(c.header).toBe("Bearer [redacted]");
      // And A reads C's empty Authorization back as it was: nothing else is touched.
      expect((await call("a", via)).previous).toBe("");
    });

    test("vault M's minted token, kept by the upstream, reaches vault B's agent as [redacted]", async () => {
      await call("m", via);
      const token = issued.at(-1)!;
      expect(lastSent() === `Bearer ${token}`).toBe(true);
      const b = await call("b", via);
      expect(b.previous).toBe("Bearer [redacted]");
      expect(b.text.includes(token)).toBe(false);
    });

    test("A's value rotated after A's call: the old one, replayed to B, is still [redacted]", async () => {
      const old = `sk-a-${via}-old-${crypto.randomUUID()}`;
      const next = `sk-a-${via}-new-${crypto.randomUUID()}`;
      secrets.push(old, next);
      await must("PUT", `/v1/vaults/${env.broker.vault}/credentials/API_KEY`, { value: old });
      await call("a", via);
      expect(lastSent() === `Bearer ${old}`).toBe(true);
      await must("PUT", `/v1/vaults/${env.broker.vault}/credentials/API_KEY`, { value: next });
      aValue = next;
      const b = await call("b", via);
      expect(b.previous).toBe("Bearer [redacted]");
      expect(b.text.includes(old)).toBe(false);
      // The next call from A sends the new value; B's next answer hides it as well.
      await call("a", via);
      expect(lastSent() === `Bearer ${next}`).toBe(true);
      expect((await call("b", via)).previous).toBe("Bearer [redacted]");
    });
  });
}
