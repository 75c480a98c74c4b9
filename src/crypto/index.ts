// Key material and certificates: AES-256-GCM sealing, Argon2id, the keyring and master password,
// broker tokens, credential sealing, the root CA and the leaf certificates minted for interception.

export { DecryptError, encodeAad, importAesKey, open, randomBytes, seal, type Sealed } from "./aead.ts";
export { KDF_DEFAULTS, deriveKey, type KdfParams } from "./kdf.ts";
export {
  changeMasterPassword,
  keyringMode,
  removeMasterPassword,
  setMasterPassword,
  unlockKeyring,
  type KeyringMode,
  type UnlockedKeyring,
} from "./keyring.ts";
export { hashToken, mintPublicId, mintToken, tokenKindOf, TOKEN_PREFIXES, TOKEN_RANDOM_BYTES, type TokenKind } from "./tokens.ts";
export { hashPassword, verifyAgainstNothing, verifyPassword, type PasswordHash } from "./passwords.ts";
export { CREDENTIAL_KEY_PATTERN, decryptCredential, encryptCredential, loadCredential, storeCredential } from "./credentials.ts";
export { createHashGate, type HashGate } from "./hash-gate.ts";
export { EC_ALG, loadRootCa, randomSerial, rotateRootCa, type CaHolder, type RootCa } from "./ca.ts";
export { createLeafCache, mintLeaf, type Leaf, type LeafCache } from "./leaf.ts";
export { isPasswordless } from "./passwords.ts";
export { MAX_PASSWORD_LENGTH } from "./passwords.ts";
export { MIN_PASSWORD_LENGTH } from "./passwords.ts";
export { PASSWORDLESS_PARAMS } from "./passwords.ts";
export { openStoreSecrets, sealStoreSecrets } from "./store-secrets.ts";
export {
  AUDIT_CHAIN_ENCODING,
  AUDIT_CHAIN_ENCODING_USAGE,
  AUDIT_CHAIN_GENESIS,
  AUDIT_CHECKPOINT_ENCODING,
  auditRecordHash,
  canonicalAuditRecord,
  checkpointMessage,
  type ChainedRecord,
  type CheckpointHead,
} from "../store/index.ts";
export {
  auditKeyId,
  createAuditSigningKey,
  loadAuditSigningKey,
  openAuditSigningKey,
  pemToSpki,
  signCheckpoint,
  spkiToPem,
  verifyCheckpoint,
  type AuditPublicKey,
  type AuditSigner,
  type SignedCheckpoint,
} from "./audit-signing.ts";
export type {
  ChainPoint,
  CheckpointKey,
  ExportedAuditRecord,
  ExportedCheckpoint,
  ExportedCheckpointHead,
  SignedAnchorPoint,
} from "./audit-export-shapes.ts";
export { anchorSignatureValid, checkpointKeyId, checkpointSignatureValid, importCheckpointKey } from "./audit-signatures.ts";
export {
  createChainVerifier,
  MAX_BREAKS,
  UNSIGNED_GRACE_MS,
  verifyAuditChain,
  type ChainBreak,
  type ChainBreakKind,
  type ChainVerification,
  type ChainVerifier,
  type ChainVerifierOptions,
  type OutsideCheckpoints,
} from "./audit-verify.ts";
