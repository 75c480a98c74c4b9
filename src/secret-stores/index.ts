// External secret stores (issue 36, architecture.md D24): one client per store kind behind one
// interface, each speaking only through store-http.ts, and the resolver that keeps references' values
// in memory off the request path.

export { createAwsSecretsClient, type AwsAuth, type AwsConnection } from "./aws-secrets.ts";
export { createAzureKeyVaultClient, type AzureKeyVaultConnection } from "./azure-keyvault.ts";
export { createGoogleSecretsClient, type GoogleSecretsConnection } from "./google-secrets.ts";
export { createVaultKvClient, type VaultAuth, type VaultKvConnection } from "./vault-kv.ts";
export { createReferenceResolver, type ConnectionTiming, type ReferenceResolver, type ReferenceState } from "./resolver.ts";
export type { StoreHttpDeps } from "./store-http.ts";
export { SecretStoreError, type SecretStoreClient } from "./types.ts";
