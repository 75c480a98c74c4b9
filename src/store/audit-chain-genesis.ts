// Where every vault's audit chain starts (docs/audit-chain.md): the previous hash of its first record, and
// its anchor until retention removes a record. Kept in the store, which creates each chain's row.

export const AUDIT_CHAIN_GENESIS = "0".repeat(64);
