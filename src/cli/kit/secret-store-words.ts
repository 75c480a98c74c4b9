// Secret store connections and references in words, for `broker secret-store`, `credential list` and
// `doctor`: which store, where, how the broker signs in (the auth's method and non-secret fields only:
// the broker never sends the secret ones back), and each reference's last read. Names, times and the
// broker's words; never a value.

import type { CredentialListBody, SecretStoreCheckBody, SecretStoreConnectionBody } from "../../contract/index.ts";
import { type Column, formatTime } from "./output.ts";

export type ReferenceState = SecretStoreCheckBody["references"][number]["reference"];
export type ConnectionReference = SecretStoreCheckBody["references"][number];
/** A credential as `credential list` has it (`reference` on a reference credential). */
export type ListedCredential = CredentialListBody["credentials"][number];

const KIND_WORDS: Record<string, string> = {
  vault: "HashiCorp Vault / OpenBao (KV v2)",
  aws: "AWS Secrets Manager",
  google: "Google Secret Manager",
  azure: "Azure Key Vault",
};

export function kindWords(kind: string): string {
  return KIND_WORDS[kind] ?? kind;
}

const text = (v: unknown) => (typeof v === "string" || typeof v === "number" ? String(v) : undefined);

/** Where the store is: the address, region, project or vault URL. */
export function storeWhere(c: Pick<SecretStoreConnectionBody, "kind" | "settings">): string {
  const s = c.settings;
  switch (c.kind) {
    case "vault":
      return `${text(s.address) ?? "?"}${s.namespace ? ` namespace ${text(s.namespace)}` : ""}, mount ${text(s.mount) ?? "secret"}`;
    case "aws":
      return `region ${text(s.region) ?? "?"}${s.endpoint ? ` at ${text(s.endpoint)}` : ""}`;
    case "google":
      return `project ${text(s.project) ?? "?"}${s.endpoint ? ` at ${text(s.endpoint)}` : ""}`;
    default:
      return text(s.vault_url) ?? "?";
  }
}

/** How the broker signs in, without a secret: `token`, `AppRole (mount approle)`, `jwt as role ci (token file /run/t)`. */
export function authWords(auth: Record<string, unknown>): string {
  const method = text(auth.method) ?? "?";
  const mount = auth.mount ? `, mount ${text(auth.mount)}` : "";
  switch (method) {
    case "token":
      return "a Vault token";
    case "approle":
      return `AppRole${mount}`;
    case "jwt":
    case "kubernetes":
      return `${method} login as role ${text(auth.role) ?? "?"} (token file ${text(auth.token_file) ?? "?"}${mount})`;
    case "keys":
      return "AWS access keys";
    case "environment":
      return "the broker's own AWS environment (keys or web identity)";
    case "service_account_key":
      return `service account ${text(auth.client_email) ?? "?"}`;
    case "client_credentials":
      return `client credentials of ${text(auth.client_id) ?? "?"} in tenant ${text(auth.tenant) ?? "?"}`;
    default:
      return method;
  }
}

/** Whose connection it is: `the owner's (shared with a, b)` or `vault v's own`. */
export function ownerWords(c: Pick<SecretStoreConnectionBody, "vault" | "shared_with">): string {
  if (c.vault) return `vault ${c.vault}'s own`;
  return `the owner's, ${c.shared_with.length ? `shared with ${c.shared_with.join(", ")}` : "shared with no vault yet"}`;
}

/** A reference's state in a word: ok, failed, or not read yet. */
export function referenceStatus(r: ReferenceState): "ok" | "failed" | "not read yet" {
  if (r.last_error !== null) return "failed";
  return r.last_refresh === null ? "not read yet" : "ok";
}

/** The version the store last answered with, or `-`. */
export function versionSeen(r: ReferenceState): string {
  return r.version_seen ?? "-";
}

/** The columns of a connection's references (show, check). */
export const REFERENCE_COLUMNS: readonly Column<ConnectionReference>[] = [
  { title: "STATUS", value: (r) => referenceStatus(r.reference) },
  { title: "VAULT", value: (r) => r.vault },
  { title: "KEY", value: (r) => r.key },
  { title: "REFERENCE", value: (r) => r.reference.text, max: 60 },
  { title: "LAST REFRESH", value: (r) => formatTime(r.reference.last_refresh) },
  { title: "VERSION SEEN", value: (r) => versionSeen(r.reference), max: 24 },
  { title: "LAST ERROR", value: (r) => r.reference.last_error ?? "-" },
];

/** `credential list`'s extra columns when a credential of the vault is a reference (a stored value shows `-`). */
export const CREDENTIAL_REFERENCE_COLUMNS: readonly Column<Pick<ListedCredential, "reference">>[] = [
  { title: "REFERENCE", value: (c) => c.reference?.text ?? "-", max: 60 },
  { title: "LAST REFRESH", value: (c) => (c.reference ? formatTime(c.reference.last_refresh) : "-") },
  { title: "VERSION SEEN", value: (c) => (c.reference ? versionSeen(c.reference) : "-"), max: 24 },
  { title: "LAST ERROR", value: (c) => c.reference?.last_error ?? "-" },
];

/** One line for a reference's last read, after it was set: `read now: version 3` or the error. */
export function firstReadWords(r: ReferenceState): string {
  if (r.last_error !== null) return `the first read failed: ${r.last_error}`;
  if (r.last_refresh === null) return "not read yet";
  return `read at ${formatTime(r.last_refresh)}${r.version_seen ? `, version ${r.version_seen}` : ""}`;
}
