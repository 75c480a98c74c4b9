// The files `broker audit verify` reads (docs/audit-chain.md): an export written by `broker audit export --format
// jsonl`, the broker's public key, and checkpoints kept outside the broker. Each is checked line by line against the
// API's schemas; input that cannot be read exits 2 (tampering exits 1).

import { readFileSync } from "node:fs";
import type { ExportedCheckpoint, SignedAnchorPoint } from "../../crypto/index.ts";
import { AuditCheckpoint, AuditExportRecord } from "../../contract/index.ts";
import { CliFailure } from "../kit/index.ts";
import type { ChainEntry, ChainLine } from "./audit-sources.ts";

/** What an export file holds, read and checked line by line. */
export function readExportFile(path: string): { chain: ChainLine; entries: ChainEntry[]; checkpoints: ExportedCheckpoint[] } {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CliFailure(`cannot read ${path}: ${(err as Error).message}`);
  }
  let chain: ChainLine | undefined;
  const entries: ChainEntry[] = [];
  const checkpoints: ExportedCheckpoint[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (!line) continue;
    const where = `${path} line ${i + 1}`;
    let value: { type?: unknown } & Record<string, unknown>;
    const parsed = parseJson(line);
    if (!parsed.ok || !parsed.value || typeof parsed.value !== "object" || Array.isArray(parsed.value))
      throw new CliFailure(`${where} is not a JSON object`, "give a file written by `broker audit export --format jsonl`", 2);
    value = parsed.value as typeof value;
    if (value.type === "chain") {
      if (chain) throw new CliFailure(`${where}: a second "chain" line`, "give the export of one vault");
      chain = value as unknown as ChainLine;
      if (!Number.isSafeInteger(chain.vault_id) || typeof chain.anchor?.hash !== "string" || typeof chain.head?.hash !== "string")
        throw new CliFailure(`${where}: the "chain" line lacks vault_id, anchor or head`);
    } else if (!chain) {
      throw new CliFailure(`${where}: the file does not start with its "chain" line`, "give a file written by `broker audit export --format jsonl`");
    } else if (value.type === "record") {
      const parsed = AuditExportRecord.safeParse(value);
      if (!parsed.success) throw new CliFailure(`${where}: not a record (${parsed.error.issues[0]?.path.join(".")} ${parsed.error.issues[0]?.message})`);
      entries.push({ record: parsed.data });
    } else if (value.type === "anchor") {
      const a = value as unknown as SignedAnchorPoint;
      if (!Number.isSafeInteger(a.seq) || typeof a.hash !== "string") throw new CliFailure(`${where}: not an anchor (seq, hash)`);
      entries.push({ anchor: a });
    } else if (value.type === "checkpoint") {
      checkpoints.push(checkpointOf(value, where));
    } else {
      throw new CliFailure(`${where}: unknown line type ${JSON.stringify(value.type)}`);
    }
  }
  if (!chain) throw new CliFailure(`${path} holds no "chain" line`, "give a file written by `broker audit export --format jsonl`");
  return { chain, entries, checkpoints };
}

/** A public key file: the PEM, or GET /v1/audit/public-key's answer. */
export function readPublicKeyFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CliFailure(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (text.trimStart().startsWith("{")) {
    try {
      const pem = (JSON.parse(text) as { public_key_pem?: unknown }).public_key_pem;
      if (typeof pem === "string") return pem;
    } catch {
      // not JSON: refused below
    }
  }
  if (!text.includes("-----BEGIN PUBLIC KEY-----"))
    throw new CliFailure(`${path} holds no public key`, "give the PEM of GET /v1/audit/public-key (its public_key_pem), or that answer as it is");
  return text;
}

/** A checkpoint object read from a file, checked against the API's schema (unreadable input exits 2). */
function checkpointOf(value: unknown, where: string): ExportedCheckpoint {
  const parsed = AuditCheckpoint.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new CliFailure(`${where}: not a checkpoint (${issue?.path.join(".") || "it"}: ${issue?.message})`, undefined, 2);
  }
  return parsed.data;
}

/** JSON.parse, with input too deeply nested for it refused like any other that is not JSON. */
function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/**
 * Checkpoints kept outside the broker (--checkpoints FILE): the `audit.checkpoint` webhook deliveries as they
 * arrived (one JSON body a line, or a JSON array of them), checkpoint objects, or GET …/audit/checkpoints answers.
 */
export function readCheckpointsFile(path: string): ExportedCheckpoint[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CliFailure(`cannot read ${path}: ${(err as Error).message}`, undefined, 2);
  }
  const hint = "give the audit.checkpoint webhook bodies, one a line, or checkpoint objects";
  const values: { value: unknown; where: string }[] = [];
  const whole = parseJson(text);
  if (whole.ok) values.push({ value: whole.value, where: path });
  else {
    const lines = text.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!.trim();
      if (!line) continue;
      const one = parseJson(line);
      if (!one.ok) throw new CliFailure(`${path} line ${i + 1} is not JSON`, hint, 2);
      values.push({ value: one.value, where: `${path} line ${i + 1}` });
    }
  }
  // Webhook bodies hold a checkpoint, answers a list of them: looked for two levels down, no deeper.
  const out: ExportedCheckpoint[] = [];
  for (const { value, where } of values) {
    const list = Array.isArray(value) ? value : [value];
    for (const item of list) {
      const o = item && typeof item === "object" ? (item as Record<string, unknown>) : undefined;
      if (o && Array.isArray(o.checkpoints)) for (const c of o.checkpoints) out.push(checkpointOf(c, where));
      else if (o && o.checkpoint !== undefined) out.push(checkpointOf(o.checkpoint, where));
      else out.push(checkpointOf(item, where));
    }
  }
  if (out.length === 0) throw new CliFailure(`${path} holds no checkpoint`, hint, 2);
  return out;
}
