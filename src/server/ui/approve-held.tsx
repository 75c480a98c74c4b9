/** @jsxImportSource hono/jsx */
// The approval page of a held request (a service rule with "approve": "each"): for a signed-in admin or
// member of its vault, the request exactly as it will be sent (method, URL, headers without credentials,
// the body, laid out when it is JSON) with Approve and Deny; for anyone else a sign-in form and
// nothing of the request. Everything the agent wrote is rendered as escaped text (hono/jsx escapes).

import { layoutJson, type RequestApprovalView } from "../../workflows/index.ts";
import { ProviderSignIn, type SignInProvider } from "./sign-in-provider.tsx";
import { PageSignInForm, relativeTime, RequesterPrefix, Session, type Viewer } from "./approve.tsx";
import { Brand, Document } from "./document.tsx";

export type { Viewer as HeldViewer } from "./approve.tsx";

export interface HeldApprovalPageProps {
  /** Absent for a viewer who may not see it (signed out, or not an approver in its vault). */
  readonly request?: RequestApprovalView;
  readonly id: string;
  readonly viewer: Viewer;
  readonly now: number;
  readonly csrf: string;
  readonly notice?: string;
  readonly noticeKind?: "success" | "warning";
  readonly provider?: SignInProvider;
}

const STATE_TONE: Record<RequestApprovalView["state"], string> = {
  pending: "badge-warning",
  approved: "badge-success",
  used: "badge-info",
  denied: "badge-danger",
  expired: "badge",
};

/** What the state means for the agent, in words. */
export function stateWords(r: RequestApprovalView, now: number): string {
  switch (r.state) {
    case "pending":
      return `Waiting for a decision; the approval expires ${relativeTime(r.expires_at, now)}.`;
    case "approved":
      return `Approved by ${r.decided_by ?? "a person"}: the agent's next identical request will be sent once, until ${relativeTime(r.expires_at, now).replace(/^in /, "")} from now.`;
    case "used":
      return `Approved by ${r.decided_by ?? "a person"} and sent ${r.used_at ? relativeTime(r.used_at, now) : ""}. A repeat would need a new approval.`;
    case "denied":
      return `Denied by ${r.decided_by ?? "a person"}: the request was not sent, and the agent's identical retry is refused.`;
    case "expired":
      return "Expired: nobody decided in time (or the approval was not used), so nothing was sent.";
  }
}

/** A held WebSocket upgrade (the broker describes it with `upgrade: websocket`; an agent's own Upgrade header is never shown). */
export const isWebSocket = (r: RequestApprovalView) => r.headers.some(([n, v]) => n === "upgrade" && v === "websocket");

/**
 * A whole body for reading: laid out when it is JSON (every key, number and escape as sent), else the
 * text as sent; with a warning when an object names a key twice, since the service may read either.
 */
export function ReadableBody(props: { body: string; id?: string }) {
  const layout = layoutJson(props.body);
  const repeated = layout?.duplicateKeys ?? [];
  return (
    <>
      {repeated.length ? (
        <p class="warning" id="duplicate-keys">
          The body names{" "}
          {repeated.map((k, i) => (
            <>
              {i ? ", " : ""}
              <code>{k}</code>
            </>
          ))}{" "}
          more than once. Services differ in which value they use: read every one before you approve it.
        </p>
      ) : null}
      <pre class="note body-text" id={props.id}>
        {layout ? layout.text : props.body}
      </pre>
    </>
  );
}

function Body(props: { r: RequestApprovalView }) {
  const r = props.r;
  if (r.body === null)
    return (
      <p class="muted" id="body-none">
        {r.body_bytes > 0 ? `A body of ${r.body_bytes} bytes that is not text (not shown).` : "No body."}
      </p>
    );
  return (
    <>
      {r.body_truncated ? (
        <p class="warning" id="body-truncated">
          Showing the first {Buffer.byteLength(r.body)} of {r.body_bytes} bytes. The approval covers the whole body (SHA-256{" "}
          <code>{r.body_sha256.slice(0, 16)}…</code>).
        </p>
      ) : null}
      {r.body_truncated ? (
        <pre class="note body-text" id="body">
          {r.body}
        </pre>
      ) : (
        <ReadableBody body={r.body} id="body" />
      )}
    </>
  );
}

function TheRequest(props: { r: RequestApprovalView; now: number }) {
  const r = props.r;
  return (
    <>
      <p id="request-line" class="note">
        <strong>{r.method}</strong> <code>{r.url}</code>
      </p>
      {isWebSocket(r) ? (
        <p class="warning" id="websocket">
          This is a WebSocket upgrade: approving opens a two-way connection that stays open, and every message on it passes without another approval.
        </p>
      ) : null}
      <dl class="overview">
        <dt>Asked by</dt>
        <dd id="requester">
          <RequesterPrefix kind={r.requested_by_kind} />
          <strong>{r.requested_by_name}</strong> <span class="muted">{relativeTime(r.created_at, props.now)}</span>
        </dd>
        <dt>Service</dt>
        <dd>
          <code>{r.service}</code> <span class="muted">(the broker adds its credential itself; it is not shown)</span>
        </dd>
        <dt>Status</dt>
        <dd>
          <span class={`badge ${STATE_TONE[r.state]}`} id="state">
            {r.state}
          </span>{" "}
          <span id="state-words">{stateWords(r, props.now)}</span>
        </dd>
      </dl>
      <h2>Headers</h2>
      {r.headers.length ? (
        <div class="table-wrap">
          <table id="headers">
            <tbody>
              {r.headers.map(([name, value]) => (
                <tr>
                  <th scope="row">
                    <code>{name}</code>
                  </th>
                  <td>
                    <code>{value}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <p class="muted">None besides the credential.</p>
      )}
      <h2>Body</h2>
      <Body r={r} />
    </>
  );
}

function SignIn(props: { id: string; csrf: string; provider?: SignInProvider }) {
  return (
    <>
      <PageSignInForm action={`/approve/requests/${props.id}/login`} csrf={props.csrf} heading="Sign in to see the request and decide">
        Only a person who is an admin or member of the vault sees what the agent asks to send.
      </PageSignInForm>
      <ProviderSignIn provider={props.provider} returnTo={`/approve/requests/${props.id}`} />
    </>
  );
}

export function HeldApprovalPage(props: HeldApprovalPageProps) {
  const r = props.request;
  return (
    <Document title="Request awaiting approval">
      <Brand />
      <h1>
        {r ? (
          <>
            An agent asks to send this request in vault <code>{r.vault}</code>
          </>
        ) : (
          "A request awaiting approval"
        )}
      </h1>
      <Session viewer={props.viewer} csrf={props.csrf} />
      {props.notice ? (
        <p class={props.noticeKind === "success" ? "flash flash-success" : "warning"} id="notice" role="status">
          {props.notice}
        </p>
      ) : null}
      {r ? <TheRequest r={r} now={props.now} /> : null}
      {r && r.state === "pending" ? (
        <form method="post" action={`/approve/requests/${r.id}/decide`} class="actions" id="decide">
          <input type="hidden" name="csrf" value={props.csrf} />
          <p class="muted">Approve sends this exact request once (the agent retries it); any change to it needs a new approval.</p>
          <button type="submit" name="decision" value="allow" class="allow">
            Approve
          </button>
          <button type="submit" name="decision" value="deny" class="deny">
            Deny
          </button>
        </form>
      ) : null}
      {props.viewer.kind === "anonymous" ? <SignIn id={props.id} csrf={props.csrf} provider={props.provider} /> : null}
      {props.viewer.kind === "not-allowed" ? (
        <p class="warning" id="not-allowed">
          You are signed in as {props.viewer.email}, who cannot approve requests in this request's vault (or it does not exist).
        </p>
      ) : null}
    </Document>
  );
}
