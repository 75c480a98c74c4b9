// The chain's two encodings (issue 38, docs/audit-chain.md "A record's hash"): a record without LLM usage keeps
// broker-audit-v1 (its hash pinned from before usage existed), one with usage is broker-audit-v2 (v1's elements, then
// model, tokens and cost), as the doc spells it and as Python's json.dumps writes it; the verifier names a metered
// record whose usage was nulled or changed, and usage added to an unmetered record, as edited.

import { describe, expect, test } from "bun:test";
import {
  AUDIT_CHAIN_GENESIS,
  auditRecordHash,
  canonicalAuditRecord,
  verifyAuditChain,
  type ChainedRecord,
  type ExportedAuditRecord,
} from "../../../src/crypto/index.ts";

/** A record as it was hashed before usage existed (the pins below were computed with that code). */
const PLAIN: ChainedRecord = {
  vaultId: 7,
  seq: 3,
  prev: "ab".repeat(32),
  at: 1764355200000,
  principal: "agent:3",
  vault: "prod",
  ingress: "explicit",
  method: "POST",
  host: "api.openai.com",
  path: "/v1/chat/completions",
  service: "api.openai.com",
  credentialKeys: "OPENAI",
  credentialRefs: null,
  status: 200,
  bytesIn: 120,
  bytesOut: 900,
  durationMs: 42,
  error: null,
  contained: false,
  approvedBy: null,
};
const PLAIN_HASH = "4a3ba3f49e384018edf08bb5ac75b6725ed429e2f16b36ce2e5153702f6233a9";
const USAGE = { llmModel: "gpt-4o-mini", inputTokens: 1200, outputTokens: 345, totalTokens: 1545, costMicros: 387 };
const METERED_HASH = "a08b024ecbc9a3f2d1f4f67f8df813ae54faa56837c7397dd8b20154696da93c";

describe("encodings", () => {
  test("a record without usage is v1, hashed as before usage existed (explicit nulls alike)", () => {
    expect(auditRecordHash(PLAIN)).toBe(PLAIN_HASH);
    const nulls = { llmModel: null, inputTokens: null, outputTokens: null, totalTokens: null, costMicros: null };
    expect(canonicalAuditRecord({ ...PLAIN, ...nulls })).toBe(canonicalAuditRecord(PLAIN));
    expect(JSON.parse(canonicalAuditRecord(PLAIN))).toHaveLength(21);
  });

  test("a metered record is v2: v1's 20 fields under the new name, then model, tokens and cost", () => {
    const v1 = JSON.parse(canonicalAuditRecord(PLAIN)) as unknown[];
    const v2 = JSON.parse(canonicalAuditRecord({ ...PLAIN, ...USAGE })) as unknown[];
    expect(v2).toEqual(["broker-audit-v2", ...v1.slice(1), "gpt-4o-mini", 1200, 345, 1545, 387]);
    expect(auditRecordHash({ ...PLAIN, ...USAGE })).toBe(METERED_HASH);
    // Unpriced (null cost) and unnamed (null model) calls are metered too.
    const unpriced = JSON.parse(canonicalAuditRecord({ ...PLAIN, ...USAGE, llmModel: null, costMicros: null })) as unknown[];
    expect(unpriced.slice(0, 1).concat(unpriced.slice(21))).toEqual(["broker-audit-v2", null, 1200, 345, 1545, null]);
  });

  test("any usage field set selects v2, so none of them can be added to a record outside its hash", () => {
    for (const one of [{ llmModel: "m" }, { outputTokens: 1 }, { totalTokens: 0 }, { costMicros: 5 }]) {
      const encoded = JSON.parse(canonicalAuditRecord({ ...PLAIN, ...one })) as unknown[];
      expect({ one, name: encoded[0], length: encoded.length }).toEqual({ one, name: "broker-audit-v2", length: 26 });
    }
  });

  test.skipIf(!Bun.which("python3"))("Python's json.dumps writes the same bytes (and so the same hash)", () => {
    const odd = { ...PLAIN, ...USAGE, path: '/v1/é\u0001"\\\n', llmModel: "模型\t\u007f", error: "x\u2028y" };
    const script = [
      "import hashlib, json, sys",
      "r = json.loads(sys.argv[1])",
      'names = ["vaultId","seq","prev","at","principal","vault","ingress","method","host","path","service","credentialKeys","credentialRefs","status","bytesIn","bytesOut","durationMs","error","contained","approvedBy"]',
      'usage = ["llmModel","inputTokens","outputTokens","totalTokens","costMicros"]',
      'a = ["broker-audit-v2"] + [r[n] for n in names] + [r[n] for n in usage]',
      'print(hashlib.sha256(json.dumps(a, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest(), end="")',
    ].join("\n");
    const run = Bun.spawnSync(["python3", "-c", script, JSON.stringify(odd)]);
    expect(run.stderr.toString()).toBe("");
    expect(run.stdout.toString()).toBe(auditRecordHash(odd));
  });
});

// The verifier over an export's records, their hashes computed from the doc's table, not the broker's encoder.
const VAULT = 7;

function docHash(r: Omit<ExportedAuditRecord, "hash">): string {
  const v1 = [VAULT, r.seq, r.prev, r.at, r.principal, r.vault, r.ingress, r.method, r.host, r.path, r.service, r.credential_keys];
  const rest = [r.credential_refs, r.status, r.bytes_in, r.bytes_out, r.duration_ms, r.error, r.contained, r.approved_by];
  const usage = [r.llm_model ?? null, r.input_tokens ?? null, r.output_tokens ?? null, r.total_tokens ?? null, r.cost_micros ?? null];
  const metered = usage.some((v) => v !== null);
  const encoded = metered ? ["broker-audit-v2", ...v1, ...rest, ...usage] : ["broker-audit-v1", ...v1, ...rest];
  return new Bun.CryptoHasher("sha256").update(JSON.stringify(encoded)).digest("hex");
}

/** Six records, seq 2, 4 and 5 metered (5 unpriced); seq 1 as an export made before usage existed writes it. */
function chain(): ExportedAuditRecord[] {
  const out: ExportedAuditRecord[] = [];
  let prev = AUDIT_CHAIN_GENESIS;
  for (let seq = 1; seq <= 6; seq++) {
    const metered = seq === 2 || seq === 4 || seq === 5;
    const base = {
      id: 100 + seq,
      seq,
      prev,
      at: Date.UTC(2026, 0, 1) + seq,
      principal: "agent:1",
      vault: "main",
      ingress: "explicit",
      method: "POST",
      host: "api.openai.com",
      path: "/v1/chat/completions",
      service: "api.openai.com",
      credential_keys: "OPENAI",
      credential_refs: null,
      status: 200,
      bytes_in: seq,
      bytes_out: 10 * seq,
      duration_ms: seq,
      error: null,
      contained: false,
      approved_by: null,
      ...(seq === 1 ? {} : { llm_model: null, input_tokens: null, output_tokens: null, total_tokens: null, cost_micros: null }),
      ...(metered && { llm_model: "gpt-4o", input_tokens: 100 * seq, output_tokens: seq, total_tokens: 101 * seq, cost_micros: seq === 5 ? null : 7 * seq }),
    };
    const r = { ...base, hash: docHash(base) };
    out.push(r);
    prev = r.hash;
  }
  return out;
}

const verify = (records: ExportedAuditRecord[]) => verifyAuditChain({ vaultId: VAULT, anchor: { seq: 0, hash: AUDIT_CHAIN_GENESIS }, records });
const edit = (records: ExportedAuditRecord[], seq: number, change: Partial<ExportedAuditRecord>) =>
  records.map((r) => (r.seq === seq ? { ...r, ...change } : r));

describe("the verifier", () => {
  test("a chain of metered and unmetered records, hashed as the doc says, verifies", async () => {
    expect(await verify(chain())).toMatchObject({ ok: true, records: 6, breaks: [] });
  });

  test("a metered record whose tokens were nulled, or whose cost or model changed, is edited", async () => {
    const cases: [number, Partial<ExportedAuditRecord>][] = [
      [2, { input_tokens: null, output_tokens: null, total_tokens: null, cost_micros: null, llm_model: null }],
      [2, { input_tokens: null }],
      [4, { cost_micros: 1 }],
      [4, { cost_micros: null }],
      [5, { cost_micros: 0 }],
      [4, { llm_model: "gpt-4o-mini" }],
      [4, { total_tokens: 1 }],
    ];
    for (const [seq, change] of cases) {
      const r = await verify(edit(chain(), seq, change));
      expect({ change, breaks: r.breaks.map((b) => [b.kind, b.seq]) }).toEqual({ change, breaks: [["edited", seq]] });
    }
  });

  test("usage added to an unmetered record is edited", async () => {
    for (const seq of [1, 3]) {
      const r = await verify(edit(chain(), seq, { llm_model: "gpt-4o", input_tokens: 1, output_tokens: 1, total_tokens: 2, cost_micros: 1 }));
      expect(r.breaks.map((b) => [b.kind, b.seq])).toEqual([["edited", seq]]);
    }
    const costOnly = await verify(edit(chain(), 3, { cost_micros: 1 }));
    expect(costOnly.breaks.map((b) => [b.kind, b.seq])).toEqual([["edited", 3]]);
  });
});
