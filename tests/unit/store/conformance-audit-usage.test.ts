// Audit records carry an LLM call's usage (issue 38, migration 27): on every backend, and through SQLite's read
// worker, the writer's model, token counts and cost come back as the numbers it hashed (PostgreSQL answers BIGINT as
// text), an unmetered record as nulls; the chain verifies from the stored rows, both for the verifier and for
// retention's own check (store/audit-chain-check.ts), and an edit of a metered record's usage breaks it there.

import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyAuditChain } from "../../../src/crypto/index.ts";
import { auditEntry, createAuditLog } from "../../../src/egress/audit.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { AUDIT_CHAIN_GENESIS, CHAIN_CHECK_STATEMENTS, openStore, walkSegment, type AuditRow, type Store } from "../../../src/store/index.ts";
import { exportedRecord } from "../../../src/workflows/audit-export.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";

const request = {
  principal: "agent:1",
  contained: false,
  vault: { id: 1, name: "v" },
  ingress: "explicit",
  method: "POST",
  host: "api.openai.com",
  port: 443,
  target: "/v1/chat/completions",
};
const outcome = { status: 200, bytesIn: 1, bytesOut: 2, error: null, service: "api.openai.com", credentialKeys: ["OPENAI"] };
/** Past 2^32: the columns are BIGINT, not INTEGER. */
const BIG = { llmModel: "gpt-4o", inputTokens: 3_000_000_000, outputTokens: 7, totalTokens: 3_000_000_007, costMicros: 5_000_000_000 };
const UNPRICED = { llmModel: "local-model", inputTokens: 10, outputTokens: 0, totalTokens: 10, costMicros: null };
const NO_USAGE = { llmModel: null, inputTokens: null, outputTokens: null, totalTokens: null, costMicros: null };

/**
 * Seq 1 unmetered, 2 metered (big numbers), 3 metered and unpriced, written through the audit writer (which chains
 * them), the usage set on the entry as egress/exchange.ts sets it.
 */
async function writeThree(store: Store): Promise<void> {
  const audit = createAuditLog(store, { now: () => 0, log: createMemoryLogger(), flushIntervalMs: 60_000 });
  audit.record(auditEntry(request, 10, 11, outcome));
  audit.record({ ...auditEntry(request, 11, 12, outcome), ...BIG });
  audit.record({ ...auditEntry(request, 12, 13, outcome), ...UNPRICED });
  await audit.flush();
}

async function chainedRows(store: Store): Promise<AuditRow[]> {
  return store.audit.chained(1, 0, 10);
}

/** Breaks the verifier names over the stored rows, and retention's check of the same rows. */
async function checkAll(store: Store): Promise<{ verifier: [string, number][]; retention: string | undefined }> {
  const rows = await chainedRows(store);
  const v = await verifyAuditChain({ vaultId: 1, anchor: { seq: 0, hash: AUDIT_CHAIN_GENESIS }, records: rows.map(exportedRecord) });
  const walked = walkSegment(1, { seq: 0, hash: AUDIT_CHAIN_GENESIS }, await store.db.all(CHAIN_CHECK_STATEMENTS.between, [1, 0, 10, 10]));
  return { verifier: v.breaks.map((b) => [b.kind, b.seq]), retention: "reason" in walked ? walked.reason : undefined };
}

function expectUsage(rows: readonly AuditRow[]): void {
  const usage = (r: AuditRow) => [r.chainSeq, r.llmModel, r.inputTokens, r.outputTokens, r.totalTokens, r.costMicros];
  expect(rows.map(usage)).toEqual([
    [1, null, null, null, null, null],
    [2, "gpt-4o", 3_000_000_000, 7, 3_000_000_007, 5_000_000_000],
    [3, "local-model", 10, 0, 10, null],
  ]);
}

forEachBackend((backend) => {
  test("audit usage: written, listed and chained as the writer made it; an unmetered record reads as nulls", async () => {
    const store = await backend.open();
    await writeThree(store);
    const rows = await chainedRows(store);
    expectUsage(rows);
    expect(rows[0]).toMatchObject(NO_USAGE);
    // list() (newest first) reads them alike.
    expect((await store.audit.list({ vaultId: 1, limit: 10 })).map((r) => r.inputTokens)).toEqual([10, 3_000_000_000, null]);
    expect(await checkAll(store)).toEqual({ verifier: [], retention: undefined });
  });

  test("audit usage: a metered record's tokens nulled, or its cost changed, in the database breaks its hash", async () => {
    const store = await backend.open();
    await writeThree(store);
    const restore2 = "llm_model = 'gpt-4o', input_tokens = 3000000000, output_tokens = 7, total_tokens = 3000000007, cost_micros = 5000000000";
    const cases = [
      { seq: 2, edit: "llm_model = NULL, input_tokens = NULL, output_tokens = NULL, total_tokens = NULL, cost_micros = NULL", undo: restore2 },
      { seq: 2, edit: "cost_micros = 1", undo: restore2 },
      { seq: 3, edit: "cost_micros = 0", undo: "cost_micros = NULL" },
    ];
    for (const { seq, edit, undo } of cases) {
      await store.db.run(`UPDATE audit_logs SET ${edit} WHERE chain_seq = ?`, [seq]);
      // Ids are 1, 2, 3 in a fresh store, as the seqs are.
      expect({ edit, ...(await checkAll(store)) }).toEqual({
        edit,
        verifier: [["edited", seq]],
        retention: `record seq ${seq} (id ${seq}): its hash does not match its contents`,
      });
      await store.db.run(`UPDATE audit_logs SET ${undo} WHERE chain_seq = ?`, [seq]);
      expect(await checkAll(store)).toEqual({ verifier: [], retention: undefined });
    }
  });
});

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test("sqlite file store: the read worker answers the usage fields as the main connection does", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "broker-usage-"));
  dirs.push(dataDir);
  const store = await openStore({ dataDir }, { readWorker: {} });
  try {
    await writeThree(store);
    expectUsage(await chainedRows(store)); // chained() is one of the worker's reads (OFF_LOOP_READS)
    expect(await checkAll(store)).toEqual({ verifier: [], retention: undefined });
  } finally {
    store.close();
  }
});
