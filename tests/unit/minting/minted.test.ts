// The minter without a network: what a grant says was sent to obtain it (every value a token
// endpoint could keep is a search pattern, plan.ts responseNeedles notes them with the token), and
// the bound on refreshes after upstream 401s (an API path refusing every token must not mint one per
// request: each is an echo needle for a day).

import { expect, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { createMinter, REGRANT_BURST, REGRANT_COOLDOWN_MS } from "../../../src/minting/minted.ts";
import type { Grant } from "../../../src/egress/minter.ts";
import type { EgressPlan } from "../../../src/egress/plan.ts";
import type { OutboundRequest, Upstream } from "../../../src/egress/upstream.ts";
import { compileNetPolicy } from "../../../src/egress/netguard.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { Secret } from "../../../src/secret.ts";
import type { MintedAuthType } from "../../../src/store/index.ts";
import type { MintedAuthFields } from "../../../src/policy/index.ts";

/** A token endpoint that answers every request with a new token and records each request's headers. */
function tokenEndpoint(extra: Record<string, unknown> = {}) {
  const requests: { headers: [string, string][]; body: string }[] = [];
  let n = 0;
  const upstream: Upstream = {
    async send(_dest, req: OutboundRequest) {
      const body = req.body ? Buffer.from(await new Response(req.body).arrayBuffer()).toString() : "";
      requests.push({ headers: [...req.headers] as [string, string][], body });
      const json = JSON.stringify({ access_token: `at-${++n}`, token: `ghs-${n}`, token_type: "Bearer", expires_in: 3600, ...extra });
      return { status: 200, statusText: "OK", headers: [["content-type", "application/json"]], body: new TextEncoder().encode(json) };
    },
    open: async () => {
      throw new Error("unused");
    },
    openPlain: async () => {
      throw new Error("unused");
    },
    close() {},
  };
  return { upstream, requests };
}

function minterWith(upstream: Upstream, clock: { now: number }, noteSent?: (values: readonly Secret[]) => void) {
  return createMinter({
    ...(noteSent && { noteSent }),
    upstream,
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    now: () => clock.now,
    log: createMemoryLogger(),
    saveRotated: async () => {},
  });
}

function mintedPlan(type: MintedAuthType, fields: MintedAuthFields, inputs: Record<string, string>): EgressPlan {
  const secrets = new Map(Object.entries(inputs).map(([k, v]) => [k, new Secret(v)]));
  return {
    service: { host: "api.example.com", authType: type },
    auth: { type, ...fields } as EgressPlan["auth"],
    injection: undefined,
    credentialKeys: Object.keys(inputs),
    needles: undefined as unknown as EgressPlan["needles"],
    minted: { type, fields, inputs: secrets, fingerprint: `${type}-fp` },
  };
}

const sentOf = (g: Grant) => g.sent.map((s) => s.reveal());
const header = (h: [string, string][], name: string) => h.find(([k]) => k.toLowerCase() === name)?.[1] ?? "";
const VAULT = { id: 1 };

test("a GitHub App grant says it sent the app JWT (exactly the one in the token request's Authorization)", async () => {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const ep = tokenEndpoint();
  const plan = mintedPlan("github_app", { app_id: "1", installation_id: "2", api_url: "https://gh.example.com" }, { private_key: pem });
  const g = await minterWith(ep.upstream, { now: Date.now() }).grant(VAULT, plan);
  const jwt = header(ep.requests[0]!.headers, "authorization").replace(/^Bearer /, "");
  expect(jwt.split(".").length).toBe(3);
  expect(sentOf(g).includes(jwt)).toBe(true);
  expect(String(g.sent)).not.toContain(jwt); // Secrets print as [redacted]
});

test("an app JWT is noted as sent before the token request goes, so a refused request's JWT is a needle too", async () => {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const requests: [string, string][][] = [];
  const refusing: Upstream = {
    async send(_dest, req: OutboundRequest) {
      requests.push([...req.headers] as [string, string][]);
      return { status: 401, statusText: "Unauthorized", headers: [["content-type", "application/json"]], body: new TextEncoder().encode("{}") };
    },
    open: async () => {
      throw new Error("unused");
    },
    openPlain: async () => {
      throw new Error("unused");
    },
    close() {},
  };
  const noted: string[] = [];
  const plan = mintedPlan("github_app", { app_id: "1", installation_id: "2", api_url: "https://gh.example.com" }, { private_key: pem });
  await expect(minterWith(refusing, { now: Date.now() }, (values) => noted.push(...values.map((v) => v.reveal()))).grant(VAULT, plan)).rejects.toThrow();
  const jwt = header(requests[0]!, "authorization").replace(/^Bearer /, "");
  expect(noted.includes(jwt)).toBe(true);
});

test("an OAuth grant says it sent the client authentication as encoded, the refresh token, and the rotated one it will send next", async () => {
  const secret = "Zx9/Qw+Er=Ty~Ui/Op+As";
  const ep = tokenEndpoint({ refresh_token: "rt-rotated-0123456789" });
  const fields: MintedAuthFields = { token_url: "https://auth.example.com/token", client_id: "ID", client_secret: "SECRET", refresh_token: "RT" };
  const basic = await minterWith(ep.upstream, { now: Date.now() }).grant(
    VAULT,
    mintedPlan("oauth2_refresh", fields, { client_id: "client 1", client_secret: secret, refresh_token: "rt-original+/=" }),
  );
  const blob = header(ep.requests[0]!.headers, "authorization").replace(/^Basic /, "");
  expect(sentOf(basic)).toEqual(expect.arrayContaining([blob, "rt-original+/=", "rt-original%2B%2F%3D", "rt-rotated-0123456789"]));
  const plain = tokenEndpoint();
  const post = await minterWith(plain.upstream, { now: Date.now() }).grant(
    VAULT,
    mintedPlan("oauth2_client_credentials", { ...fields, client_auth: "post", refresh_token: undefined }, { client_id: "client 1", client_secret: secret }),
  );
  expect(plain.requests[0]!.body).toContain("client_secret=Zx9%2FQw%2BEr%3DTy%7EUi%2FOp%2BAs");
  expect(sentOf(post)).toEqual(["Zx9%2FQw%2BEr%3DTy%7EUi%2FOp%2BAs"]);
});

test(`refreshes after 401s: ${REGRANT_BURST} in a row, then none until a cooldown has passed (the current token kept); concurrent 401s share one`, async () => {
  const ep = tokenEndpoint();
  const clock = { now: 1_000_000 };
  const minter = minterWith(ep.upstream, clock);
  const plan = mintedPlan(
    "oauth2_client_credentials",
    { token_url: "https://auth.example.com/token", client_id: "ID", client_secret: "SECRET" },
    { client_id: "c", client_secret: "s" },
  );
  let g = await minter.grant(VAULT, plan);
  // 50 requests rejected with the same token: one refresh, all get the new token.
  const shared = await Promise.all(Array.from({ length: 50 }, () => minter.regrant(VAULT, plan, g)));
  expect(new Set(shared).size).toBe(1);
  g = shared[0]!;
  for (let i = 1; i < REGRANT_BURST; i++) g = (await minter.regrant(VAULT, plan, g))!;
  expect(ep.requests.length).toBe(1 + REGRANT_BURST);
  expect(minter.regrant(VAULT, plan, g)).toBeUndefined(); // the 401 stands
  expect(await minter.grant(VAULT, plan)).toBe(g); // the current token is kept
  clock.now += REGRANT_COOLDOWN_MS - 1;
  expect(minter.regrant(VAULT, plan, g)).toBeUndefined();
  clock.now += 1;
  const after = await minter.regrant(VAULT, plan, g);
  expect(after).toBeDefined();
  expect(after).not.toBe(g);
  expect(minter.regrant(VAULT, plan, after!)).toBeUndefined();
  expect(ep.requests.length).toBe(2 + REGRANT_BURST);
  // A stale grant someone already replaced costs nothing: the current one is handed back.
  expect(await minter.regrant(VAULT, plan, g)).toBe(after!);
  // Another vault's slot has its own bucket.
  expect(await minter.regrant({ id: 2 }, plan, await minter.grant({ id: 2 }, plan))).toBeDefined();
});
