// `broker apply`'s plan (issue 39): the changes a vault file makes, each in words, and what it leaves for a person.

import type { Domain, OpenVault } from "../identity/index.ts";
import type { Secret } from "../secret.ts";
import type { Repos, VaultRow } from "../store/index.ts";
import type { VaultCodeSpec } from "./vault-file.ts";

export type ChangeKind = "vault" | "service" | "credential" | "agent" | "member" | "webhook" | "budget" | "binding";

/** One change the file makes, in words ("add service api.stripe.com (template stripe, operations read, write)"). */
export interface PlannedChange {
  readonly action: "add" | "change" | "remove";
  readonly kind: ChangeKind;
  readonly name: string;
  readonly said: string;
}

/** Something the file asks for that a person does by hand: never counted as a change. */
export interface PendingForPerson {
  readonly kind: ChangeKind;
  readonly name: string;
  readonly said: string;
}

export interface VaultPlan {
  readonly vault: string;
  readonly changes: PlannedChange[];
  readonly pending: PendingForPerson[];
}

export interface ApplyResult {
  readonly dry_run: boolean;
  /** How many changes were made (or, in a dry run, would be). */
  readonly changes: number;
  readonly vaults: VaultPlan[];
  /** Signing secrets of the webhooks this apply added, shown once as `POST …/webhooks` shows one (none in a dry run). */
  readonly webhook_secrets: { vault: string; url: string; secret: Secret }[];
}

/** What the sections share while one vault is applied inside the transaction. */
export interface Applying {
  readonly d: Domain;
  readonly tx: Repos;
  readonly open: OpenVault;
  readonly vault: VaultRow;
  readonly spec: VaultCodeSpec;
  readonly plan: VaultPlan;
  readonly secrets: ApplyResult["webhook_secrets"];
  readonly now: number;
  change(action: PlannedChange["action"], kind: ChangeKind, name: string, said: string): void;
  pend(kind: ChangeKind, name: string, said: string): void;
}

/** One section of a vault (its services, its budgets, …) compared with the store and changed where it differs. */
export type Section = (a: Applying) => Promise<void>;
