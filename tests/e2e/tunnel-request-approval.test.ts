// Human approval of single requests through the transparent proxy (HTTPS_PROXY, CONNECT + TLS with
// the broker CA), with curl as the agent over HTTP/1.1 and HTTP/2 (and Python requests): a POST an "approve": "each" rule
// matches is answered 428 with the envelope inside the tunnel and never reaches the upstream; once
// the owner approves it through the API, curl's identical retry reaches the upstream exactly once
// with the credential injected; a changed body is held again; `Prefer: wait` forwards as soon as a
// human approves; a denied one gets 403 approval_denied. The credential shows nowhere.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { expectNoLeak } from "./proxy-fixture.ts";
import { requireBinary, startTunnelEnv, type TunnelEnv } from "./tunnel-fixture.ts";

const RULES = [
  { methods: ["GET", "POST"], paths: ["/v1/**"] }, // broad and first: must not let a refund past the human
  { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
];
const PROTOCOLS = ["--http1.1", "--http2"] as const;

let env: TunnelEnv;
/** Everything an agent read, for the leak check at the end. */
const seen: string[] = [];

beforeAll(async () => {
  env = await startTunnelEnv({
    handler: (req, res, body) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ done: req.url, bytes: body.length }));
    },
  });
  const set = await env.broker.api(
    "PATCH",
    `/v1/vaults/${env.broker.vault}/services/${encodeURIComponent(env.authority)}`,
    { rules: RULES },
    env.broker.userToken,
  );
  if (set.status !== 200) throw new Error(`PATCH rules: ${set.status} ${JSON.stringify(set.body)}`);
});
afterAll(async () => {
  await env?.stop();
});

interface CurlAnswer {
  code: number;
  stderr: string;
  status: number;
  head: string;
  body: string;
}

/** curl through HTTPS_PROXY (the scoped session in the proxy URL), POSTing `body` as JSON; the inner answer parsed. */
async function curlPost(protocol: (typeof PROTOCOLS)[number], body: string, extra: string[] = [], path = "/v1/refunds?expand=charge"): Promise<CurlAnswer> {
  // Spawned, never spawnSync: the broker runs in this process and must keep answering.
  const args = [
    "curl",
    "-sS",
    "-i",
    protocol,
    ...extra,
    "--proxy",
    env.proxyUrl,
    "--cacert",
    env.caFile,
    "-X",
    "POST",
    "-H",
    "content-type: application/json",
    "--data-binary",
    body,
    `https://${env.authority}${path}`,
  ];
  const proc = Bun.spawn(args, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: env.dir }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  seen.push(stdout, stderr);
  // After "HTTP/1.1 200 Connection Established" and its blank line comes the origin's (here the broker's) answer.
  const inner = stdout.slice(stdout.indexOf("\r\n\r\n") + 4);
  const split = inner.indexOf("\r\n\r\n");
  const head = inner.slice(0, split);
  const version = protocol === "--http1.1" ? "1\\.1" : "2";
  return { code, stderr, status: Number(new RegExp(`^HTTP/${version} (\\d{3})`).exec(head)?.[1]), head, body: inner.slice(split + 4) };
}

function expectEnvelope(res: CurlAnswer, status: number, code: string): any {
  expect({ curl: res.code, stderr: res.stderr, status: res.status }).toEqual({ curl: 0, stderr: "", status });
  expect(res.head.toLowerCase()).toContain(`x-broker-error: ${code}`);
  const body = JSON.parse(res.body);
  expect(body.error).toBe(code);
  expect(typeof body.message).toBe("string");
  return body;
}

const reached = () => env.upstream.received.filter((r) => r.url === "/v1/refunds?expand=charge").length;
const approvals = () => `/v1/vaults/${env.broker.vault}/request-approvals`;
const decide = (id: string, decision: "approve" | "deny") => env.broker.api("POST", `${approvals()}/${id}/${decision}`, undefined, env.broker.userToken);

/** The id of the pending approval whose body is `body`, once the broker has filed it. */
async function pendingFor(body: string): Promise<string | undefined> {
  for (let i = 0; i < 100; i++) {
    const list = await env.broker.api("GET", approvals(), undefined, env.broker.userToken);
    const id = list.body.request_approvals.find((a: { state: string; body: string }) => a.state === "pending" && a.body === body)?.id;
    if (id) return id;
    await Bun.sleep(100);
  }
  return undefined;
}

describe.each(PROTOCOLS)("curl through HTTPS_PROXY (%s)", (protocol) => {
  test("held with 428 inside the tunnel; approved, the identical retry reaches the upstream once with the credential; again or changed is held again", async () => {
    if (!requireBinary("curl", "curl")) return;
    const body = JSON.stringify({ charge: `ch_${protocol}`, amount: 500 });
    const before = reached();
    const held = expectEnvelope(await curlPost(protocol, body), 428, "approval_required");
    expect(held.approval_id).toMatch(/^apr_[A-Za-z0-9_-]{16}$/);
    expect(held.approval_url).toBe(`${env.broker.apiUrl}/approve/requests/${held.approval_id}`);
    expect(held.poll_url).toBe(`${env.broker.apiUrl}${approvals()}/${held.approval_id}`);
    expect(reached()).toBe(before);
    // The person sees the request as curl sent it through the tunnel.
    const view = (await env.broker.api("GET", `${approvals()}/${held.approval_id}`, undefined, env.broker.userToken)).body;
    expect(view).toMatchObject({ state: "pending", method: "POST", url: `https://${env.authority}/v1/refunds?expand=charge`, body, service: env.authority });

    expect((await decide(held.approval_id, "approve")).status).toBe(200);
    const sent = await curlPost(protocol, body);
    expect({ code: sent.code, stderr: sent.stderr, status: sent.status }).toEqual({ code: 0, stderr: "", status: 200 });
    expect(JSON.parse(sent.body)).toEqual({ done: "/v1/refunds?expand=charge", bytes: Buffer.byteLength(body) });
    expect(reached()).toBe(before + 1);
    const got = env.upstream.received.at(-1)!;
    expect(got.method).toBe("POST");
    expect(got.body.toString()).toBe(body);
    expect(got.rawHeaders.filter(([k]) => /^(proxy-)?authorization$/i.test(k))).toEqual([["authorization", `Bearer ${env.secret}`]]);
    expect((await env.broker.api("GET", `${approvals()}/${held.approval_id}`, undefined, env.broker.userToken)).body.state).toBe("used");

    // Spent: the same request once more asks a human again, and so does a changed body.
    const again = expectEnvelope(await curlPost(protocol, body), 428, "approval_required");
    expect(again.approval_id).not.toBe(held.approval_id);
    const changed = expectEnvelope(await curlPost(protocol, JSON.stringify({ charge: `ch_${protocol}`, amount: 50_000 })), 428, "approval_required");
    expect(changed.approval_id).not.toBe(again.approval_id);
    expect(reached()).toBe(before + 1);
    // Requests the broad rule allows are not held.
    expect((await curlPost(protocol, "{}", [], "/v1/charges")).status).toBe(200);
  });

  test("Prefer: wait=30 is forwarded as soon as a human approves while curl waits", async () => {
    if (!requireBinary("curl", "curl")) return;
    const body = JSON.stringify({ charge: `ch_wait_${protocol}` });
    const before = reached();
    const waiting = curlPost(protocol, body, ["-H", "Prefer: wait=30"]);
    const id = await pendingFor(body);
    expect(id).toBeDefined();
    expect(reached()).toBe(before);
    expect((await decide(id!, "approve")).status).toBe(200);
    const res = await waiting;
    expect({ code: res.code, stderr: res.stderr, status: res.status }).toEqual({ code: 0, stderr: "", status: 200 });
    expect(reached()).toBe(before + 1);
    expect(env.upstream.received.at(-1)!.rawHeaders).toContainEqual(["authorization", `Bearer ${env.secret}`]);
  });

  test("denied: the retry gets 403 approval_denied inside the tunnel, and the upstream never sees it", async () => {
    if (!requireBinary("curl", "curl")) return;
    const body = JSON.stringify({ charge: `ch_deny_${protocol}` });
    const held = expectEnvelope(await curlPost(protocol, body), 428, "approval_required");
    expect((await decide(held.approval_id, "deny")).body.state).toBe("denied");
    const before = reached();
    const denied = expectEnvelope(await curlPost(protocol, body), 403, "approval_denied");
    expect(denied.approval_id).toBe(held.approval_id);
    expect(reached()).toBe(before);
  });
});

test("Python requests through HTTPS_PROXY: held with 428 and the envelope, then sent once after approval", async () => {
  if (!requireBinary("python3", "python3-requests")) return;
  // The agent's script: one POST, its status and body printed (requests raises nothing on a 428).
  const script = "import requests,sys\nr=requests.post(sys.argv[1],json={'charge':'ch_python','amount':4200})\nprint(r.status_code)\nprint(r.text)";
  const post = async () => {
    const proc = Bun.spawn(["python3", "-c", script, `https://${env.authority}/v1/refunds?expand=charge`], {
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: env.dir, HTTPS_PROXY: env.proxyUrl, REQUESTS_CA_BUNDLE: env.caFile },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    seen.push(stdout, stderr);
    if (code !== 0 && /No module named/.test(stderr) && process.env.CI !== "true") return undefined;
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    const [status, ...rest] = stdout.trimEnd().split("\n");
    return { status: Number(status), body: JSON.parse(rest.join("\n")) };
  };
  const held = await post();
  if (!held) return; // python3 without requests, outside CI
  expect(held.status).toBe(428);
  expect(held.body).toMatchObject({ error: "approval_required", approval_url: expect.stringContaining("/approve/requests/") });
  const view = await env.broker.api("GET", `${approvals()}/${held.body.approval_id}`, undefined, env.broker.userToken);
  expect(view.body.body).toBe('{"charge": "ch_python", "amount": 4200}'); // as requests serialised it
  expect(view.body.headers.find(([n]: [string, string]) => n === "user-agent")?.[1]).toMatch(/^python-requests\//);
  expect((await decide(held.body.approval_id, "approve")).status).toBe(200);
  const before = reached();
  const sent = await post();
  expect(sent).toEqual({ status: 200, body: { done: "/v1/refunds?expand=charge", bytes: 39 } });
  expect(reached()).toBe(before + 1);
  expect((await post())!.status).toBe(428); // a second use is a new request to approve
  expect(reached()).toBe(before + 1);
});

test("the audit log records the held, forwarded and denied requests through the tunnel", async () => {
  if (!requireBinary("curl", "curl")) return;
  let logs: any[] = [];
  for (let i = 0; i < 40; i++) {
    await Bun.sleep(100); // records are written in batches, a few times a second
    logs = (await env.broker.auditLogs()).filter((l: { path: string }) => l.path === "/v1/refunds");
    if (logs.some((l) => l.status === 403)) break;
  }
  expect(logs.every((l) => l.ingress === "transparent")).toBe(true);
  expect(logs.filter((l) => l.status === 200).every((l) => l.approved_by === "user:1")).toBe(true);
  expect(logs.some((l) => l.status === 428 && l.error === "approval_required")).toBe(true);
  expect(logs.some((l) => l.status === 403 && l.error === "approval_denied")).toBe(true);
});

test("nothing curl read, nor any log or audit record, holds the credential", async () => {
  await expectNoLeak(env.broker, env.secret, seen);
});
