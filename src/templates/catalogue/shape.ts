// What the catalogue's kinds share: the shape an entry is written in and small rule builders. The shape
// restates the parent's Template from the store's types, because a folder never imports its parent
// (architecture.md §2); templates/index.ts hands the entries out as Template, so the compiler checks
// the two agree wherever the catalogue is served.

import type { ProposedAuth, ProposedRule } from "../../store/index.ts";

/** One operation: a few words on what it lets an agent do, and its rules. */
export interface EntryOperation {
  readonly summary: string;
  readonly rules: readonly ProposedRule[];
}

/** A catalogue entry: Template's fields, as templates/template.ts documents them. */
export interface Entry {
  readonly id: string;
  readonly name: string;
  readonly hosts: readonly string[];
  readonly auth: ProposedAuth;
  readonly docs: string;
  readonly obtain: string;
  readonly fill?: Readonly<Partial<Record<"host" | "username" | "app_id" | "installation_id", string>>>;
  readonly operations: { readonly read: EntryOperation; readonly write: EntryOperation; readonly destructive?: EntryOperation };
  readonly connect?: {
    readonly authorizeUrl: string;
    readonly tokenUrl: string;
    readonly scopes: Readonly<Partial<Record<"read" | "write" | "destructive", readonly string[]>>>;
    readonly docs: string;
  };
}

export const READ = ["GET", "HEAD"] as const;
export const WRITE = ["POST", "PUT", "PATCH"] as const;
export const DELETE = ["DELETE"] as const;

/** A rule allowing `methods` on `paths`. */
export function allow(methods: readonly string[], paths: readonly string[]): ProposedRule {
  return { methods: [...methods], paths: [...paths] };
}

/**
 * A rule holding each matching request for a person. It allows what it matches too (held), and holds
 * even where another rule allows.
 */
export function approveEach(methods: readonly string[], paths: readonly string[]): ProposedRule {
  return { methods: [...methods], paths: [...paths], approve: "each" };
}
