/** @jsxImportSource hono/jsx */
// The services table: each host, its template's words where it was made from one ("GitHub
// (api.github.com), read only"), how its credential is sent, its rules in words, and its state; a
// note where this release's catalogue has other rules for the chosen operations, with the button that
// applies them (for people who may write). Key names only, never a value.

import type { MintedState } from "../../egress/index.ts";
import type { ServiceView } from "../../workflows/index.ts";
import { authCell, AUTH_TYPE_LABELS, describeRulesInWords } from "../../words/index.ts";
import { Badge, Button, Name, PostForm, Table, Time } from "../ui/index.ts";
import { servicePath } from "./vault-service-paths.ts";
import { ReportBadge } from "./vault-policy-mode.tsx";

/** The keys a service's auth uses, then in words where they go (words/'s authCell); names set as code. */
function AuthSummary(props: { s: ServiceView }) {
  const { keys, detail } = authCell(props.s.auth);
  const words = detail.map((part) => (typeof part === "string" ? part : <Name>{part.name}</Name>));
  if (keys.length === 0) return <span class="muted">{words}</span>;
  return (
    <>
      {keys.map((k, i) => (
        <>
          {i ? " " : ""}
          <Name>{k}</Name>
        </>
      ))}
      {words.length ? <span class="muted small"> {words}</span> : null}
    </>
  );
}

/** A minted credential refused by its provider is the one thing here a person must act on. */
function MintedStatus(props: { state: MintedState | undefined }) {
  const st = props.state;
  if (!st) return null;
  if (st.kind === "refused") {
    return (
      <div class="small">
        <Badge tone="danger">refresh refused</Badge>{" "}
        <span class="muted">{st.reason}. Agents get an error until the service or one of its credentials changes.</span>
      </div>
    );
  }
  return (
    <div class="muted small">
      token until <Time iso={new Date(st.expiresAt).toISOString()} />
    </div>
  );
}

/** What the service is: the template's words, or the auth type; then its keys. */
function ServiceCell(props: { s: ServiceView }) {
  const { s } = props;
  return (
    <>
      {s.template ? (
        <div class="template-said">
          <strong>{s.template.said}</strong>
        </div>
      ) : null}
      <Badge>{AUTH_TYPE_LABELS[s.auth.type] ?? s.auth.type}</Badge> <AuthSummary s={s} />
    </>
  );
}

/** The rules in words, and the catalogue's where they differ (with the button that applies them). */
function RulesCell(props: { vault: string; vaultMode: string; s: ServiceView; canWrite: boolean }) {
  const { s } = props;
  const described = s.rules ? describeRulesInWords(s.rules) : <span class="muted">{describeRulesInWords(undefined)}</span>;
  const words = (
    <>
      {described}
      <ReportBadge service={s} vaultMode={props.vaultMode} />
    </>
  );
  const newer = s.template?.catalogue_rules;
  if (!newer) return words;
  const host = s.host;
  return (
    <>
      {words}
      <div class="catalogue-note" id={`catalogue-${host}`}>
        <p class="small">
          <Badge tone="warning">catalogue changed</Badge> This release's {s.template!.name} template allows instead: {describeRulesInWords(newer)}
        </p>
        {props.canWrite ? (
          <PostForm action={servicePath(props.vault, host, "catalogue")} class="inline-form">
            <Button small variant="secondary">
              Apply the catalogue's rules
            </Button>
          </PostForm>
        ) : null}
      </div>
    </>
  );
}

export function ServicesTable(props: {
  vault: string;
  /** The vault's policy mode: a service without its own rules mode follows it (report mode). */
  vaultMode: string;
  rows: ServiceView[];
  canWrite: boolean;
  empty: any;
  minted?: (host: string) => MintedState | undefined;
}) {
  const columns = [
    { label: "Host", cell: (s: ServiceView) => <Name>{s.host}</Name> },
    { label: "Service", cell: (s: ServiceView) => <ServiceCell s={s} /> },
    { label: "Allowed requests", cell: (s: ServiceView) => <RulesCell vault={props.vault} vaultMode={props.vaultMode} s={s} canWrite={props.canWrite} /> },
    { label: "Description", cell: (s: ServiceView) => (s.description ? s.description : <span class="muted">none</span>) },
    {
      label: "Status",
      cell: (s: ServiceView) => (
        <>
          <Badge tone={s.enabled ? "success" : "danger"}>{s.enabled ? "enabled" : "disabled"}</Badge>
          <MintedStatus state={props.minted?.(s.host)} />
        </>
      ),
    },
  ];
  if (props.canWrite) {
    columns.push({
      label: "",
      class: "actions-cell",
      cell: (s: ServiceView) => (
        <span class="row-actions">
          <a href={servicePath(props.vault, s.host, "edit")} class="btn btn-secondary btn-small" aria-label={`Edit ${s.host}`}>
            Edit
          </a>{" "}
          <PostForm action={servicePath(props.vault, s.host, s.enabled ? "disable" : "enable")} class="inline-form">
            <Button small variant={s.enabled ? "secondary" : "primary"}>
              {s.enabled ? "Disable" : "Enable"}
            </Button>
          </PostForm>
        </span>
      ),
    } as (typeof columns)[number]);
  }
  return <Table id="services" rows={props.rows} columns={columns} empty={props.empty} />;
}
