// Short-lived credentials obtained from long-lived ones: OAuth 2.0 client-credentials and refresh
// grants and GitHub App installation tokens, cached per vault and service, refreshed once after a 401.
// Implements the Minter contract the egress core declares (egress/minter.ts).

export { createMinter } from "./minted.ts";
