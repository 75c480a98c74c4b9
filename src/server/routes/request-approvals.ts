// /v1/vaults/:vault/request-approvals: requests a service rule held for a human ("approve": "each").
// Listing is for members and above, pending first; one approval is also readable by the principal
// whose request it is (the poll_url of its 428). Approve and deny: human user sessions only.

import { Hono } from "hono";
import type { Domain } from "../../identity/index.ts";
import { decideRequestApproval, listRequestApprovals, readRequestApproval, viewRequestApproval } from "../../workflows/index.ts";
import { PageAfterHeld, RequestApprovalAnswer, RequestApprovalList } from "../../contract/index.ts";
import { describe } from "../openapi/index.ts";
import { pageQueryDoc, readPageQuery, requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { openVaultFor } from "../kit/index.ts";

export function requestApprovalRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/request-approvals", requirePrincipal(d));
  r.use("/:vault/request-approvals/*", requirePrincipal(d));
  const tags = ["request approvals"];
  r.get(
    "/:vault/request-approvals",
    describe({
      summary: "Requests held for a person's approval, pending first",
      tags,
      auth: "bearer",
      who: "admins and members",
      query: pageQueryDoc("after"),
      success: { status: 200, schema: RequestApprovalList },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read_logs");
      return c.json(await listRequestApprovals(d, open, readPageQuery(c, PageAfterHeld)));
    },
  );
  r.get(
    "/:vault/request-approvals/:id",
    describe({
      summary: "One held request (its poll_url)",
      tags,
      auth: "bearer",
      who: "admins, members, and the principal whose request it is",
      success: { status: 200, schema: RequestApprovalAnswer },
    }),
    async (c) => {
      const open = await openVaultFor(d, c, "read");
      const row = await readRequestApproval(d, open, c.req.param("id"));
      return c.json(await viewRequestApproval(d, row, open.vault.name));
    },
  );
  for (const decision of ["approve", "deny"] as const) {
    const summary = decision === "approve" ? "Approve the held request: the agent's identical retry is sent once" : "Deny the held request";
    r.post(
      `/:vault/request-approvals/:id/${decision}`,
      describe({
        summary,
        tags,
        auth: "bearer",
        who: "human user sessions of admins and members; never agents or scoped sessions",
        success: { status: 200, schema: RequestApprovalAnswer },
        errors: [409],
      }),
      async (c) => {
        const open = await openVaultFor(d, c, "approve");
        return c.json(await decideRequestApproval(d, open, c.req.param("id"), decision));
      },
    );
  }
  return r;
}
