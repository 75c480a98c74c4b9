/** @jsxImportSource hono/jsx */
// The human approval flow in the browser: GET /approve/:id?token= (read-only with the token),
// POST /approve/:id/login (sign in, returning to the page) and POST /approve/:id/decide (Approve or
// Deny, posted as decision=allow|deny, `approve` accepted too; with the rules boxes narrowing what each service asked for; a credential slot
// answered with a value or a reference into a secret store the vault may use). Forms carry a CSRF token matched against a SameSite=Strict cookie, and cross-site posts
// are refused by Origin / Sec-Fetch-Site. Only a user session of a vault admin or member decides.

import type { Context } from "hono";
import { Hono } from "hono";
import { BrokerError } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { parseWith, ProposalApprovalInput } from "../../contract/index.ts";
import type { Domain } from "../../identity/index.ts";
import { mayInVault, openVault, type Principal } from "../../identity/index.ts";
import {
  approvalWarnings,
  approveProposal,
  listSecretStores,
  proposalByApprovalToken,
  rejectProposal,
  requesterOf,
  servicesOfHosts,
  viewProposal,
} from "../../workflows/index.ts";
import { roleIn } from "../../identity/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { ApprovePage, MessagePage, type Viewer } from "../ui/index.ts";
import { readChosenRules, slotAnswers, typedRules } from "../ui/index.ts";
import { signInFromForm } from "../ui/index.ts";
import { assertSameOrigin, csrfToken, readForm, readSessionCookie, setPageHeaders } from "../ui/index.ts";
import { STYLESHEET } from "../ui/index.ts";
import { COPY_SCRIPT } from "../ui/index.ts";

async function viewerOf(c: Context, d: Domain, vaultId: number): Promise<{ viewer: Viewer; principal?: Principal }> {
  const token = readSessionCookie(c, d);
  if (!token) return { viewer: { kind: "anonymous" } };
  const principal = await d.auth.authenticate(token).catch(() => undefined);
  if (!principal || principal.kind !== "user") return { viewer: { kind: "anonymous" } };
  const vault = await d.store.vaults.byId(vaultId);
  const role = vault && (await roleIn(d.store, principal, vault));
  if (!role || !mayInVault(principal, role, "approve")) return { viewer: { kind: "not-allowed", email: principal.email }, principal };
  return { viewer: { kind: "approver", email: principal.email }, principal };
}

export function approveRoutes(d: Domain, log: Logger) {
  const r = new Hono<ApiEnv>();

  const invalidLink = (c: Context) => {
    setPageHeaders(c);
    return c.html(<MessagePage title="Link not valid" message="This approval link is invalid or has expired. Ask the agent for a new one." />, 404);
  };

  async function render(
    c: Context,
    id: number,
    token: string,
    notice?: string,
    status: 200 | 400 | 403 | 409 | 429 = 200,
    noticeKind: "success" | "warning" = "warning",
    typed?: Record<string, string>,
  ) {
    const found = await proposalByApprovalToken(d, id, token);
    if (!found) return invalidLink(c);
    const { viewer, principal } = await viewerOf(c, d, found.row.vaultId);
    const csrf = csrfToken(c, d);
    // An approver may answer a slot from a secret store the vault may use: its connections, by name.
    const connections =
      viewer.kind === "approver" && principal && found.row.status === "pending" && found.row.credentials.length
        ? (await listSecretStores(d, principal))
            .filter((s) => s.vault === found.vault.name || s.shared_with.includes(found.vault.name))
            .map((s) => s.name)
            .sort()
        : [];
    setPageHeaders(c);
    const props = {
      proposal: viewProposal(found.row, found.vault.name),
      requester: await requesterOf(d, found.row),
      now: d.now(),
      // Warnings compare with the vault as it is: once decided, "today" would be the proposal's own result.
      warnings: found.row.status === "pending" ? await approvalWarnings(d, found.row) : [],
      viewer,
      token,
      csrf,
      existingKeys: await d.store.credentials.keys(found.row.vaultId),
      // The vault's services for the proposal's hosts only: what its rules are shown beside.
      currentServices: await servicesOfHosts(
        d,
        found.row.vaultId,
        found.row.services.map((s) => s.host),
      ),
      typedRules: typed,
      notice,
      noticeKind,
      provider: d.oidc,
      connections,
    };
    return c.html(<ApprovePage {...props} />, status);
  }

  const idOf = (c: Context) => (/^\d{1,15}$/.test(c.req.param("id") ?? "") ? Number(c.req.param("id")) : -1);

  // Post-redirect-get: after a decision the browser lands on the page itself (a reload never re-posts),
  // which then says what happened from the proposal's own status.
  const decided = (c: Context, id: number, token: string) => c.redirect(`/approve/${id}?token=${encodeURIComponent(token)}&decided=1`, 303);
  const RESULT: Record<string, string> = {
    applied: "Approved. The agent will see the change on its next poll.",
    rejected: "Denied. The agent will be told on its next poll.",
  };

  r.get("/:id", async (c) => {
    const id = idOf(c);
    const token = c.req.query("token") ?? "";
    const found = c.req.query("decided") === "1" ? await proposalByApprovalToken(d, id, token) : undefined;
    const result = found ? RESULT[found.row.status] : undefined;
    return render(c, id, token, result, 200, result ? "success" : "warning");
  });

  r.post("/:id/login", async (c) => {
    const form = await readForm(c);
    const token = String(form.token ?? "");
    try {
      assertSameOrigin(c, d, form);
    } catch {
      return render(c, idOf(c), token, "The form was not submitted from this page; please try again.", 403);
    }
    if (!(await proposalByApprovalToken(d, idOf(c), token))) return invalidLink(c);
    const refused = await signInFromForm(c, d, form);
    if (refused) return render(c, idOf(c), token, refused.notice, refused.status);
    return c.redirect(`/approve/${idOf(c)}?token=${encodeURIComponent(token)}`, 303);
  });

  r.post("/:id/decide", async (c) => {
    const form = await readForm(c);
    const token = String(form.token ?? "");
    const id = idOf(c);
    try {
      assertSameOrigin(c, d, form);
    } catch {
      return render(c, id, token, "The form was not submitted from this page; nothing was changed.", 403);
    }
    const found = await proposalByApprovalToken(d, id, token);
    if (!found) return invalidLink(c);
    const { principal, viewer } = await viewerOf(c, d, found.row.vaultId);
    if (!principal || viewer.kind !== "approver") return render(c, id, token, "Only a signed-in admin or member of this vault can decide.", 403);
    const services = viewProposal(found.row, found.vault.name).services;
    try {
      if (form.decision === "allow" || form.decision === "approve") {
        // The API's own schema reads each slot's value or reference: one posted here gets exactly the checks of one posted as JSON.
        const { credentials: values } = parseWith(ProposalApprovalInput, { credentials: slotAnswers(form) });
        await approveProposal(d, await openVault(d, principal, found.vault.name, "approve"), found.row, values, { rules: readChosenRules(form, services) });
        log.info("proposal_applied", { proposal: id, vault: found.vault.name, by: principal.id });
        return decided(c, id, token);
      }
      if (form.decision === "deny") {
        await rejectProposal(d, await openVault(d, principal, found.vault.name, "approve"), found.row);
        log.info("proposal_rejected", { proposal: id, vault: found.vault.name, by: principal.id });
        return decided(c, id, token);
      }
      return render(c, id, token, "Choose Approve or Deny.", 400);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      // What was typed in the rules boxes comes back as typed; credential values never do.
      return render(c, id, token, err.message, err.status === 409 ? 409 : 400, "warning", typedRules(form, services));
    }
  });
  return r;
}

export function assetRoutes() {
  const r = new Hono();
  r.get("/broker.css", (c) => c.body(STYLESHEET, 200, { "content-type": "text/css; charset=utf-8", "cache-control": "public, max-age=3600" }));
  r.get("/copy.js", (c) => c.body(COPY_SCRIPT, 200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600" }));
  return r;
}
