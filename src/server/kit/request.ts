// Request helpers: the bearer token, a size-capped JSON body, and the vault a route addresses.

import type { Context } from "hono";
import { InvalidRequest, PayloadTooLarge } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import type { VaultAction } from "../../identity/index.ts";
import { openVault, vaultNameById, type OpenVault } from "../../identity/index.ts";
import type { ApiEnv } from "./env.ts";

export const MAX_JSON_BYTES = 256 * 1024;

export function bearerToken(c: Context): string | undefined {
  const header = c.req.header("authorization");
  if (!header) return undefined;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return m?.[1];
}

/**
 * Reads a request body up to `max` bytes, streaming, so an oversized body (declared or chunked) is
 * refused without ever being held in memory: the server accepts large bodies for /proxy uploads.
 */
export async function readCappedText(c: Context, max: number): Promise<string> {
  const declared = Number(c.req.header("content-length") ?? "0");
  if (declared > max) throw new PayloadTooLarge(`request body is larger than ${max} bytes`);
  const body = c.req.raw.body;
  if (!body) return "";
  const reader = body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (let r = await reader.read(); !r.done; r = await reader.read()) {
    size += r.value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      throw new PayloadTooLarge(`request body is larger than ${max} bytes`);
    }
    parts.push(r.value);
  }
  return Buffer.concat(parts).toString("utf8");
}

/** Parses a JSON body (empty body → undefined). Never echoes the body in an error. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await readCappedText(c, MAX_JSON_BYTES);
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new InvalidRequest("request body is not valid JSON");
  }
}

export function openVaultFor(d: Domain, c: Context<ApiEnv>, action: VaultAction): Promise<OpenVault> {
  return openVault(d, c.get("principal"), c.req.param("vault") ?? "", action, c.req.header("x-vault"));
}

/**
 * The vault of a header-scoped call (discover, proposals, /proxy): a scoped session's own vault,
 * otherwise the X-Vault header (required for agent tokens and user sessions).
 */
export async function openHeaderVault(d: Domain, c: Context<ApiEnv>, action: VaultAction): Promise<OpenVault> {
  return openVault(d, c.get("principal"), await headerVaultName(d, c), action, c.req.header("x-vault"));
}

/** The vault a request addresses: a scoped session's own, or the one X-Vault names. */
export async function headerVaultName(d: Domain, c: Context<ApiEnv>): Promise<string> {
  const p = c.get("principal");
  const name = p.kind === "scoped" ? await vaultNameById(d, p.vaultId) : c.req.header("x-vault");
  if (!name) throw new InvalidRequest("send X-Vault naming the vault (agent tokens and user sessions)", "x-vault");
  return name;
}
