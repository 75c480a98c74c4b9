/** @jsxImportSource hono/jsx */
// The secret store list pages (secret-stores.tsx routes them): where the owner's and a vault's pages
// live and what the viewer may do there, the connections as a table (where each points, how it signs
// in, who uses it, how its last reads went) and what an empty list says. The add form is in
// secret-store-add.tsx, one connection's page in secret-store-detail.tsx. Only names, addresses, times
// and the stores' errors in words are shown: a connection's secrets and the values it reads never
// reach a page.

import type { Child } from "hono/jsx";
import type { SecretStoreView } from "../../workflows/index.ts";
import { Badge, EmptyState, Name, Table, Time } from "../ui/index.ts";
import { plural } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { kindSpec } from "./secret-store-kinds.ts";
import { AuthSummary, whereOf } from "./secret-store-summary.tsx";

/** Where the pages live and what the viewer may do there: the owner's pages, or one vault's. */
export interface StoreScope {
  /** The list page (`/settings/secret-stores` or `/vaults/<v>/settings/secret-stores`). */
  readonly base: string;
  /** The vault of a vault's pages. */
  readonly vault?: string;
  /** May add a connection here (the owner; a vault's human admin for the vault's own). */
  readonly mayAdd: boolean;
  /** May change, check or remove `c` here. */
  readonly mayManage: (c: SecretStoreView) => boolean;
  /** The instance owner: shares the owner's connections with vaults. */
  readonly owner: boolean;
  /** The token files a JWT or Kubernetes sign-in may read (BROKER_SECRET_STORE_TOKEN_FILES). */
  readonly tokenFiles: readonly string[];
}

export const OWNER_BASE = "/settings/secret-stores";
export const vaultStoresBase = (vault: string) => `${vaultPath(vault, "settings")}/secret-stores`;

export function connectionPath(scope: StoreScope, name: string, action?: "settings" | "check" | "share" | "unshare" | "delete"): string {
  return `${scope.base}/${encodeURIComponent(name)}${action ? `/${action}` : ""}`;
}

/** Seconds as a person reads them: "5 minutes", "90 seconds", "1 hour". */
export function duration(seconds: number): string {
  if (seconds % 3600 === 0 && seconds > 0) return plural(seconds / 3600, "hour");
  if (seconds % 60 === 0 && seconds > 0) return plural(seconds / 60, "minute");
  return plural(seconds, "second");
}

export function Timing(props: { c: SecretStoreView }) {
  return (
    <>
      every {duration(props.c.refresh_seconds)}
      <span class="small muted"> · grace {props.c.grace_seconds === 0 ? "none (fails closed)" : duration(props.c.grace_seconds)}</span>
    </>
  );
}

export function Owner(props: { c: SecretStoreView; scope: StoreScope }) {
  const { c } = props;
  if (c.vault !== null)
    return (
      <>
        <Name>{c.vault}</Name> <span class="small muted">(its own)</span>
      </>
    );
  if (props.scope.vault !== undefined) return <span>shared by the owner</span>;
  if (c.shared_with.length === 0) return <span class="muted">no vault yet</span>;
  return (
    <>
      {c.shared_with.map((v, i) => (
        <>
          {i > 0 ? " " : ""}
          <Name>{v}</Name>
        </>
      ))}
    </>
  );
}

/** How the last reads went, in words: an error first, else when the store last answered. */
export function ReadStatus(props: { last_refresh: string | null; last_error: string | null; references?: number }) {
  if (props.last_error)
    return (
      <span class="read-error">
        <Badge tone="danger">error</Badge> {props.last_error}
      </span>
    );
  if (props.references === 0) return <span class="muted">nothing reads through it yet</span>;
  if (!props.last_refresh) return <span class="muted">not read yet</span>;
  return (
    <>
      <Badge tone="success">ok</Badge> read <Time iso={props.last_refresh} />
    </>
  );
}

export function ConnectionsTable(props: { scope: StoreScope; rows: readonly SecretStoreView[]; empty: Child }) {
  const { scope } = props;
  return (
    <Table
      id="secret-stores"
      rows={props.rows}
      empty={props.empty}
      columns={[
        {
          label: "Connection",
          cell: (c) => (
            <>
              <a href={connectionPath(scope, c.name)} class="strong-link" id={`store-${c.name}`}>
                <Name>{c.name}</Name>
              </a>
              <br />
              <span class="small muted">{kindSpec(c.kind)?.label ?? c.kind}</span>
            </>
          ),
        },
        {
          label: "Where",
          cell: (c) => (
            <>
              <span class="where">{whereOf(c.kind, c.settings)}</span>
              <br />
              <span class="small muted">
                <AuthSummary kind={c.kind} auth={c.auth} />
              </span>
            </>
          ),
        },
        { label: scope.vault === undefined ? "Vaults" : "Belongs to", cell: (c) => <Owner c={c} scope={scope} /> },
        { label: "Refresh", cell: (c) => <Timing c={c} /> },
        { label: "References", class: "num", cell: (c) => String(c.status.references) },
        { label: "Last read", cell: (c) => <ReadStatus {...c.status} /> },
      ]}
    />
  );
}

export function EmptyConnections(props: { scope: StoreScope }) {
  return (
    <EmptyState title="No connections yet">
      {props.scope.vault === undefined ? (
        <p>Add one below. Credentials then read their values from the store by reference, and a rotation there reaches requests by itself.</p>
      ) : props.scope.mayAdd ? (
        <p>The instance owner has shared none with this vault. Add one that only this vault uses below.</p>
      ) : (
        <p>The instance owner has shared none with this vault, and it has none of its own. An admin of the vault can add one.</p>
      )}
    </EmptyState>
  );
}
