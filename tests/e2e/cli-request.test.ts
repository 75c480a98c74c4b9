// `broker request list|show|approve|deny` and `broker service add --approve` as the compiled binary
// against a compiled server: a rule holds an agent's POST /v1/refunds (428), a person lists it, reads
// it in full, approves it (the agent's identical retry then reaches the upstream once, with the
// credential injected) or denies it (403 approval_denied); an agent token cannot decide; a decided
// one cannot be decided again; mistakes name what to do. `broker vault run -- curl` meets the same
// rule. The credential appears in no CLI output nor server log line.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { builtBinary, cleanEnv, expectOk, freePort, type RunResult, runBinary, type ServerProcess, startBinaryServer, tempDir } from "../helpers/binary.ts";
import { runInProcess } from "../helpers/cli-offline.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";
import { requireBinary } from "./tunnel-fixture.ts";

const SECRET = `sk-cli-request-${crypto.randomUUID()}`;
const bin = builtBinary();
let upstream: TestUpstream;
let server: ServerProcess;
/** 127.0.0.2:<port>: not 127.0.0.1, which `vault run`'s NO_PROXY would send around the proxy. */
let host = "";
let agentToken = "";
const outputs: string[] = [];
const ownerConfig = join(tempDir("broker-cli-"), "config");
const owner = () => cleanEnv({ BROKER_CONFIG_DIR: ownerConfig, BROKER_ADDR: server.url });

async function cli(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): Promise<RunResult> {
  const r = await runBinary(bin, args, { env: opts.env ?? owner(), stdin: opts.stdin });
  outputs.push(r.stdout, r.stderr);
  return r;
}

/** Help text and argument errors: the CLI's main() in process, no server to reach (kept like `cli`'s output). */
async function offline(args: string[]): Promise<RunResult> {
  const r = await runInProcess(args);
  outputs.push(r.stdout, r.stderr);
  return r;
}

/** The agent's POST through /proxy (its agent token, vault demo). */
async function refund(body: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/proxy/${host}/v1/refunds`, {
    method: "POST",
    headers: { authorization: `Bearer ${agentToken}`, "x-vault": "demo", "content-type": "application/json" },
    body,
  });
  const text = await res.text();
  outputs.push(text);
  return { status: res.status, body: JSON.parse(text) };
}

const reached = () => upstream.received.filter((r) => r.url === "/v1/refunds").length;

beforeAll(async () => {
  upstream = await startUpstream(
    (req, res, body) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ done: req.url, bytes: body.length }));
    },
    { host: "127.0.0.2", names: { dns: [], ips: ["127.0.0.2"] } },
  );
  host = `127.0.0.2:${upstream.port}`;
  const dir = tempDir("broker-cli-request-");
  const caFile = join(dir, "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  const port = freePort();
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(dir, "data"),
      BROKER_PORT: String(port),
      BROKER_PUBLIC_URL: `http://127.0.0.1:${port}`,
      BROKER_NETWORK_ALLOWLIST: "127.0.0.2",
      BROKER_UPSTREAM_CA_FILE: caFile,
      BROKER_RATELIMIT_PROFILE: "off",
    }),
    dir,
  );
  expectOk(await cli(["auth", "register", "--email", "owner@example.com", "--password-stdin"], { stdin: "request owner pw 1\n" }));
  expectOk(await cli(["vault", "create", "demo"]));
  expectOk(await cli(["vault", "use", "demo"]));
  expectOk(await cli(["credential", "set", "STRIPE_KEY"], { stdin: `${SECRET}\n` }));
  const inv = expectOk(await cli(["agent", "invite", "--name", "refunder", "--role", "proxy"]));
  const url = /curl -X POST (\S+)/.exec(inv.stdout)?.[1] as string;
  const redeemed = await fetch(url, { method: "POST" });
  expect(redeemed.status).toBe(201);
  agentToken = ((await redeemed.json()) as { token: string }).token;
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await upstream?.close();
});

describe("broker service add|update --approve", () => {
  test("adds rules whose requests a person approves one by one, in words", async () => {
    const add = expectOk(
      await cli(["service", "add", host, "--auth", "bearer", "--token", "STRIPE_KEY", "--allow", "GET /v1/**", "--approve", "POST /v1/refunds"]),
    );
    expect(add.stdout).toContain("Agents may use GET on /v1/**; POST on /v1/refunds (each request approved by a human).");
    const listed = JSON.parse(expectOk(await cli(["service", "list", "--json"])).stdout);
    expect(listed[0].rules).toEqual([
      { methods: ["GET"], paths: ["/v1/**"] },
      { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
    ]);
    expect(expectOk(await cli(["service", "list"])).stdout).toContain("POST on /v1/refunds (each request approved by a human)");
    // update replaces the rules with the ones given, approval rules included, in the order typed.
    const upd = expectOk(await cli(["service", "update", host, "--approve", "POST /v1/refunds", "--allow=GET POST /v1/**"]));
    expect(upd.stdout).toContain("agents may use POST on /v1/refunds (each request approved by a human); GET and POST on /v1/**.");
    const bad = await offline(["service", "update", host, "--approve", "/v1/refunds"]);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('error: --approve "/v1/refunds": no method given');
    expect(bad.stderr).toContain('--approve "POST /v1/refunds"');
    const help = expectOk(await offline(["service", "add", "--help"]));
    expect(help.stdout).toContain("--approve=<METHODS PATHS>");
    expect(help.stdout).toContain('--approve "POST /v1/refunds"');
  });
});

describe("broker request", () => {
  let held = "";

  test("the agent's request is held; list and show describe it for the person deciding", async () => {
    const before = reached();
    const res = await refund('{"charge":"ch_1","amount":500}');
    expect(res.status).toBe(428);
    expect(res.body.error).toBe("approval_required");
    held = res.body.approval_id;
    expect(reached()).toBe(before);

    const list = expectOk(await cli(["request", "list"]));
    expect(list.stdout).toMatch(/^ID\s+STATE\s+REQUEST\s+WHO\s+ASKED\s+EXPIRES\n/);
    expect(list.stdout).toMatch(
      new RegExp(`${held}\\s+pending\\s+POST https://${host.replace(/\./g, "\\.")}/v1/refunds\\s+refunder\\s+\\d+ s ago\\s+in 1[45] min`),
    );
    expect(list.stderr).toContain("1 awaiting a decision: `broker request show <id>`");
    expect(JSON.parse(expectOk(await cli(["request", "list", "--json"])).stdout).map((r: { id: string }) => r.id)).toEqual([held]);

    const show = expectOk(await cli(["request", "show", held]));
    expect(show.stdout).toContain(`Held request ${held} in vault demo: awaiting a decision`);
    expect(show.stdout).toContain(`  POST https://${host}/v1/refunds\n`);
    expect(show.stdout).toContain(`Service:      ${host} (the broker adds its credential; it is not shown)`);
    expect(show.stdout).toContain("Requested by: the agent refunder");
    expect(show.stdout).toContain("  content-type: application/json");
    expect(show.stdout).not.toMatch(/authorization/i);
    // The JSON body pretty-printed, so the amount is easy to read.
    expect(show.stdout).toContain('{\n    "charge": "ch_1",\n    "amount": 500\n  }');
    expect(show.stdout).toContain(`Approval page: ${server.url}/approve/requests/${held}`);
    expect(show.stdout).toContain(`Approve with: broker request approve ${held}   Deny with: broker request deny ${held}`);
    expect(JSON.parse(expectOk(await cli(["request", "show", held, "--json"])).stdout)).toMatchObject({
      id: held,
      state: "pending",
      method: "POST",
      body: '{"charge":"ch_1","amount":500}',
    });
  });

  test("an agent token cannot decide: it is told only a person can", async () => {
    const r = await cli(["request", "approve", held], {
      env: cleanEnv({ BROKER_ADDR: server.url, BROKER_SESSION_TOKEN: agentToken, BROKER_VAULT: "demo", BROKER_CONFIG_DIR: join(tempDir(), "config") }),
    });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("(403 forbidden)");
    expect(r.stderr).toContain("hint: only a person decides held requests, with their own login (`broker auth login`)");
    const listed = await cli(["request", "list"], {
      env: cleanEnv({ BROKER_ADDR: server.url, BROKER_SESSION_TOKEN: agentToken, BROKER_VAULT: "demo", BROKER_CONFIG_DIR: join(tempDir(), "config") }),
    });
    expect(listed.exitCode).toBe(1);
    expect(listed.stderr).toContain("poll_url");
  });

  test("approved: the identical retry reaches the upstream once with the credential; deciding again is refused", async () => {
    const ok = expectOk(await cli(["request", "approve", held]));
    expect(ok.stdout).toMatch(
      new RegExp(
        `^Approved: the agent's next identical request \\(POST https://${host.replace(/\./g, "\\.")}/v1/refunds\\) will be sent once, until \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d UTC\\.\\n$`,
      ),
    );
    const again = await cli(["request", "deny", held]);
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toContain("(409 conflict)");
    expect(again.stderr).toContain(`hint: nothing changed; \`broker request show ${held}\` shows how it was decided`);

    const before = reached();
    const res = await refund('{"charge":"ch_1","amount":500}');
    expect(res).toEqual({ status: 200, body: { done: "/v1/refunds", bytes: 30 } });
    expect(reached()).toBe(before + 1);
    expect(upstream.received.at(-1)!.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
    const show = expectOk(await cli(["request", "show", held]));
    expect(show.stdout).toContain("approved and sent");
    expect(show.stdout).toContain("Decided:      ");
    expect(show.stdout).toContain("by owner@example.com");
    expect(show.stdout).toContain("Sent:         ");
    // The same request once more is a new one to approve.
    expect((await refund('{"charge":"ch_1","amount":500}')).status).toBe(428);
    // The log names who approved the one that went (audit records are written behind the request).
    const approvedLines = async () =>
      expectOk(await cli(["logs"]))
        .stdout.split("\n")
        .filter((l) => /POST \S+\/v1\/refunds\s+200\b/.test(l));
    for (let i = 0; i < 50 && (await approvedLines()).length === 0; i++) await Bun.sleep(100);
    expect(expectOk(await cli(["logs"])).stdout.split("\n")[0]).toMatch(/\bAPPROVED BY\b/);
    expect((await approvedLines()).map((l) => l.includes("owner@example.com"))).toEqual([true]);
  });

  test("denied: not sent, the retry gets 403 approval_denied", async () => {
    const res = await refund('{"charge":"ch_2","amount":9000}');
    const id = res.body.approval_id as string;
    const denied = expectOk(await cli(["request", "deny", id]));
    expect(denied.stdout).toContain(`Denied: POST https://${host}/v1/refunds was not sent; the agent's identical retry gets 403 approval_denied until `);
    const before = reached();
    const retry = await refund('{"charge":"ch_2","amount":9000}');
    expect({ status: retry.status, error: retry.body.error, id: retry.body.approval_id }).toEqual({ status: 403, error: "approval_denied", id });
    expect(reached()).toBe(before);
    expect(expectOk(await cli(["request", "show", id])).stdout).toContain(`Held request ${id} in vault demo: denied (not sent)`);
    const denials = JSON.parse(expectOk(await cli(["request", "list", "--state", "denied", "--json"])).stdout);
    expect(denials.map((r: { id: string }) => r.id)).toEqual([id]);
    expect(expectOk(await cli(["request", "list", "--state", "expired"])).stdout).toBe("No expired held requests in vault demo.\n");
  });

  test("agent-written text cannot drive the terminal; a long body is marked truncated", async () => {
    // C0 controls make the broker call the body binary (not shown); C1 controls (8-bit CSI) and bidi overrides are text.
    const binary = await refund('{"note":"\u001b[2J\u001b]0;pwned\u0007"}');
    expect(expectOk(await cli(["request", "show", binary.body.approval_id])).stdout).toContain(
      "(not text: not shown; the SHA-256 above is what the approval binds)",
    );
    const res = await refund('{"note":"\u009b2J\u202eamount: 5\u007f"} trailing');
    const id = res.body.approval_id as string;
    const show = expectOk(await cli(["request", "show", id]));
    expect(show.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
    // The broker writes such characters out before the CLI sees them.
    expect(show.stdout).toContain('  {"note":"<U+009B>2J<U+202E>amount: 5<U+007F>"} trailing\n');
    expectOk(await cli(["request", "deny", id]));

    // JSON is laid out as sent: both of a repeated key (named in a warning), numbers and escapes unchanged.
    const dup = await refund('{"amount":100000,"amount":1,"big":100000000000000000001,"note":"\\u202e"}');
    const dupShown = expectOk(await cli(["request", "show", dup.body.approval_id])).stdout;
    expect(dupShown).toContain("(warning: the body names amount more than once; services differ in which value they use)");
    expect(dupShown).toContain('    "amount": 100000,\n    "amount": 1,\n    "big": 100000000000000000001,\n    "note": "\\u202e"\n');
    expectOk(await cli(["request", "deny", dup.body.approval_id]));

    // Past the preview (64 KiB) the body cannot be parsed as JSON: shown as sent, marked truncated.
    const big = JSON.stringify({ charge: "ch_big", pad: "x".repeat(100_000) });
    const long = await refund(big);
    const shown = expectOk(await cli(["request", "show", long.body.approval_id]));
    const tail = shown.stdout.slice(shown.stdout.indexOf("xxx\n"));
    expect(shown.stdout).toContain(`Body (${big.length} bytes, SHA-256 `);
    expect(shown.stdout).toContain('\n  {"charge":"ch_big","pad":"xxx');
    expect(tail).toStartWith(`xxx\n  … (truncated: only the first 65536 of ${big.length} bytes are shown; the approval binds the whole body by its SHA-256)\n`);
  });

  test("mistakes say what went wrong and what to do", async () => {
    const bad = await offline(["request", "show", "12"]);
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toBe(
      'error: "12" is not a held request\'s id\nhint: ids look like apr_ followed by 16 letters, digits, - or _; `broker request list` shows them\n',
    );
    const unknown = await cli(["request", "approve", "apr_AAAAAAAAAAAAAAAA"]);
    expect(unknown.exitCode).toBe(1);
    expect(unknown.stderr).toContain("(404 not_found)");
    expect(unknown.stderr).toContain("hint: there is no held request apr_AAAAAAAAAAAAAAAA in vault demo: `broker request list --vault demo` shows them");
    const state = await offline(["request", "list", "--state", "waiting"]);
    expect(state.exitCode).toBe(2);
    expect(state.stderr).toContain("use one of pending, approved, denied, used, expired");
    const noVault = await cli(["request", "list", "--vault", "nope"]);
    expect(noVault.exitCode).toBe(1);
    expect(noVault.stderr).toContain("vault");
    for (const sub of ["list", "show", "approve", "deny"]) {
      const r = await offline(["request", sub, "--help"]);
      expect(r.exitCode).toBe(0);
      expect(r.stdout).toContain(`USAGE broker request ${sub}`);
      expect(r.stdout).toContain("broker request approve apr_");
    }
    expect(expectOk(await offline(["--help"])).stdout).toMatch(/request\s+Review, approve and deny single requests/);
  });

  test("`broker vault run -- curl` meets the rule: held, approved with the CLI, then sent once", async () => {
    if (!requireBinary("curl", "curl")) return;
    const curl = [
      "vault",
      "run",
      "--",
      "curl",
      "-sS",
      "-X",
      "POST",
      "-H",
      "content-type: application/json",
      "-d",
      '{"charge":"ch_run"}',
      `https://${host}/v1/refunds`,
    ];
    const first = await cli(curl);
    expect(first.exitCode).toBe(0);
    const envelope = JSON.parse(first.stdout);
    expect(envelope).toMatchObject({ error: "approval_required", approval_url: `${server.url}/approve/requests/${envelope.approval_id}` });
    // A `vault run` session acts for the person who started it (its approval is theirs to spend), and
    // the person deciding is told the request came from that session, not from them.
    expect(expectOk(await cli(["request", "show", envelope.approval_id])).stdout).toContain("Requested by: a `broker vault run` session of owner@example.com");
    expectOk(await cli(["request", "approve", envelope.approval_id]));
    const before = reached();
    const second = await cli(curl);
    expect(second.exitCode).toBe(0);
    expect(JSON.parse(second.stdout)).toEqual({ done: "/v1/refunds", bytes: 19 });
    expect(reached()).toBe(before + 1);
    expect(upstream.received.at(-1)!.rawHeaders).toContainEqual(["authorization", `Bearer ${SECRET}`]);
  });

  test("the credential is in no CLI output nor server log line", () => {
    for (const o of [...outputs, server.logs()]) {
      expect(o).not.toContain(SECRET);
      expect(o).not.toContain(Buffer.from(SECRET).toString("base64"));
    }
  });
});
