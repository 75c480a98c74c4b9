/** @jsxImportSource hono/jsx */
// `/vaults/:vault/requests`: requests a service rule held for a person ("approve": "each"), awaiting a
// decision first, each shown as it will be sent (method and URL, who asked, headers, the body), with
// Approve and Deny; then the decided ones. Members and admins read it (as the audit log); deciding goes
// through decideRequestApproval, so only a human admin or member decides, as on the API.

import { Hono } from "hono";
import { listRequestApprovals, decideRequestApproval, type RequestApprovalView } from "../../workflows/index.ts";
import { mayInVault, type OpenVault } from "../../identity/index.ts";
import { RequesterPrefix } from "../ui/index.ts";
import { isWebSocket, ReadableBody, stateWords } from "../ui/index.ts";
import { Badge, Button, EmptyState, Name, PostForm, Section, Table, Time, toneOf } from "../ui/index.ts";
import { openConsoleVault, renderPage, requireSignedIn, runAction, signedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { PageAfterHeld } from "../../contract/index.ts";
import { readPageQuery } from "../kit/index.ts";
import { CONSOLE_PAGE_SIZE, PageLinks } from "./page-links.tsx";

function vaultOf(open: OpenVault) {
  return { name: open.vault.name, role: open.role, section: "requests" as const };
}

/**
 * A card shows this much of a request's headers and of its body: the list stays light to load however
 * large the held requests are (the approval page shows one request whole).
 */
const CARD_CHARS = 2048;

/** Whether the card can show all there is to read before approving (else Approve is on the approval page only). */
const fitsCard = (r: RequestApprovalView) => !r.body_truncated && (r.body?.length ?? 0) <= CARD_CHARS && headerText(r).length <= CARD_CHARS;
const headerText = (r: RequestApprovalView) => r.headers.map(([n, v]) => `${n}: ${v}`).join("\n");
const cut = (text: string) => (text.length <= CARD_CHARS ? text : `${text.slice(0, CARD_CHARS)}\n…`);

function BodyOf(props: { r: RequestApprovalView }) {
  const r = props.r;
  if (r.body === null) return <p class="muted small">{r.body_bytes ? `A body of ${r.body_bytes} bytes that is not text (not shown).` : "No body."}</p>;
  return fitsCard(r) ? <ReadableBody body={r.body} /> : <pre class="note">{`${cut(r.body)} (${r.body_bytes} bytes in all)`}</pre>;
}

function Pending(props: { r: RequestApprovalView; vault: string; canDecide: boolean; now: number }) {
  const r = props.r;
  const action = (decision: "approve" | "deny") => `${vaultPath(props.vault, "requests")}/${r.id}/${decision}`;
  return (
    <article class="card" id={`request-${r.id}`}>
      <h3>
        <strong>{r.method}</strong> <Name>{r.url}</Name>
      </h3>
      {isWebSocket(r) ? (
        <p class="warning small">A WebSocket upgrade: approving opens a connection that stays open, every message on it unchecked by a person.</p>
      ) : null}
      <p class="small">
        Asked by <RequesterPrefix kind={r.requested_by_kind} />
        <strong>{r.requested_by_name}</strong> <Time iso={r.created_at} /> · {stateWords(r, props.now)}
      </p>
      {r.headers.length ? (
        <>
          <p class="small muted">Headers (the credential is added by the broker and not shown)</p>
          <pre class="note small">{cut(headerText(r))}</pre>
        </>
      ) : null}
      <p class="small muted">Body</p>
      <BodyOf r={r} />
      <div class="actions">
        {props.canDecide ? (
          <>
            {fitsCard(r) ? (
              <PostForm action={action("approve")}>
                <Button variant="primary">Approve</Button>
              </PostForm>
            ) : (
              <p class="warning small allow-elsewhere">Shown in part here: read it whole on its approval page, where you can approve it.</p>
            )}
            <PostForm action={action("deny")}>
              <Button>Deny</Button>
            </PostForm>
          </>
        ) : (
          <p class="muted small">Only a person who is an admin or member decides.</p>
        )}
        <a href={`/approve/requests/${r.id}`}>Open its approval page</a>
      </div>
    </article>
  );
}

async function renderRequests(c: ConsoleContext) {
  const d = c.get("kit").d;
  const open = await openConsoleVault(c, "read_logs");
  const { after } = readPageQuery(c, PageAfterHeld);
  const page = await listRequestApprovals(d, open, { limit: CONSOLE_PAGE_SIZE, after });
  const all = page.request_approvals;
  const pending = all.filter((r) => r.state === "pending");
  // The heading counts the whole vault's; a page shows CONSOLE_PAGE_SIZE of them, then the next page's link.
  const waiting = (await d.store.requestApprovals.countPending(open.vault.id, d.now())).vault;
  const canDecide = mayInVault(signedIn(c), open.role, "approve");
  const body = (
    <>
      {pending.length === 0 ? (
        after === undefined ? (
          <Section title="Waiting for a decision" id="pending">
            <EmptyState title="Nothing to decide">
              <p>
                A service rule with <code>approve</code> (for example <code>approve POST /v1/refunds</code>) holds each request it matches until a person
                approves that exact request here. Held requests show up in this list.
              </p>
            </EmptyState>
          </Section>
        ) : null
      ) : (
        <div id="pending">
          <h2 class="section-title">Waiting for a decision ({waiting})</h2>
          {pending.map((r) => (
            <Pending r={r} vault={open.vault.name} canDecide={canDecide} now={d.now()} />
          ))}
        </div>
      )}
      <Section title="History" id="history" description="Approved, sent, denied and expired requests, newest first (kept a day after they expire).">
        <Table
          id="history-table"
          rows={all.filter((r) => r.state !== "pending")}
          empty={<p class="muted">{page.next_cursor ? "On the next page: this one is full of requests awaiting a decision." : "None yet."}</p>}
          columns={[
            { label: "Request", cell: (r: RequestApprovalView) => <Name>{`${r.method} ${r.url}`}</Name> },
            {
              label: "From",
              cell: (r: RequestApprovalView) => (
                <>
                  <RequesterPrefix kind={r.requested_by_kind} />
                  {r.requested_by_name}
                </>
              ),
            },
            {
              label: "Outcome",
              cell: (r: RequestApprovalView) => (
                <>
                  <Badge tone={toneOf(r.state === "used" ? "applied" : r.state)}>{r.state === "used" ? "sent" : r.state}</Badge>
                  {r.decided_by ? <span class="small"> by {r.decided_by}</span> : null}
                </>
              ),
            },
            { label: "Asked", cell: (r: RequestApprovalView) => <Time iso={r.created_at} /> },
          ]}
        />
        <PageLinks
          id="request-pages"
          label="Request pages"
          base={vaultPath(open.vault.name, "requests")}
          param="after"
          next={page.next_cursor}
          later={after !== undefined}
        />
      </Section>
    </>
  );
  const lead =
    "Requests that a service's rules hold until a person approves them, one by one. Approve sends that exact request once; the agent never sees the credential.";
  return renderPage(c, { title: "Requests", nav: "vaults", vault: vaultOf(open), lead }, body);
}

export function heldRequestPages() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/requests/*", requireSignedIn);
  r.get("/vaults/:vault/requests", requireSignedIn, (c) => renderRequests(c));
  for (const decision of ["approve", "deny"] as const) {
    r.post(`/vaults/:vault/requests/:id/${decision}`, (c) => {
      const back = vaultPath(c.req.param("vault"), "requests");
      return runAction(c, {
        run: async () => {
          const open = await openConsoleVault(c, "approve");
          const view = await decideRequestApproval(c.get("kit").d, open, c.req.param("id"), decision);
          c.get("kit").log.info(decision === "approve" ? "request_approved" : "request_denied", { approval: view.id, by: signedIn(c).id, via: "console" });
          return view;
        },
        success: (v) =>
          decision === "approve"
            ? `Approved ${v.method} ${v.url}: the agent's identical request is sent once.`
            : `Denied ${v.method} ${v.url}: it was not sent.`,
        redirect: back,
      });
    });
  }
  return r;
}
