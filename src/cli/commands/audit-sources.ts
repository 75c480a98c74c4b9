// Where `broker audit export|verify` read a vault's audit chain (docs/audit-chain.md): the broker's export pages,
// its checkpoints and public key (a broker without checkpoints yet answers 404: none), or an export file and a key
// file; and the export's JSON lines. Records hold names and numbers only.

import { readFileSync } from "node:fs";
import type { ChainPoint, ExportedAuditRecord, ExportedCheckpoint, SignedAnchorPoint } from "../../crypto/index.ts";
import {
  AuditCheckpoint,
  AuditExportRecord,
  type AuditCheckpointPageBody,
  type AuditExportAnswerBody,
  type AuditPublicKeyAnswerBody,
} from "../../contract/index.ts";
import { apiPath, CliFailure, vaultPath } from "../kit/index.ts";
import type { CliContext } from "../kit/index.ts";

const PAGE = 5000;
const CHECKPOINT_PAGE = 1000;

/** The first line of a JSON-lines export (docs/audit-chain.md, Export). */
export interface ChainLine {
  type: "chain";
  vault: string;
  vault_id: number;
  anchor: SignedAnchorPoint;
  head: ChainPoint;
  /** When the first page was read (the broker's clock), and its checkpoint interval: records older than it allows must be signed. */
  exported_at?: number;
  checkpoint_seconds?: number | null;
  signed_through?: number | null;
  /** Records without chain fields: written before the chain began, and (ids) after it began. */
  unchained?: { before_chain: number; after_chain: number[] };
}

/** A record line, or an anchor line: retention moved the anchor while the export ran (the chain goes on from it). */
export type ChainEntry = { readonly record: ExportedAuditRecord } | { readonly anchor: SignedAnchorPoint };

const isNotFound = (err: unknown) => err instanceof CliFailure && (err as { status?: unknown }).status === 404;

/** The vault's checkpoints (every page), or none when this broker has no checkpoint endpoint yet. */
export async function fetchCheckpoints(ctx: CliContext, vault: string): Promise<ExportedCheckpoint[]> {
  const out: ExportedCheckpoint[] = [];
  for (let after = 0; ; ) {
    let page: AuditCheckpointPageBody;
    try {
      page = await ctx.client.request<AuditCheckpointPageBody>(
        "GET",
        `${vaultPath(vault, "audit", "checkpoints")}?after_id=${after}&limit=${CHECKPOINT_PAGE}`,
        {
          vault,
        },
      );
    } catch (err) {
      if (isNotFound(err) && after === 0) return out;
      throw err;
    }
    out.push(...page.checkpoints);
    if (page.next_after_id === null || page.checkpoints.length === 0) return out;
    after = page.next_after_id;
  }
}

/** The broker's checkpoint key (none before it made one, or on a broker without checkpoints). */
export async function fetchPublicKey(ctx: CliContext): Promise<string | undefined> {
  try {
    return (await ctx.client.request<AuditPublicKeyAnswerBody>("GET", apiPath("v1", "audit", "public-key"), { anonymous: true })).public_key_pem;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * Every page of the vault's export, in seq order. Retention may remove the oldest records while this runs: a
 * page then carries the newer anchor, signed by retention, and the chain goes on from it.
 */
export async function* exportPages(ctx: CliContext, vault: string): AsyncGenerator<AuditExportAnswerBody> {
  let after: number | undefined;
  for (;;) {
    const query = after === undefined ? `?limit=${PAGE}` : `?after_seq=${after}&limit=${PAGE}`;
    const page = await ctx.client.request<AuditExportAnswerBody>("GET", `${vaultPath(vault, "audit", "export")}${query}`, { vault });
    yield page;
    if (page.next_after_seq === null) return;
    after = page.next_after_seq;
  }
}

/** The record as a JSON line, its fields in the export's order. */
export function recordLine(r: ExportedAuditRecord): string {
  return JSON.stringify({
    type: "record",
    id: r.id,
    seq: r.seq,
    prev: r.prev,
    hash: r.hash,
    at: r.at,
    principal: r.principal,
    vault: r.vault,
    ingress: r.ingress,
    method: r.method,
    host: r.host,
    path: r.path,
    service: r.service,
    credential_keys: r.credential_keys,
    credential_refs: r.credential_refs,
    status: r.status,
    bytes_in: r.bytes_in,
    bytes_out: r.bytes_out,
    duration_ms: r.duration_ms,
    error: r.error,
    contained: r.contained,
    approved_by: r.approved_by,
  });
}

export function checkpointLine(c: ExportedCheckpoint): string {
  return JSON.stringify({ type: "checkpoint", id: c.id, at: c.at, key_id: c.key_id, heads: c.heads, signed_heads: c.signed_heads, signature: c.signature });
}

export function chainLine(page: AuditExportAnswerBody): ChainLine {
  return {
    type: "chain",
    vault: page.vault,
    vault_id: page.vault_id,
    anchor: page.anchor,
    head: page.head,
    exported_at: page.exported_at,
    checkpoint_seconds: page.checkpoint_seconds,
    signed_through: page.signed_through,
    ...(page.unchained ? { unchained: page.unchained } : {}),
  };
}

/** A later anchor, as its own line, where the records after it begin. */
export function anchorLine(a: SignedAnchorPoint): string {
  return JSON.stringify({ type: "anchor", seq: a.seq, hash: a.hash, at: a.at ?? null, key_id: a.key_id ?? null, signature: a.signature ?? null });
}

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
