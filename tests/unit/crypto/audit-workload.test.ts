// The chain's third encoding (issue 39, docs/audit-chain.md "With a workload"): a record made on a session a workload's
// platform token was exchanged for is broker-audit-v3 (v2's elements, usage null when unmetered, then the token's issuer
// and subject); every other record keeps v1 or v2 and its hash. The doc's Python computes the same hash, and the
// verifier names a record whose workload was changed, removed or added as edited.

import { describe, expect, test } from "bun:test";
import {
  AUDIT_CHAIN_GENESIS,
  auditRecordHash,
  canonicalAuditRecord,
  verifyAuditChain,
  type ChainedRecord,
  type ExportedAuditRecord,
} from "../../../src/crypto/index.ts";

const PLAIN: ChainedRecord = {
  vaultId: 7,
  seq: 3,
  prev: "ab".repeat(32),
  at: 1764355200000,
  principal: "agent:3",
  vault: "prod",
  ingress: "explicit",
  method: "POST",
  host: "api.github.com",
  path: "/repos/o/r/issues",
  service: "api.github.com",
  credentialKeys: "GITHUB_TOKEN",
  credentialRefs: null,
  status: 201,
  bytesIn: 120,
  bytesOut: 900,
  durationMs: 42,
  error: null,
  contained: false,
  approvedBy: null,
};
const WORKLOAD = { workloadIssuer: "https://token.actions.githubusercontent.com", workloadSubject: "repo:o/r:ref:refs/heads/main" };
const USAGE = { llmModel: "gpt-4o-mini", inputTokens: 1200, outputTokens: 345, totalTokens: 1545, costMicros: 387 };

describe("the workload encoding", () => {
  test("records without a workload keep v1 and v2 (explicit nulls alike)", () => {
    expect(canonicalAuditRecord({ ...PLAIN, workloadIssuer: null, workloadSubject: null })).toBe(canonicalAuditRecord(PLAIN));
    expect(JSON.parse(canonicalAuditRecord(PLAIN))[0]).toBe("broker-audit-v1");
    expect(JSON.parse(canonicalAuditRecord({ ...PLAIN, ...USAGE, workloadIssuer: null, workloadSubject: null }))[0]).toBe("broker-audit-v2");
  });

  test("a workload's record is v3: v2's 25 fields (usage null when unmetered), then issuer and subject", () => {
    const v1 = JSON.parse(canonicalAuditRecord(PLAIN)) as unknown[];
    expect(JSON.parse(canonicalAuditRecord({ ...PLAIN, ...WORKLOAD }))).toEqual([
      "broker-audit-v3",
      ...v1.slice(1),
      null,
      null,
      null,
      null,
      null,
      WORKLOAD.workloadIssuer,
      WORKLOAD.workloadSubject,
    ]);
    const metered = JSON.parse(canonicalAuditRecord({ ...PLAIN, ...USAGE, ...WORKLOAD })) as unknown[];
    expect(metered).toHaveLength(28);
    expect(metered.slice(21)).toEqual(["gpt-4o-mini", 1200, 345, 1545, 387, WORKLOAD.workloadIssuer, WORKLOAD.workloadSubject]);
  });

  test("either workload field alone selects v3 (an issuer from before migration 31 is null)", () => {
    for (const one of [{ workloadSubject: "s" }, { workloadIssuer: "https://i" }]) {
      const encoded = JSON.parse(canonicalAuditRecord({ ...PLAIN, ...one })) as unknown[];
      expect({ one, name: encoded[0], length: encoded.length }).toEqual({ one, name: "broker-audit-v3", length: 28 });
    }
  });

  test.skipIf(!Bun.which("python3"))("the doc's Python computes the same hash for v1, v2 and v3 records", async () => {
    const doc = await Bun.file(`${import.meta.dir}/../../../docs/audit-chain.md`).text();
    const python = /```python\n([\s\S]*?def record_hash[\s\S]*?)```/.exec(doc)?.[1];
    expect(python).toBeDefined();
    const exported = (r: ChainedRecord) => ({
      seq: r.seq,
      prev: r.prev,
      at: r.at,
      principal: r.principal,
      vault: r.vault,
      ingress: r.ingress,
      method: r.method,
      host: r.host,
      path: r.path,
      service: r.service,
      credential_keys: r.credentialKeys,
      credential_refs: r.credentialRefs,
      status: r.status,
      bytes_in: r.bytesIn,
      bytes_out: r.bytesOut,
      duration_ms: r.durationMs,
      error: r.error,
      contained: r.contained,
      approved_by: r.approvedBy,
      llm_model: r.llmModel ?? null,
      input_tokens: r.inputTokens ?? null,
      output_tokens: r.outputTokens ?? null,
      total_tokens: r.totalTokens ?? null,
      cost_micros: r.costMicros ?? null,
      workload_issuer: r.workloadIssuer ?? null,
      workload_subject: r.workloadSubject ?? null,
    });
    const odd = { ...WORKLOAD, workloadSubject: 'system:serviceaccount:ns:é"\\\n\u0001' };
    for (const r of [PLAIN, { ...PLAIN, ...USAGE }, { ...PLAIN, ...odd }, { ...PLAIN, ...USAGE, ...WORKLOAD }]) {
      const script = `${python}\nimport sys\nprint(record_hash(7, json.loads(sys.argv[1])), end="")`;
      const run = Bun.spawnSync(["python3", "-c", script, JSON.stringify(exported(r))]);
      expect(run.stderr.toString()).toBe("");
      expect(run.stdout.toString()).toBe(auditRecordHash(r));
    }
  });
});

const VAULT = 7;

/** Four records, seq 2 and 4 a workload's; hashed with the broker's encoder over the export's fields. */
function chain(): ExportedAuditRecord[] {
  const out: ExportedAuditRecord[] = [];
  let prev = AUDIT_CHAIN_GENESIS;
  for (let seq = 1; seq <= 4; seq++) {
    const workload = seq % 2 === 0;
    const base = {
      id: 100 + seq,
      seq,
      prev,
      at: Date.UTC(2026, 0, 1) + seq,
      principal: "agent:1",
      vault: "main",
      ingress: "explicit",
      method: "GET",
      host: "api.github.com",
      path: "/user",
      service: "api.github.com",
      credential_keys: "GITHUB_TOKEN",
      credential_refs: null,
      status: 200,
      bytes_in: seq,
      bytes_out: 10 * seq,
      duration_ms: seq,
      error: null,
      contained: false,
      approved_by: null,
      workload_issuer: workload ? "https://token.actions.githubusercontent.com" : null,
      workload_subject: workload ? `repo:o/r:run:${seq}` : null,
    };
    const hash = auditRecordHash({
      ...base,
      vaultId: VAULT,
      credentialKeys: base.credential_keys,
      credentialRefs: null,
      bytesIn: base.bytes_in,
      bytesOut: base.bytes_out,
      durationMs: base.duration_ms,
      approvedBy: null,
      workloadIssuer: base.workload_issuer,
      workloadSubject: base.workload_subject,
    });
    out.push({ ...base, hash });
    prev = hash;
  }
  return out;
}

const verify = (records: ExportedAuditRecord[]) => verifyAuditChain({ vaultId: VAULT, anchor: { seq: 0, hash: AUDIT_CHAIN_GENESIS }, records });
const edit = (records: ExportedAuditRecord[], seq: number, change: Partial<ExportedAuditRecord>) =>
  records.map((r) => (r.seq === seq ? { ...r, ...change } : r));

describe("the verifier", () => {
  test("a chain with workloads' records verifies", async () => {
    expect(await verify(chain())).toMatchObject({ ok: true, records: 4, breaks: [] });
  });

  test("a workload changed, removed or added is edited", async () => {
    const cases: [number, Partial<ExportedAuditRecord>][] = [
      [2, { workload_subject: "repo:o/other:ref:refs/heads/main" }],
      [2, { workload_issuer: "https://gitlab.com" }],
      [2, { workload_issuer: null, workload_subject: null }],
      [3, { workload_subject: "repo:o/r:run:3" }],
    ];
    for (const [seq, change] of cases) {
      const r = await verify(edit(chain(), seq, change));
      expect({ change, breaks: r.breaks.map((b) => [b.kind, b.seq]) }).toEqual({ change, breaks: [["edited", seq]] });
    }
  });
});
