// What a template is: a well-known API's hosts, how its credential is sent (one of the service auth
// types, with the credential key it suggests), where a person gets that credential, the provider's own
// page the auth details were taken from, and its operations: named sets of ordinary service rules
// ("read", "write", "destructive"), so "read-only GitHub" is one choice (architecture.md D23).

import type { ProposedAuth, ProposedRule } from "../store/index.ts";

/** The operation names every template may offer; `read` and `write` always, `destructive` where the API has one. */
export const OPERATION_NAMES = ["read", "write", "destructive"] as const;
export type OperationName = (typeof OPERATION_NAMES)[number];

/** What a template's `fill` may name: the host, or an auth field whose value is the person's own. */
export type FillField = "host" | "username" | "app_id" | "installation_id";

export interface Operation {
  /** What the operation lets an agent do, in a few words ("read repositories, issues and pull requests"). */
  readonly summary: string;
  /** The rules it adds: methods and paths, `approve: "each"` where a person should look at each request. */
  readonly rules: readonly ProposedRule[];
}

/** OAuth authorization code with PKCE, for templates whose provider lets a person connect an account. */
export interface ConnectFlow {
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  /** Scopes asked for per chosen operation (joined with spaces; none: the provider's default). */
  readonly scopes: Readonly<Partial<Record<OperationName, readonly string[]>>>;
  /** The provider's page documenting the flow. */
  readonly docs: string;
}

export interface Template {
  /** Stable id, lower-case letters, digits and '-' ("github", "openai"). */
  readonly id: string;
  /** As people call it ("GitHub", "OpenAI"). */
  readonly name: string;
  /** Host patterns served (the first is the service's host when a person does not pick another). */
  readonly hosts: readonly string[];
  /**
   * How the credential is sent, with the suggested credential key names in the key fields (`token`, or a
   * minted type's `client_id`, `private_key`, …): a service made from the template uses the keys the
   * person picks in their place.
   */
  readonly auth: ProposedAuth;
  /** The provider's documentation page the auth details (header, prefix, parameter) were taken from. */
  readonly docs: string;
  /** Where a person creates the credential (an https link). */
  readonly obtain: string;
  /**
   * Settings a person gives that are their own and no credential key: the host, or an auth field
   * (`username`, `app_id`, `installation_id`), with what belongs there. The template holds an example
   * in its place (`you@example.com`, `0`, `your-store.myshopify.com`) that must not be used as it is.
   */
  readonly fill?: Readonly<Partial<Record<FillField, string>>>;
  /** Named operations; `read` and `write` always present. */
  readonly operations: Readonly<Partial<Record<OperationName, Operation>>> & { readonly read: Operation; readonly write: Operation };
  /** Present when a person can connect an account in the browser instead of pasting a credential. */
  readonly connect?: ConnectFlow;
}
