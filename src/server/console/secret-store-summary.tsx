/** @jsxImportSource hono/jsx */
// A secret store connection in a few words, for its row in the table and its facts: where it points
// (the address, region, project or vault URL and their options) and how it signs in (the method and its
// non-secret fields). Never a secret: the view holds none.

import type { SecretStoreKind } from "../../store/index.ts";
import { Name } from "../ui/index.ts";
import { kindSpec, methodSpec, stringOf } from "./secret-store-kinds.ts";

/** Where a connection points, in a few words: the address, region, project or vault URL and their options. */
export function whereOf(kind: SecretStoreKind, settings: Record<string, unknown>): string {
  const s = (k: string) => stringOf(settings[k]);
  switch (kind) {
    case "vault":
      return [s("address"), s("namespace") && `namespace ${s("namespace")}`, s("mount") && `mount ${s("mount")}`].filter(Boolean).join(", ");
    case "aws":
      return [s("region"), s("endpoint")].filter(Boolean).join(", ");
    case "google":
      return [`project ${s("project") ?? ""}`, s("endpoint")].filter(Boolean).join(", ");
    case "azure":
      return s("vault_url") ?? "";
  }
}

/** The sign-in in words: the method and its non-secret fields (never a secret: the view holds none). */
export function AuthSummary(props: { kind: SecretStoreKind; auth: Record<string, unknown> }) {
  const method = methodSpec(kindSpec(props.kind), stringOf(props.auth.method));
  const shown = Object.entries(props.auth).filter(([k, v]) => k !== "method" && typeof v === "string");
  return (
    <>
      {method?.label ?? stringOf(props.auth.method) ?? "unknown"}
      {shown.map(([k, v]) => (
        <span class="small">
          {" "}
          · {labelOfAuth(props.kind, k)} <Name>{v as string}</Name>
        </span>
      ))}
    </>
  );
}

function labelOfAuth(kind: SecretStoreKind, name: string): string {
  if (name === "client_email") return "service account";
  const spec = kindSpec(kind)
    ?.methods.flatMap((m) => m.fields)
    .find((f) => f.name === name);
  return (spec?.label ?? name).replace(/ \(optional\)$/, "").toLowerCase();
}
