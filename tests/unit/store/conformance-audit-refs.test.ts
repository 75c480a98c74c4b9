// Audit records name credentials by reference (issue 36, migration 22: audit_logs.credential_refs): on every
// backend the references round-trip exactly as the writer made them (a JSON array: a reference may hold a
// comma) and a record without any reads as null. The logs API's view of them: tests/unit/egress/audit.test.ts.

import { expect, test } from "bun:test";
import { auditEntry } from "../../../src/egress/audit.ts";
import type { Store } from "../../../src/store/index.ts";
import { forEachBackend } from "../../helpers/store-backends.ts";
import { auditRow } from "./conformance-fixtures.ts";

const REFS = ["prod-vault:kv/stripe#api_key (version 3)", "aws:arn:aws:secretsmanager:eu-west-1:1:secret:a,b#k", `odd:"quoted"\\path#f`];

const request = {
  principal: "agent:1",
  contained: false,
  vault: { id: 1, name: "v" },
  ingress: "explicit",
  method: "GET",
  host: "api.example.com",
  port: 443,
  target: "/v1/charges?secret=no",
};
const outcome = { status: 200, bytesIn: 1, bytesOut: 2, error: null, service: "api.example.com" };

forEachBackend((backend) => {
  let store: Store;
  const open = async () => (store = await backend.open());

  test("audit: credential references round-trip as the writer made them; none reads as null", async () => {
    await open();
    const withRefs = auditEntry(request, 10, 13, { ...outcome, credentialKeys: ["STRIPE", "AWS"], credentialRefs: REFS });
    const emptyRefs = auditEntry(request, 11, 12, { ...outcome, credentialKeys: ["PLAIN"], credentialRefs: [] });
    const noRefs = auditEntry(request, 12, 12, { ...outcome, credentialKeys: [] });
    expect(withRefs.credentialRefs).toBe(JSON.stringify(REFS));
    expect(emptyRefs.credentialRefs).toBeNull();
    expect(noRefs.credentialRefs).toBeNull();
    // A row made before references (an old journal line) has no field at all.
    const { credentialRefs: _, ...legacy } = auditRow({ at: 13, vaultId: 1 });
    await store.audit.insert([withRefs, emptyRefs, noRefs, legacy]);
    const back = await store.audit.list({ vaultId: 1, after: 0, limit: 10 });
    expect(back.map((r) => [r.at, r.credentialKeys, r.credentialRefs])).toEqual([
      [10, "STRIPE,AWS", JSON.stringify(REFS)],
      [11, "PLAIN", null],
      [12, "", null],
      [13, "K", null],
    ]);
    const noUsage = { llmModel: null, inputTokens: null, outputTokens: null, totalTokens: null, costMicros: null, workloadIssuer: null, workloadSubject: null };
    expect(back[0]).toEqual({ ...withRefs, id: back[0]!.id, chainSeq: null, chainPrev: null, chainHash: null, ...noUsage });
    // In the column: the JSON text, names only.
    const raw = await store.db.all<{ refs: string | null }>("SELECT credential_refs AS refs FROM audit_logs WHERE vault_id = ? ORDER BY id", [1]);
    expect(raw.map((r) => r.refs)).toEqual([JSON.stringify(REFS), null, null, null]);
  });
});
