// The audit chain's parts as the broker exports them and every verifier reads them (docs/audit-chain.md,
// "Export"): records with the fields the canonical encoding takes, checkpoints with the heads they signed, the
// anchor with retention's signature, and the public key. Shapes only.

/** A chained record as the export carries it (docs/audit-chain.md, "Export"): the fields the encoding takes. */
export interface ExportedAuditRecord {
  readonly id: number;
  readonly seq: number;
  readonly prev: string;
  readonly hash: string;
  readonly at: number;
  readonly principal: string;
  readonly vault: string;
  readonly ingress: string;
  readonly method: string;
  readonly host: string;
  readonly path: string;
  readonly service: string | null;
  readonly credential_keys: string;
  readonly credential_refs: string | null;
  readonly status: number;
  readonly bytes_in: number;
  readonly bytes_out: number;
  readonly duration_ms: number;
  readonly error: string | null;
  readonly contained: boolean;
  readonly approved_by: string | null;
}

export interface ExportedCheckpointHead {
  readonly vault_id: number;
  readonly seq: number;
  readonly hash: string;
}

/** A signed checkpoint as the broker publishes it (docs/audit-chain.md, "Checkpoints"; GET …/audit/checkpoints). */
export interface ExportedCheckpoint {
  readonly id: number;
  readonly at: number;
  readonly key_id: string;
  /** The vault's own head (GET /v1/vaults/{vault}/audit/checkpoints gives that vault's only). */
  readonly heads: readonly ExportedCheckpointHead[];
  /** Every head the signature covers, the vault's among them (absent: `heads` is what was signed). */
  readonly signed_heads?: readonly ExportedCheckpointHead[];
  /** base64url Ed25519 signature of checkpointMessage() over the signed heads. */
  readonly signature: string;
}

export interface ChainPoint {
  readonly seq: number;
  readonly hash: string;
}

/** An anchor as the export gives it: above the genesis, retention's signature of it (docs/audit-chain.md, "Heads and anchors"). */
export interface SignedAnchorPoint extends ChainPoint {
  /** When retention moved it (ms since the epoch); null at the genesis. */
  readonly at?: number | null;
  readonly key_id?: string | null;
  /** base64url Ed25519 signature of ["broker-audit-anchor-v1", vault_id, seq, hash, at, key_id]. */
  readonly signature?: string | null;
}

/** The broker's checkpoint key: its SPKI PEM (GET /v1/audit/public-key); its id is the PEM's (auditKeyId). */
export interface CheckpointKey {
  readonly pem: string;
}
