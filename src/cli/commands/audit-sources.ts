// Where `broker audit export|verify` read a vault's audit chain from the broker (docs/audit-chain.md): its export
// pages, checkpoints and public key (a broker without checkpoints yet answers 404: none); and the export's JSON lines
// (audit-files.ts reads them back). Records hold names and numbers only.

import type { ChainPoint, ExportedAuditRecord, ExportedCheckpoint, SignedAnchorPoint } from "../../crypto/index.ts";
import { type AuditCheckpointPageBody, type AuditExportAnswerBody, type AuditPublicKeyAnswerBody } from "../../contract/index.ts";
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
    llm_model: r.llm_model ?? null,
    input_tokens: r.input_tokens ?? null,
    output_tokens: r.output_tokens ?? null,
    total_tokens: r.total_tokens ?? null,
    cost_micros: r.cost_micros ?? null,
    workload_issuer: r.workload_issuer ?? null,
    workload_subject: r.workload_subject ?? null,
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
