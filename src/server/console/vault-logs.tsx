/** @jsxImportSource hono/jsx */
// `/vaults/:vault/logs`: the vault's audit log (listAuditLog, as GET /v1/vaults/:vault/logs) with
// filters, older/newer paging and readable times; `/vaults/:vault/logs/feed` is the JSON the live
// tail script (/assets/log-tail.js) polls with the page's session. Without the script, a refresh
// link does the same. Records hold names and numbers only, never a header value or credential.

import { Hono } from "hono";
import { BrokerError, InvalidRequest } from "../../errors.ts";
import { listAuditLog, verifyAuditChainOf, type AuditRecord, type AuditVerifyView } from "../../workflows/index.ts";
import { mayInVault, type OpenVault } from "../../identity/index.ts";
import { readInt } from "../routes/index.ts";
import { Badge, Button, EmptyState, formatTime, FormField, LinkButton, Name, Section, Table, Time, type BadgeTone } from "../ui/index.ts";
import { openConsoleVault, renderPage, requireSignedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { LOG_TAIL_SCRIPT } from "./log-tail-script.ts";
import { ErrorNote, wouldRefuseOf } from "./vault-policy-mode.tsx";

const PAGE_SIZE = 50;
/** How long the page waits for the chain's verification (kept per vault while its head stays; a long one finishes later). */
const VERIFY_WAIT_MS = 1500;

interface LogFilter {
  host?: string;
  status?: number;
  principal?: string;
  /** Only what report mode let through (`?would_refuse=1`). */
  wouldRefuse?: boolean;
}

/** The filter of the query string; a malformed status is a 400 the page explains. */
function readFilter(c: ConsoleContext): LogFilter {
  const host = c.req.query("host")?.trim() || undefined;
  const principal = c.req.query("who")?.trim() || undefined;
  const status = readInt(c.req.query("status")?.trim(), "status", 999);
  const marked = c.req.query("would_refuse");
  return { host, principal, status, ...(marked !== undefined && marked !== "" && marked !== "0" && { wouldRefuse: true }) };
}

function query(filter: LogFilter, extra: Record<string, string | number | undefined> = {}): string {
  const q = new URLSearchParams();
  if (filter.host) q.set("host", filter.host);
  if (filter.status !== undefined) q.set("status", String(filter.status));
  if (filter.principal) q.set("who", filter.principal);
  if (filter.wouldRefuse) q.set("would_refuse", "1");
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : "";
}

/** How the request reached the broker, in a person's words. */
export function viaText(ingress: string, contained = false): string {
  const via = ingress === "explicit" ? "via /proxy" : ingress === "transparent" ? "via HTTPS_PROXY" : ingress === "blind" ? "blind tunnel" : `via ${ingress}`;
  return contained ? `${via}, contained` : via;
}

/** How a request went: its ingress, who approved it when a rule held it for a person, and what its LLM call used. */
function howText(r: AuditRecord): string {
  const via = viaText(r.ingress, r.contained);
  const how = r.approved_by ? `${via}, approved by ${r.approved_by_name ?? r.approved_by}` : via;
  return r.llm ? `${how} · ${llmText(r.llm)}` : how;
}

/** "gpt-4o-mini: 1,200 in + 340 out tokens, 0.000384 USD" (cost per call is often below a cent). */
export function llmText(u: NonNullable<AuditRecord["llm"]>): string {
  const n = (v: number) => v.toLocaleString("en-US");
  const cost = u.cost === null ? "unpriced" : `${u.cost.toFixed(6).replace(/\.?0+$/, "")} ${u.currency}`;
  return `${u.model ?? "unknown model"}: ${n(u.input_tokens)} in + ${n(u.output_tokens)} out tokens, ${cost}`;
}

export function statusTone(status: number): BadgeTone {
  if (status >= 500) return "danger";
  if (status >= 400) return "warning";
  if (status >= 200 && status < 400) return "success";
  return "neutral";
}

/** The vault's hash chain as the broker verified it (docs/audit-chain.md): up to when it holds, or where it breaks. */
function ChainStatus(props: { result: AuditVerifyView | "pending" | "failed" }) {
  const r = props.result;
  if (r === "pending" || r === "failed")
    return (
      <p class="muted small" id="chain-status">
        {r === "pending"
          ? "Verifying this log's hash chain; refresh in a moment to see the result."
          : "This log's hash chain could not be verified just now (the database did not answer); refresh to try again."}
      </p>
    );
  if (!r.ok) {
    const first = r.breaks[0]!;
    return (
      <p class="small" id="chain-status" role="alert">
        <Badge tone="danger">Chain broken</Badge> The log was changed after it was written: {first.message}
        {r.breaks.length > 1 ? ` (and ${r.breaks.length - 1} more)` : ""}. <code>broker audit verify</code> names every break.
      </p>
    );
  }
  const checkpoints = `${r.checkpoints.checked} signed checkpoint${r.checkpoints.checked === 1 ? "" : "s"} checked`;
  return (
    <p class="muted small" id="chain-status">
      <Badge tone="success">Chain intact</Badge>{" "}
      {r.verified ? (
        <>
          Verified up to <Time iso={r.verified.time} /> (record {r.verified.seq}, {r.records} records); {checkpoints}.
        </>
      ) : (
        <>Nothing to verify yet; {checkpoints}.</>
      )}
      {r.unchained_before_chain ? ` ${r.unchained_before_chain} older records predate the chain and are not verified.` : ""}
    </p>
  );
}

/** The chain's verification, "pending" when it takes longer than the page waits, "failed" when it could not run. */
async function chainStatus(c: ConsoleContext, open: OpenVault): Promise<AuditVerifyView | "pending" | "failed"> {
  const run = verifyAuditChainOf(c.get("kit").d, open).catch((err: unknown) => {
    c.get("kit").log.warn("audit_verify_failed", { err, vault: open.vault.name });
    return "failed" as const;
  });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wait = new Promise<"pending">((resolve) => (timer = setTimeout(() => resolve("pending"), VERIFY_WAIT_MS)));
  try {
    return await Promise.race([run, wait]);
  } finally {
    clearTimeout(timer);
  }
}

/** One row as the tail script receives it: display text only, built by the same functions as the table. */
function feedRow(r: AuditRecord) {
  return {
    id: r.id,
    time: r.time,
    time_text: formatTime(r.time),
    who: r.principal_name,
    workload: r.workload?.subject ?? null,
    workload_issuer: r.workload?.issuer ?? null,
    who_kind: r.principal_kind,
    request: `${r.method} ${r.host}${r.path}`,
    via: howText(r),
    status: r.status,
    status_tone: statusTone(r.status),
    duration_ms: r.duration_ms,
    keys: r.credential_keys.join(", "),
    refs: r.credential_refs.join(", "),
    ...feedError(r.error),
  };
}

/** The error as the tail shows it: a record report mode let through gets its badge and words, as in the table. */
function feedError(error: string | null): { error: string; would_refuse?: string } {
  const marked = wouldRefuseOf(error);
  if (!marked) return { error: error ?? "" };
  return { error: `${marked.words} (report mode let it through)${marked.rest ? `; ${marked.rest}` : ""}`, would_refuse: marked.code };
}

function LogFilterForm(props: { filter: LogFilter; action: string }) {
  const f = props.filter;
  return (
    <form method="get" action={props.action} class="form-inline" id="log-filter" aria-label="Filter the log">
      <FormField label="Host" name="host" value={f.host} placeholder="api.example.com" autocomplete="off" hint="Exactly as shown in the Request column." />
      <FormField
        label="Who"
        name="who"
        id="f-who"
        value={f.principal}
        placeholder="agent name or email"
        autocomplete="off"
        hint="An agent's name or a person's email."
      />
      <FormField
        label="Status"
        name="status"
        type="number"
        value={f.status === undefined ? undefined : String(f.status)}
        placeholder="e.g. 403"
        hint="An HTTP status code."
      />
      <div class="field">
        <label class="choice" for="f-would-refuse">
          <input type="checkbox" name="would_refuse" id="f-would-refuse" value="1" checked={f.wouldRefuse === true} />
          <span>Only requests that would be refused (let through in report mode)</span>
        </label>
      </div>
      <div class="actions">
        <Button variant="primary">Filter</Button>
        {f.host || f.principal || f.status !== undefined || f.wouldRefuse ? <LinkButton href={props.action}>Clear</LinkButton> : null}
      </div>
    </form>
  );
}

function LogTable(props: { rows: readonly AuditRecord[] }) {
  return (
    <Table
      id="logs"
      rows={props.rows}
      columns={[
        { label: "Time", cell: (r) => <Time iso={r.time} /> },
        {
          label: "Who",
          cell: (r) => (
            <>
              {r.principal_name} <span class="muted small">{r.principal_kind === "unknown" ? "" : r.principal_kind === "user" ? "person" : "agent"}</span>
              {r.workload && (
                <div class="muted small" title={r.workload.issuer ?? undefined}>
                  workload <Name>{r.workload.subject}</Name>
                </div>
              )}
            </>
          ),
        },
        {
          label: "Request",
          cell: (r) => (
            <>
              <Name>{`${r.method} ${r.host}${r.path}`}</Name> <span class="muted small">{howText(r)}</span>
            </>
          ),
        },
        {
          label: "Status",
          cell: (r) => (
            <>
              <Badge tone={statusTone(r.status)}>{String(r.status)}</Badge>
              <ErrorNote error={r.error} />
            </>
          ),
        },
        { label: "Took", class: "num", cell: (r) => `${r.duration_ms} ms` },
        {
          label: "Credential",
          cell: (r) => (
            <>
              {r.credential_keys.length ? <Name>{r.credential_keys.join(", ")}</Name> : <span class="muted">none</span>}
              {r.credential_refs.length ? <span class="muted small"> {r.credential_refs.join(", ")}</span> : null}
            </>
          ),
        },
      ]}
    />
  );
}

async function renderLogs(c: ConsoleContext, open: OpenVault) {
  const base = vaultPath(open.vault.name, "logs");
  let filter: LogFilter = {};
  let filterError: string | undefined;
  try {
    filter = readFilter(c);
  } catch (err) {
    if (!(err instanceof InvalidRequest)) throw err;
    filterError = "Status must be a number such as 200 or 403.";
  }
  const before = readInt(c.req.query("before"), "before");
  const after = before === undefined ? readInt(c.req.query("after"), "after") : undefined;
  const [page, chain] = await Promise.all([listAuditLog(c.get("kit").d, open, { ...filter, before, after, limit: PAGE_SIZE + 1 }), chainStatus(c, open)]);
  // Newer pages come back oldest first; the table is always newest first.
  const rows = after === undefined ? page.logs : [...page.logs].reverse();
  const more = rows.length > PAGE_SIZE;
  const shown = after === undefined ? rows.slice(0, PAGE_SIZE) : rows.slice(-PAGE_SIZE);
  const hasOlder = after === undefined ? more : true;
  const hasNewer = before !== undefined || (after !== undefined && more);
  const live = before === undefined && after === undefined; // the tail prepends only on the newest page
  const newest = shown[0]?.id ?? 0;
  const filtered = Boolean(filter.host || filter.principal || filter.status !== undefined || filter.wouldRefuse);

  const empty = filtered ? (
    <EmptyState title="No records match this filter" action={<LinkButton href={base}>Show every record</LinkButton>}>
      <p>Nothing in this vault's log matches. Check the spelling of the host or name, or clear the filter.</p>
    </EmptyState>
  ) : (
    <EmptyState title="No requests yet">
      <p>
        Every request an agent makes through the broker for this vault (through <code>HTTPS_PROXY</code> or <code>/proxy</code>) appears here: who, which host,
        the status and which credential was used. Run an agent with <code>broker vault run</code> and its requests show up within seconds.
      </p>
    </EmptyState>
  );

  const body = (
    <>
      <Section title="Filter">
        {filterError ? (
          <p class="form-error" role="alert" id="filter-error">
            {filterError}
          </p>
        ) : null}
        <LogFilterForm filter={filter} action={base} />
      </Section>
      <Section title="Requests" id="requests">
        <ChainStatus result={chain} />
        <p class="muted small">
          Newest first; times in UTC.{" "}
          <span id="live-status" role="status" aria-live="polite" data-feed={live ? `${base}/feed${query(filter)}` : undefined} data-after={String(newest)}>
            {live ? (
              <>
                <a href={`${base}${query(filter)}`}>Refresh</a> to see new requests.
              </>
            ) : (
              <>An older page of the log.</>
            )}
          </span>
        </p>
        {shown.length ? <LogTable rows={shown} /> : empty}
        {hasOlder || hasNewer ? (
          <nav class="actions" aria-label="Log pages" id="log-pages">
            {hasNewer ? <LinkButton href={`${base}${query(filter, { after: newest })}`}>← Newer</LinkButton> : null}
            {hasNewer ? <LinkButton href={`${base}${query(filter)}`}>Newest</LinkButton> : null}
            {hasOlder && shown.length ? <LinkButton href={`${base}${query(filter, { before: shown.at(-1)!.id })}`}>Older →</LinkButton> : null}
          </nav>
        ) : null}
      </Section>
    </>
  );
  const vault = { name: open.vault.name, role: open.role, section: "logs" as const };
  return renderPage(
    c,
    {
      title: "Logs",
      nav: "vaults",
      vault,
      lead: "Every request made through the broker with this vault. No header values, bodies or query strings are recorded.",
      script: live ? "log-tail" : undefined,
      scripts: live,
      status: filterError ? 400 : 200,
    },
    body,
  );
}

export function vaultLogRoutes() {
  const r = new Hono<ConsoleEnv>();

  r.get("/vaults/:vault/logs", requireSignedIn, async (c) => {
    const open = await openConsoleVault(c, "read");
    if (!mayInVault(open.principal, open.role, "read_logs")) {
      const vault = { name: open.vault.name, role: open.role, section: "logs" as const };
      return renderPage(
        c,
        { title: "Logs", nav: "vaults", vault, status: 403 },
        <p id="message">Your role in this vault ({open.role}) does not show the log. Ask an admin of the vault for the member role.</p>,
      );
    }
    return renderLogs(c, open);
  });

  // The live tail's feed: records newer than `after`, oldest first, with the page's filter. JSON for our own script.
  r.get("/vaults/:vault/logs/feed", requireSignedIn, async (c) => {
    try {
      const open = await openConsoleVault(c, "read_logs");
      const page = await listAuditLog(c.get("kit").d, open, { ...readFilter(c), after: readInt(c.req.query("after"), "after") ?? 0, limit: 100 });
      return c.json({ logs: page.logs.map(feedRow) });
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return c.json({ error: err.code, message: err.message }, err.status as 400);
    }
  });

  return r;
}

/** The tail script, served like the stylesheet (script-src 'self'; no inline code anywhere). */
export function logTailAsset() {
  const r = new Hono();
  r.get("/log-tail.js", (c) => c.body(LOG_TAIL_SCRIPT, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600" }));
  return r;
}
