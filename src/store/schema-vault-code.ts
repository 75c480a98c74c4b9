// Migration 29: vaults kept as code (issue 39): whether a vault is managed by `broker apply`, and what its file
// declares that the store alone cannot hold.

import type { Migration } from "./migration.ts";

export const VAULT_CODE_MIGRATIONS: readonly Migration[] = [
  {
    version: 29,
    name: "vaults-as-code",
    // `managed`: 1 when the vault changes only through `broker apply` (docs/architecture.md D27); every other write
    // to its services, credentials, grants, members, webhooks, budgets and settings is refused. `declared`: JSON of
    // what the last apply's file names that is not on this instance yet or lives outside the file (the credential
    // keys whose values people set, the agents and people who join by invite, with their roles), so those few
    // writes stay possible in a managed vault; null when the vault is not managed. Updates of vaults are announced
    // to every instance already (vaults_announce).
    sql: `
      ALTER TABLE vaults ADD COLUMN managed INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE vaults ADD COLUMN declared TEXT;
    `,
  },
];
