// Bearer tokens: kind prefix + 256 random bits (base64url); only the SHA-256 is ever stored.

import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Secret } from "../../../src/secret.ts";
import { openStore } from "../../../src/store/index.ts";
import { hashToken, mintPublicId, mintToken, TOKEN_PREFIXES, TOKEN_RANDOM_BYTES, tokenKindOf, type TokenKind } from "../../../src/crypto/tokens.ts";

const EXPECTED_PREFIXES: Record<TokenKind, string> = {
  session: "av_sess_",
  agent: "av_agt_",
  agentInvite: "av_inv_",
  approval: "av_appr_",
  vaultInvite: "av_uinv_",
};
const KINDS = Object.keys(EXPECTED_PREFIXES) as TokenKind[];

describe("minting", () => {
  test("prefixes are the contract's", () => {
    expect({ ...TOKEN_PREFIXES } as Record<TokenKind, string>).toEqual(EXPECTED_PREFIXES);
    expect(TOKEN_RANDOM_BYTES).toBe(32);
  });

  test.each(KINDS)("%s: prefix plus exactly 32 base64url-encoded random bytes", (kind) => {
    const { token } = mintToken(kind);
    const raw = token.reveal();
    const prefix = EXPECTED_PREFIXES[kind];
    expect(raw.startsWith(prefix)).toBe(true);
    const rest = raw.slice(prefix.length);
    expect(rest).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(rest, "base64url").byteLength).toBe(32);
    expect(tokenKindOf(raw)).toBe(kind);
  });

  test("uses the injected randomness verbatim", () => {
    const bytes = new Uint8Array(32).map((_, i) => i);
    const { token } = mintToken("agent", (n) => bytes.slice(0, n));
    expect(token.reveal()).toBe(`av_agt_${Buffer.from(bytes).toString("base64url")}`);
  });

  test("1000 tokens are distinct, and so are their hashes", () => {
    const tokens = new Set<string>();
    const hashes = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const t = mintToken(KINDS[i % KINDS.length]!);
      tokens.add(t.token.reveal().replace(/^av_[a-z]+_/, ""));
      hashes.add(t.hash);
    }
    expect(tokens.size).toBe(1000);
    expect(hashes.size).toBe(1000);
  });

  test("the hash is the SHA-256 hex of the full token", () => {
    const { token, hash } = mintToken("session");
    expect(hash).toBe(createHash("sha256").update(token.reveal()).digest("hex"));
    expect(hash).toBe(hashToken(token.reveal()));
    expect(hashToken("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  test("the token is a Secret that prints [redacted]", () => {
    const minted = mintToken("session");
    expect(minted.token).toBeInstanceOf(Secret);
    expect(String(minted.token)).toBe("[redacted]");
    expect(JSON.stringify(minted)).not.toContain(minted.token.reveal());
    expect(Bun.inspect(minted)).not.toContain(minted.token.reveal());
  });

  test("tokenKindOf knows only the broker's prefixes", () => {
    expect(tokenKindOf("av_uinv_x")).toBe("vaultInvite");
    expect(tokenKindOf("ghp_abcdef")).toBeUndefined();
    expect(tokenKindOf("")).toBeUndefined();
  });

  test("public ids carry their prefix and differ", () => {
    const a = mintPublicId("ses_");
    expect(a).toMatch(/^ses_[A-Za-z0-9_-]{16}$/);
    expect(mintPublicId("ses_")).not.toBe(a);
  });
});

// Built by a function (not an inline literal) so it fits SessionRow as the schema grows.
function scopedSession(vaultId: number, tokenHash: string) {
  return {
    publicId: mintPublicId("ses_"),
    tokenHash,
    kind: "scoped" as const,
    userId: null,
    agentId: null,
    vaultId,
    role: "proxy",
    createdAt: 1,
    expiresAt: 2,
    lastSeenAt: 1,
  };
}

describe("at rest", () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  test("a stored session keeps the hash; the raw token is nowhere in the database files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-tokens-"));
    dirs.push(dir);
    const store = await openStore({ dataDir: dir });
    try {
      const { token, hash } = mintToken("session");
      const vault = await store.vaults.create("v1", 1);
      const row = await store.sessions.create(scopedSession(vault.id, hash));
      expect((await store.sessions.byTokenHash(hash))?.id).toBe(row.id);
      const bytes = Buffer.concat(["broker.db", "broker.db-wal"].map((f) => readFileSync(join(dir, f))));
      expect(bytes.includes(Buffer.from(hash))).toBe(true);
      const raw = token.reveal();
      expect(bytes.includes(Buffer.from(raw))).toBe(false);
      expect(bytes.includes(Buffer.from(raw.slice("av_sess_".length)))).toBe(false);
      expect(bytes.includes(Buffer.from(raw.slice("av_sess_".length), "base64url"))).toBe(false);
    } finally {
      store.close();
    }
  });
});
