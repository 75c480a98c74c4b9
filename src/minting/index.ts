// Short-lived credentials obtained from long-lived ones: OAuth 2.0 client-credentials and refresh
// grants and GitHub App installation tokens, cached per vault and service, refreshed once after a 401.
// Implements the Minter contract the egress core declares (egress/minter.ts), and redeems the authorization
// code of an account a person connects (the `redeem` workflows/connect.ts declares).

export { createMinter } from "./minted.ts";
export { redeemAuthorizationCode, type AuthorizationCode } from "./authorization-code.ts";
export type { TokenEndpointDeps } from "./token-endpoint.ts";
