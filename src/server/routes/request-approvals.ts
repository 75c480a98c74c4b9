// /v1/vaults/:vault/request-approvals: requests a service rule held for a human ("approve": "each").
// Listing is for members and above, pending first; one approval is also readable by the principal
// whose request it is (the poll_url of its 428). Approve and deny: human user sessions only.

import { Hono } from "hono";
import type { Domain } from "../../vault/index.ts";
import { decideRequestApproval, listRequestApprovals, readRequestApproval, viewRequestApproval } from "../../vault/index.ts";
import { requirePrincipal } from "../auth.ts";
import type { ApiEnv } from "../env.ts";
import { openVaultFor } from "../request.ts";

export function requestApprovalRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/:vault/request-approvals", requirePrincipal(d));
  r.use("/:vault/request-approvals/*", requirePrincipal(d));
  r.get("/:vault/request-approvals", async (c) => {
    const open = await openVaultFor(d, c, "read_logs");
    return c.json({ request_approvals: await listRequestApprovals(d, open) });
  });
  r.get("/:vault/request-approvals/:id", async (c) => {
    const open = await openVaultFor(d, c, "read");
    const row = await readRequestApproval(d, open, c.req.param("id"));
    return c.json(await viewRequestApproval(d, row, open.vault.name));
  });
  for (const decision of ["approve", "deny"] as const) {
    r.post(`/:vault/request-approvals/:id/${decision}`, async (c) => {
      const open = await openVaultFor(d, c, "approve");
      return c.json(await decideRequestApproval(d, open, c.req.param("id"), decision));
    });
  }
  return r;
}
