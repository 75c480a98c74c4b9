// Migrations 23 to 25: the audit log's hash chain (docs/audit-chain.md): each record's place in its vault's chain,
// the heads and anchors, the signing key and signed checkpoints, and the anchors retention signs.

import type { Migration } from "./migration.ts";

export const AUDIT_CHAIN_MIGRATIONS: readonly Migration[] = [
  {
    version: 23,
    name: "audit-hash-chain",
    // Each vault's audit records form a hash chain (issue 37, docs/audit-chain.md): a record's place in its
    // vault's chain, the previous record's hash and its own, written with it. audit_chains holds each vault's
    // head (the last record written, its row locked by the writer so two instances never fork a chain) and its
    // anchor (the last record retention removed, where verification starts). Rows written before this
    // migration have no chain fields and are not verified.
    sql: `
      ALTER TABLE audit_logs ADD COLUMN chain_seq BIGINT;
      ALTER TABLE audit_logs ADD COLUMN chain_prev TEXT;
      ALTER TABLE audit_logs ADD COLUMN chain_hash TEXT;
      CREATE INDEX audit_logs_vault_chain ON audit_logs (vault_id, chain_seq);
      CREATE TABLE audit_chains (
        vault_id BIGINT PRIMARY KEY,
        head_seq BIGINT NOT NULL,
        head_hash TEXT NOT NULL,
        anchor_seq BIGINT NOT NULL,
        anchor_hash TEXT NOT NULL
      );
    `,
  },
  {
    version: 24,
    name: "audit-checkpoints",
    // Signed checkpoints of the audit chains (issue 37, docs/audit-chain.md): the broker's Ed25519 signing key
    // (created on first start: its private half sealed with the data key, the additional data naming its key id;
    // the public half as SPKI PEM; id 1 today, so two instances starting at once insert one key and read the
    // winner back), the checkpoints (the heads they signed as JSON, exactly as signed, and the signature), one
    // row per vault a checkpoint covers (a vault's checkpoints are a range of its primary key), and, per vault,
    // the seq its last checkpoint signed (a head that moved past it is what the next checkpoint signs).
    sql: `
      CREATE TABLE audit_signing_keys (
        id INTEGER PRIMARY KEY,
        key_id TEXT NOT NULL UNIQUE,
        public_key_pem TEXT NOT NULL,
        private_nonce {{bytes}} NOT NULL,
        private_ciphertext {{bytes}} NOT NULL,
        created_at BIGINT NOT NULL
      );
      CREATE TABLE audit_checkpoints (
        id {{id}},
        at BIGINT NOT NULL,
        key_id TEXT NOT NULL REFERENCES audit_signing_keys (key_id),
        heads TEXT NOT NULL,
        signature TEXT NOT NULL
      );
      CREATE INDEX audit_checkpoints_at ON audit_checkpoints (at);
      CREATE TABLE audit_checkpoint_vaults (
        vault_id BIGINT NOT NULL,
        checkpoint_id BIGINT NOT NULL REFERENCES audit_checkpoints (id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        hash TEXT NOT NULL,
        PRIMARY KEY (vault_id, checkpoint_id)
      );
      CREATE INDEX audit_checkpoint_vaults_checkpoint ON audit_checkpoint_vaults (checkpoint_id);
      ALTER TABLE audit_chains ADD COLUMN checkpoint_seq BIGINT NOT NULL DEFAULT 0;
    `,
  },
  {
    version: 25,
    name: "audit-signed-anchors",
    // Retention signs each anchor it moves (docs/audit-chain.md, "Heads and anchors"): when, by which key, and
    // the Ed25519 signature over the vault, seq, hash, time and key id, so a prefix deleted by someone with write
    // access to the database (who cannot sign) no longer passes for retention. Anchors moved before this
    // migration stay unsigned, and verification names them.
    // Also where the chain began: the highest id of a record written before migration 23 (no row on a broker
    // installed since), so a record without chain fields above it is an insertion, whatever id it was given.
    sql: `
      ALTER TABLE audit_chains ADD COLUMN anchor_at BIGINT;
      ALTER TABLE audit_chains ADD COLUMN anchor_key_id TEXT;
      ALTER TABLE audit_chains ADD COLUMN anchor_signature TEXT;
      CREATE TABLE audit_chain_start (id INTEGER PRIMARY KEY, prechain_max_id BIGINT);
      INSERT INTO audit_chain_start (id, prechain_max_id)
        SELECT 1, MAX(id) FROM audit_logs WHERE chain_seq IS NULL
          AND id < COALESCE((SELECT MIN(id) FROM audit_logs WHERE chain_seq IS NOT NULL), 9000000000000000000)
        HAVING MAX(id) IS NOT NULL;
    `,
  },
];
