// An export with LLM usage (issue 38, docs/audit-chain.md "Export"): metered records carry llm_model, input_tokens,
// output_tokens, total_tokens and cost_micros (unmetered ones nulls) in the API's pages, the JSON lines and the OCSF
// events, and `broker audit verify --from-export` (the CLI itself, offline) recomputes their v2 hashes from the file;
// the same file with a metered record's tokens nulled or its cost changed fails as edited.

import { afterAll, beforeEach, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { startAuditCheckpointer } from "../../../src/app/audit-checkpointer.ts";
import { ocsfApiActivity } from "../../../src/cli/commands/audit-ocsf.ts";
import { chainLine, checkpointLine, recordLine } from "../../../src/cli/commands/audit-sources.ts";
import { loadAuditSigningKey, type ExportedAuditRecord } from "../../../src/crypto/index.ts";
import { auditEntry, createAuditLog } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createHarness, createVault, register, type Harness } from "./fixtures.ts";

const ROOT = resolve(import.meta.dir, "..", "..", "..");
const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

let h: Harness;
let owner: string;

beforeEach(async () => {
  h = await createHarness();
  owner = (await register(h, "owner@example.com")).token;
  await createVault(h, owner, "main");
});

/** Five records of vault main, seq 2 and 4 metered (4 unpriced), chained by the writer and signed by a checkpoint. */
async function writeSigned(): Promise<void> {
  const vault = (await h.store.vaults.byName("main"))!;
  const request = {
    principal: "user:1",
    contained: false,
    vault: { id: vault.id, name: "main" },
    ingress: "explicit",
    method: "POST",
    host: "api.openai.com",
    port: 443,
    target: "/v1/chat/completions",
  };
  const audit = createAuditLog(h.store, { now: h.clock.now, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  for (let seq = 1; seq <= 5; seq++) {
    const usage =
      seq === 2
        ? { llmModel: "gpt-4o", inputTokens: 1200, outputTokens: 345, totalTokens: 1545, costMicros: 9_875 }
        : seq === 4
          ? { llmModel: null, inputTokens: 10, outputTokens: 1, totalTokens: 11, costMicros: null }
          : {};
    const at = h.clock.now() + seq;
    const outcome = { status: 200, bytesIn: seq, bytesOut: 10, error: null, service: "api.openai.com", credentialKeys: ["OPENAI"] };
    audit.record({ ...auditEntry(request, at, at + 5, outcome), ...usage }); // as egress/exchange.ts sets a metered call's usage
  }
  await audit.flush();
  const { signer } = await loadAuditSigningKey(h.store, h.domain.dataKey, h.clock.now());
  const cp = startAuditCheckpointer(h.store, { signer, everyRecords: 1, everyMs: 1, pollMs: 3_600_000, now: h.clock.now, log: createMemoryLogger() });
  expect(await cp.tick()).toBeDefined();
  await cp.stop();
}

/** The export as `broker audit export --format jsonl` writes it (its line writers, over the API's pages), and the key. */
async function exportFiles(edit?: (r: ExportedAuditRecord) => ExportedAuditRecord): Promise<{ file: string; key: string; records: ExportedAuditRecord[] }> {
  const page = await h.call("GET", "/v1/vaults/main/audit/export?limit=5000", { token: owner });
  expect(page.status).toBe(200);
  const checkpoints = await h.call("GET", "/v1/vaults/main/audit/checkpoints?after_id=0&limit=1000", { token: owner });
  expect(checkpoints.body.checkpoints.length).toBeGreaterThan(0);
  const records: ExportedAuditRecord[] = page.body.records;
  const lines = [
    JSON.stringify(chainLine(page.body)),
    ...records.map((r) => recordLine(edit ? edit(r) : r)),
    ...checkpoints.body.checkpoints.map(checkpointLine),
  ];
  const dir = mkdtempSync(join(tmpdir(), "broker-usage-export-"));
  dirs.push(dir);
  const file = join(dir, "main.jsonl");
  writeFileSync(file, `${lines.join("\n")}\n`);
  const key = join(dir, "key.pem");
  writeFileSync(key, (await h.call("GET", "/v1/audit/public-key")).body.public_key_pem);
  return { file, key, records };
}

/** `broker audit verify --from-export FILE --public-key KEY --json`, run from source with a private HOME. */
async function verifyOffline(file: string, key: string): Promise<{ code: number; out: Record<string, unknown> | undefined; stderr: string }> {
  const home = mkdtempSync(join(tmpdir(), "broker-usage-home-"));
  dirs.push(home);
  const proc = Bun.spawn([process.execPath, join(ROOT, "src", "index.ts"), "audit", "verify", "--from-export", file, "--public-key", key, "--json"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: home, BROKER_CONFIG_DIR: join(home, "config") },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: stdout ? JSON.parse(stdout) : undefined, stderr };
}

test("metered records are exported with their usage, and verify offline from the JSON lines", async () => {
  await writeSigned();
  const { file, key, records } = await exportFiles();
  const usage = (r: ExportedAuditRecord) => [r.seq, r.llm_model, r.input_tokens, r.output_tokens, r.total_tokens, r.cost_micros];
  expect(records.map(usage)).toEqual([
    [1, null, null, null, null, null],
    [2, "gpt-4o", 1200, 345, 1545, 9_875],
    [3, null, null, null, null, null],
    [4, null, 10, 1, 11, null],
    [5, null, null, null, null, null],
  ]);
  expect(JSON.parse(recordLine(records[1]!))).toMatchObject({
    llm_model: "gpt-4o",
    input_tokens: 1200,
    output_tokens: 345,
    total_tokens: 1545,
    cost_micros: 9_875,
  });
  const ocsf = ocsfApiActivity(records[1]!, 1, {}) as { unmapped: Record<string, unknown> };
  expect(ocsf.unmapped).toMatchObject({ llm_model: "gpt-4o", input_tokens: 1200, output_tokens: 345, total_tokens: 1545, cost_micros: 9_875 });
  const r = await verifyOffline(file, key);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: "" });
  expect(r.out).toMatchObject({ ok: true, records: 5, verified: { seq: 5 }, breaks: [] });
  expect(r.out!.checkpoints).toBeGreaterThan(0);
}, 60_000);

test.skipIf(!Bun.which("python3"))("docs/audit-chain.md's Python recomputes every hash of the export file, v1 and v2", async () => {
  await writeSigned();
  const { file } = await exportFiles();
  const doc = readFileSync(join(ROOT, "docs", "audit-chain.md"), "utf8");
  const snippet = /```python\n([\s\S]*?)```/.exec(doc)![1]!;
  const script = `${snippet}
import sys
lines = [json.loads(l) for l in open(sys.argv[1])]
vault_id = lines[0]["vault_id"]
print(all(record_hash(vault_id, r) == r["hash"] for r in lines if r["type"] == "record"), sum(r["type"] == "record" for r in lines))`;
  const run = Bun.spawnSync(["python3", "-c", script, file]);
  expect({ out: run.stdout.toString().trim(), err: run.stderr.toString() }).toEqual({ out: "True 5", err: "" });
});

test("the export file with a metered record's tokens nulled, or its cost changed, fails offline as edited", async () => {
  await writeSigned();
  const edits: [number, Partial<ExportedAuditRecord>][] = [
    [2, { llm_model: null, input_tokens: null, output_tokens: null, total_tokens: null, cost_micros: null }],
    [2, { cost_micros: 1 }],
    [4, { cost_micros: 0 }],
  ];
  for (const [seq, change] of edits) {
    const { file, key } = await exportFiles((r) => (r.seq === seq ? { ...r, ...change } : r));
    const r = await verifyOffline(file, key);
    const breaks = (r.out?.breaks as { kind: string; seq: number }[] | undefined)?.map((b) => [b.kind, b.seq]);
    expect({ change, code: r.code, breaks }).toEqual({ change, code: 1, breaks: [["edited", seq]] });
  }
}, 60_000);
