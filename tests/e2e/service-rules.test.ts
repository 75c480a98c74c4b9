// Service rules through /proxy: allowed and refused methods and paths, ambiguous paths refused with
// 400 before anything reaches the upstream, the forwarded path byte-identical to the matched one,
// the refusal's envelope (allowed rules, a proposal hint that widens them), the audit record, and
// /discover telling the agent beforehand. The credential never shows in any of it.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { dumpResponse, expectEnvelope, expectNoLeak, rawRequest, startBroker, type Broker } from "./proxy-fixture.ts";

let upstream: TestUpstream;
let broker: Broker;
let hp: string;
const SECRET = `sk-rules-${crypto.randomUUID()}`;
const RULES = [
  { methods: ["GET", "HEAD"], paths: ["/repos/*/issues/**"] },
  { methods: ["POST"], paths: ["/repos/*/issues"] },
];

beforeAll(async () => {
  upstream = await startUpstream((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ url: req.url }));
  });
  broker = await startBroker({ caPem: upstream.pki.caPem });
  hp = `127.0.0.1:${upstream.port}`;
  await broker.setCredential("GH_TOKEN", SECRET);
  await broker.addService(hp, { type: "bearer", token: "GH_TOKEN" }, { rules: RULES });
});
afterAll(async () => {
  await broker?.stop();
  await upstream?.close();
});

const outputs: string[] = [];
async function call(method: string, path: string): Promise<Response> {
  const res = await broker.proxy(hp, path, { method });
  outputs.push(await dumpResponse(res.clone()));
  return res;
}

describe("rules on /proxy", () => {
  test("allowed methods and paths pass, nested ** and single * included; the upstream gets the matched path byte for byte", async () => {
    for (const [method, path] of [
      ["GET", "/repos/acme/issues"],
      ["GET", "/repos/acme/issues/12/comments"],
      ["HEAD", "/repos/acme/issues/"],
      ["POST", "/repos/acme/issues"],
      ["GET", "/repos/caf%C3%A9/issues?state=open&x=%2F"],
    ] as const) {
      const before = upstream.received.length;
      const res = await call(method, path);
      expect(res.status).toBe(200);
      expect(upstream.received.length).toBe(before + 1);
      expect(upstream.received.at(-1)!.url).toBe(path);
    }
    // Decoded and re-encoded canonically: what was matched is what is sent.
    await call("GET", "/repos/%61cme/issues");
    expect(upstream.received.at(-1)!.url).toBe("/repos/acme/issues");
  });

  test("a method or path outside the rules is 403 request_not_allowed, with what is allowed and a hint that widens the rules", async () => {
    const before = upstream.received.length;
    for (const [method, path] of [
      ["DELETE", "/repos/acme/issues/1"],
      ["POST", "/repos/acme/issues/1"],
      ["GET", "/repos/acme"],
      ["GET", "/repos/issues"],
      ["PUT", "/repos/acme/issues"],
    ] as const) {
      const body = await expectEnvelope(await call(method, path), 403, "request_not_allowed");
      expect(body.allowed).toEqual(RULES);
      expect(body.message).toContain("GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues");
      const hinted = body.proposal_hint.proposal.services[0];
      expect(hinted.auth).toEqual({ type: "bearer", token: "GH_TOKEN" });
      expect(hinted.rules.at(-1)).toEqual({ methods: [method], paths: [path] });
      expect(body.proposal_hint.endpoint).toEndWith("/v1/proposals");
    }
    expect(upstream.received.length).toBe(before);
  });

  test("a method-override header cannot turn an allowed POST into a refused method", async () => {
    const before = upstream.received.length;
    for (const header of ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"]) {
      const res = await broker.proxy(hp, "/repos/acme/issues", { method: "POST", headers: { [header]: "delete" } });
      outputs.push(await dumpResponse(res.clone()));
      const body = await expectEnvelope(res, 403, "request_not_allowed");
      expect(body.proposal_hint.proposal.services[0].rules.at(-1)).toEqual({ methods: ["DELETE"], paths: ["/repos/acme/issues"] });
    }
    expect(upstream.received.length).toBe(before);
    // Overriding to a method the rules allow on that path is fine.
    const res = await broker.proxy(hp, "/repos/acme/issues", { method: "POST", headers: { "X-HTTP-Method-Override": "GET" } });
    expect(res.status).toBe(200);
  });

  test("ambiguous paths are refused with 400 and never reach the upstream", async () => {
    const before = upstream.received.length;
    for (const path of [
      "/repos/acme%2Fother/issues",
      "/repos/acme%5Cother/issues",
      "/repos/acme/issues/%00",
      "/repos/acme;x=1/issues",
      "/repos/acme/issues/%C3",
      "/repos//issues",
      "/repos/acme/issues/%zz",
    ]) {
      const res = await call("GET", path);
      expect(res.status).toBe(400);
      expect((await res.json()).error).toBe("invalid_request");
    }
    expect(upstream.received.length).toBe(before);
  });

  // Bun's HTTP server resolves dot segments (plain or %2e-encoded) and turns backslashes into slashes
  // before the broker sees the URL (the tunnel parses raw bytes and refuses them with 400 instead).
  // On /proxy the broker therefore checks and forwards the one resolved path: the upstream can never
  // be asked for a different path than the one the rules allowed.
  test("on /proxy, dot segments and backslashes are resolved once and the resolved path is both checked and sent", async () => {
    const raw = async (path: string) => {
      const head = `GET /proxy/${hp}${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${broker.sessionToken}\r\nConnection: close\r\n\r\n`;
      const text = (await rawRequest(broker.apiUrl, new TextEncoder().encode(head))).toString();
      outputs.push(text);
      return text.split("\r\n")[0];
    };
    const before = upstream.received.length;
    for (const path of ["/repos/acme/issues/../../admin", "/repos/acme/issues/%2e%2e/%2E%2E/admin", "/repos/acme/issues/..\\..\\admin"]) {
      expect(await raw(path)).toBe("HTTP/1.1 403 Forbidden");
    }
    expect(upstream.received.length).toBe(before);
    expect(await raw("/repos/acme/wiki/../issues/./1")).toBe("HTTP/1.1 200 OK");
    expect(upstream.received.at(-1)!.url).toBe("/repos/acme/issues/1");
  });

  test("the audit record of a refusal names the service whose rules refused it", async () => {
    await call("DELETE", "/repos/acme/issues/99");
    let refused: any;
    for (let i = 0; i < 60 && !refused; i++) {
      await Bun.sleep(50); // records are written in batches, a few times a second
      refused = (await broker.auditLogs()).find((l: any) => l.method === "DELETE" && l.path === "/repos/acme/issues/99");
    }
    expect(refused).toMatchObject({ status: 403, error: "request_not_allowed", service: hp });
  });

  test("/discover lists the rules before the agent tries", async () => {
    const res = await broker.api("GET", "/discover", undefined, broker.sessionToken);
    const svc = res.body.services.find((s: any) => s.host === hp);
    expect(svc.rules).toEqual(RULES);
    expect(svc.allows).toBe("GET and HEAD on /repos/*/issues/**; POST on /repos/*/issues");
  });

  test("rules are validated when set, and removing them allows everything again", async () => {
    const bad = await broker.api(
      "PATCH",
      `/v1/vaults/${broker.vault}/services/${encodeURIComponent(hp)}`,
      { rules: [{ methods: ["GET"], paths: ["/a/../b"] }] },
      broker.userToken,
    );
    expect(bad.status).toBe(400);
    expect(bad.body.field).toBe("rules[0].paths[0]");
    const empty = await broker.api("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(hp)}`, { rules: [] }, broker.userToken);
    expect(empty.status).toBe(400);
    const cleared = await broker.api("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(hp)}`, { rules: null }, broker.userToken);
    expect(cleared.status).toBe(200);
    expect(cleared.body.rules).toBeUndefined();
    expect((await call("DELETE", "/repos/acme/issues/1")).status).toBe(200);
    // And back, for the tests of other files that may share nothing with this one.
    const restored = await broker.api("PATCH", `/v1/vaults/${broker.vault}/services/${encodeURIComponent(hp)}`, { rules: RULES }, broker.userToken);
    expect(restored.body.rules).toEqual(RULES);
    expect((await call("DELETE", "/repos/acme/issues/1")).status).toBe(403);
  });

  test("nothing the broker answered or logged holds the credential", async () => {
    await expectNoLeak(broker, SECRET, outputs);
  });
});
