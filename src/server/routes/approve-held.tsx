/** @jsxImportSource hono/jsx */
// The approval page of a held request: GET /approve/requests/:id (the request for a signed-in admin or
// member of its vault; a sign-in form for anyone else, who learns nothing of it), POST …/login and
// POST …/decide (Approve or Deny, posted as decision=allow|deny with `approve` accepted too, then post-redirect-get to the page, which says what happened). Forms
// carry a CSRF token and cross-site posts are refused, as on the proposal page; the decision goes
// through the same domain function as the API.

import type { Context } from "hono";
import { Hono } from "hono";
import { BrokerError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import type { Domain, OpenVault } from "../../identity/index.ts";
import { decideRequestApproval, readRequestApproval, viewRequestApproval } from "../../workflows/index.ts";
import { openVault } from "../../identity/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { HeldApprovalPage, type HeldViewer } from "../ui/index.ts";
import { signInFromForm } from "../ui/index.ts";
import { assertSameOrigin, csrfToken, readForm, readSessionCookie, setPageHeaders } from "../ui/index.ts";

const PUBLIC_ID = /^apr_[A-Za-z0-9_-]{16}$/;

/** Who is looking, and the vault opened for deciding when they may decide on request `id`. */
async function lookerOf(c: Context, d: Domain, id: string): Promise<{ viewer: HeldViewer; open?: OpenVault }> {
  const token = readSessionCookie(c, d);
  const principal = token ? await d.auth.authenticate(token).catch(() => undefined) : undefined;
  if (!principal || principal.kind !== "user") return { viewer: { kind: "anonymous" } };
  const refused = { viewer: { kind: "not-allowed", email: principal.email } as HeldViewer };
  const row = PUBLIC_ID.test(id) ? await d.store.requestApprovals.byPublicId(id) : undefined;
  const vault = row && (await d.store.vaults.byId(row.vaultId));
  if (!vault) return refused;
  const open = await openVault(d, principal, vault.name, "approve").catch(() => undefined);
  return open ? { viewer: { kind: "approver", email: principal.email }, open } : refused;
}

export function heldApprovalRoutes(d: Domain, log: Logger) {
  const r = new Hono<ApiEnv>();

  async function render(
    c: Context,
    id: string,
    notice?: string,
    noticeKind: "success" | "warning" = "warning",
    status: 200 | 400 | 403 | 404 | 409 | 429 = 200,
  ) {
    const { viewer, open } = await lookerOf(c, d, id);
    const request = open ? await viewRequestApproval(d, await readRequestApproval(d, open, id), open.vault.name) : undefined;
    setPageHeaders(c);
    const shown = viewer.kind === "not-allowed" && status === 200 ? 404 : status;
    return c.html(
      <HeldApprovalPage
        request={request}
        id={PUBLIC_ID.test(id) ? id : ""}
        viewer={viewer}
        now={d.now()}
        csrf={csrfToken(c, d)}
        notice={notice}
        noticeKind={noticeKind}
        provider={d.oidc}
      />,
      shown,
    );
  }

  const RESULT: Record<string, string> = {
    approved: "Approved. The agent's identical request will now be sent once.",
    denied: "Denied. The request was not sent; the agent is told when it retries.",
  };

  r.get("/:id", async (c) => {
    const id = c.req.param("id");
    if (c.req.query("decided") !== "1") return render(c, id);
    const { open } = await lookerOf(c, d, id);
    const row = open && (await readRequestApproval(d, open, id).catch(() => undefined));
    const result = row ? RESULT[row.state] : undefined;
    return render(c, id, result, result ? "success" : "warning");
  });

  r.post("/:id/login", async (c) => {
    const id = c.req.param("id");
    const form = await readForm(c);
    try {
      assertSameOrigin(c, d, form);
    } catch {
      return render(c, id, "The form was not submitted from this page; please try again.", "warning", 403);
    }
    const refused = await signInFromForm(c, d, form);
    if (refused) return render(c, id, refused.notice, "warning", refused.status);
    return c.redirect(`/approve/requests/${encodeURIComponent(id)}`, 303);
  });

  r.post("/:id/decide", async (c) => {
    const id = c.req.param("id");
    const form = await readForm(c);
    try {
      assertSameOrigin(c, d, form);
    } catch {
      return render(c, id, "The form was not submitted from this page; nothing was changed.", "warning", 403);
    }
    const { open } = await lookerOf(c, d, id);
    if (!open) return render(c, id, "Only a signed-in admin or member of this vault can decide.", "warning", 403);
    const decision = form.decision === "allow" || form.decision === "approve" ? "approve" : form.decision === "deny" ? "deny" : undefined;
    if (!decision) return render(c, id, "Choose Approve or Deny.", "warning", 400);
    try {
      await decideRequestApproval(d, open, id, decision);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return render(c, id, err.message, "warning", err.status === 409 ? 409 : 400);
    }
    log.info(decision === "approve" ? "request_approved" : "request_denied", { approval: id, vault: open.vault.name, by: open.principal.id });
    return c.redirect(`/approve/requests/${encodeURIComponent(id)}?decided=1`, 303);
  });
  return r;
}
