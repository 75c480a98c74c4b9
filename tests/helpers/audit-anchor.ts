// A retention anchor signed as docs/audit-chain.md says ("Heads and anchors"), with WebCrypto and a key the test
// made: the verifier's tests check it against that spec rather than against the broker's own signer.

import type { SignedAnchorPoint } from "../../src/crypto/index.ts";
import { anchorMessage } from "../../src/store/index.ts";

export async function signedAnchor(
  key: CryptoKey,
  keyId: string,
  vaultId: number,
  point: { seq: number; hash: string },
  at = Date.UTC(2026, 0, 2),
): Promise<SignedAnchorPoint> {
  const message = anchorMessage({ vaultId, seq: point.seq, hash: point.hash, at, keyId });
  const signature = Buffer.from(await crypto.subtle.sign({ name: "Ed25519" }, key, message as BufferSource)).toString("base64url");
  return { seq: point.seq, hash: point.hash, at, key_id: keyId, signature };
}
