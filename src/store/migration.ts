// One step of the schema's history (schema.ts lists them; migrations.ts applies them).

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /** Whole statements run only on PostgreSQL (function bodies hold semicolons, so they are not split). */
  readonly postgresOnly?: readonly string[];
  /** Whole statements run only on SQLite, after `sql` (e.g. a table rebuild where PostgreSQL alters in place). */
  readonly sqliteOnly?: readonly string[];
}
