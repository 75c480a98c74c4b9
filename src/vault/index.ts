// The vault domain: key material, tokens, passwords and credentials. Knows nothing about HTTP.

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
export { createAuthenticator, type Authenticator } from "./sessions.ts";
export { createHashGate, type HashGate } from "./hash-gate.ts";
export type { Domain } from "./context.ts";
export type { Principal, VaultRole, InstanceRole } from "./principal.ts";
export { hostMatches, parseHostPattern, type HostPattern } from "./hosts.ts";
export { EC_ALG, loadRootCa, randomSerial, rotateRootCa, type CaHolder, type RootCa } from "./ca.ts";
export { createLeafCache, mintLeaf, type Leaf, type LeafCache } from "./leaf.ts";
export { createVaultAccessCache, type VaultAccessCache } from "./vault-access.ts";
// Domain operations used by the server and the tunnel.
export * from "./agents.ts";
export * from "./audit-log.ts";
export * from "./credential-ops.ts";
export * from "./invites.ts";
export * from "./principal.ts";
export * from "./proposals.ts";
export * from "./proposal-review.ts";
export * from "./scoped.ts";
export * from "./services.ts";
export * from "./minted-auth.ts";
export * from "./settings.ts";
export * from "./users.ts";
export * from "./vaults.ts";
export * from "./webhooks.ts";
export * from "./request-approvals.ts";
export { layoutJson, type JsonLayout } from "./json-layout.ts";
export { requesterPrefix, type RequesterKind } from "./principal-name.ts";
export { fieldPath, issueError, parseWith } from "./schema-input.ts";
export * from "./schemas/index.ts";
export * from "./limits.ts";
export * from "./oidc.ts";
export { createOidcClient, createTrustingFetch, OidcDiscoveryError, type OidcClaims, type OidcClient, type OidcClientOptions } from "./oidc-client.ts";
export {
  ALWAYS_FRESH,
  createChangeFeed,
  REVALIDATE_MS,
  startChangeFeed,
  type Change,
  type ChangeFeed,
  type ChangeHandlers,
  type Freshness,
} from "./changes.ts";
export {
  canonicalPath,
  describeRules,
  matchRule,
  needsApproval,
  parseRules,
  RULE_METHODS,
  type CanonicalPath,
  type Rules,
  type ServiceRule,
} from "./path-rules.ts";
export { describeUrlAuth, readPathTemplate, readQueryParam, splitPathTemplate, VALUE_PLACEHOLDER } from "./url-auth.ts";
