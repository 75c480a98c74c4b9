// The agent protocol: GET /discover, proposals (/v1/proposals) and the agent guide
// (/v1/skills/agent). Approval by humans happens here (CLI) or on the /approve page.

import { Hono } from "hono";
import { InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import { describeAuthForAgent, describeRules } from "../../words/index.ts";
import { viewService } from "../../workflows/index.ts";
import { operationsOf, TEMPLATES } from "../../templates/index.ts";
import type { ServiceRow } from "../../store/index.ts";
import {
  approveProposal,
  createProposal,
  listProposals,
  readProposalFor,
  requesterOf,
  readProposalId,
  reissueApprovalLink,
  rejectProposal,
  viewProposal,
} from "../../workflows/index.ts";
import {
  Discovery,
  PageBeforeId,
  ProposalAnswer,
  ProposalApprovalInput,
  ProposalApprovalLink,
  ProposalCreated,
  ProposalInput,
  ProposalList,
} from "../../contract/index.ts";
import { pageQueryDoc, readPageQuery, requirePrincipal } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { jsonBody } from "../kit/index.ts";
import { describe } from "../openapi/index.ts";
import { openHeaderVault } from "../kit/index.ts";
import { AGENT_GUIDE } from "./agent-guide.ts";

export function discoverRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("/discover", requirePrincipal(d));
  r.get(
    "/discover",
    describe({
      summary: "What this session can reach: the vault's services and credential key names",
      tags: ["agents"],
      auth: "bearer",
      who: "any role, agents included (agent tokens send X-Vault)",
      success: { status: 200, schema: Discovery },
    }),
    async (c) => {
      const open = await openHeaderVault(d, c, "read");
      // Every service the session may reach: an agent's map of the vault, read whole on purpose.
      const services = await d.store.services.allOfVault(open.vault.id);
      return c.json({
        vault: open.vault.name,
        proxy_url: `${d.publicUrl}/proxy`,
        services: services
          .filter((s) => s.enabled)
          .map((s) => {
            // An agent learns what a service allows before it tries (absent: every method and path).
            const view = viewService(s);
            const template = view.template && {
              id: view.template.id,
              name: view.template.name,
              operations: [...view.template.operations],
              said: view.template.said,
            };
            return {
              host: s.host,
              description: s.description,
              auth: discoveredAuth(s),
              ...(view.rules && { rules: view.rules, allows: describeRules(view.rules) }),
              ...(template && { template }),
            };
          }),
        available_credentials: await d.store.credentials.keys(open.vault.id),
        templates: TEMPLATES.map((t) => ({ id: t.id, name: t.name, hosts: [...t.hosts], operations: operationsOf(t) })),
      });
    },
  );
  r.get(
    "/v1/skills/agent",
    describe({ summary: "The guide for agents (Markdown)", tags: ["agents"], auth: "none", success: { status: 200, contentType: "text/markdown" } }),
    (c) => c.body(AGENT_GUIDE.replaceAll("{base_url}", d.publicUrl), 200, { "content-type": "text/markdown; charset=utf-8" }),
  );
  return r;
}

/**
 * How a service's credential travels, for the agent: the type, where a URL credential goes (its
 * query parameter or path template, so the agent leaves it out and sends only its own path), a SigV4
 * service's region and service, and in `sent` what the agent must do, in words/'s words. Never the
 * key name or a value.
 */
function discoveredAuth(s: ServiceRow): Record<string, string> {
  const a = viewService(s).auth;
  // A URL credential whose row lost its place has nothing to tell.
  if ((a.type === "query" && !a.param) || (a.type === "path" && !a.template)) return { type: a.type };
  const sent = describeAuthForAgent(a);
  return {
    type: a.type,
    ...(a.type === "query" && { param: a.param! }),
    ...(a.type === "path" && { template: a.template! }),
    ...(a.type === "aws_sigv4" && { ...(a.region && { region: a.region }), ...(a.service && { service: a.service }) }),
    ...(sent && { sent }),
  };
}

/** Announcements arrive within milliseconds; a few seconds covers a slow one. */
const FRESHLY_DECIDED_MS = 5_000;

export function proposalRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));

  r.post(
    "/",
    describe({
      summary: "File a proposal: services and credential slots a human approves",
      tags: ["proposals"],
      auth: "bearer",
      who: "any role, agents included",
      success: { status: 201, schema: ProposalCreated },
      errors: [409],
    }),
    jsonBody(ProposalInput),
    async (c) => c.json(await createProposal(d, await openHeaderVault(d, c, "read"), c.req.valid("json")), 201),
  );

  r.get(
    "/",
    describe({
      summary: "The vault's proposals",
      tags: ["proposals"],
      auth: "bearer",
      who: "any role",
      query: { status: "pending, applied, rejected or expired", ...pageQueryDoc("before") },
      success: { status: 200, schema: ProposalList },
    }),
    async (c) => {
      const open = await openHeaderVault(d, c, "read");
      return c.json(await listProposals(d, open, c.req.query("status"), readPageQuery(c, PageBeforeId)));
    },
  );

  r.get(
    "/:id",
    describe({
      summary: "One proposal (agents poll it until it leaves pending)",
      tags: ["proposals"],
      auth: "bearer",
      who: "any role in its vault",
      success: { status: 200, schema: ProposalAnswer },
    }),
    async (c) => {
      const p = c.get("principal");
      const { row, open } = await readProposalFor(d, p, readProposalId(c.req.param("id")), c.req.header("x-vault"), "read");
      // Another instance may have applied it a moment ago, its announcement still on the way: an agent
      // that reads "applied" here must get the new service on its next request through this instance.
      // Only just after the decision, so polling an old proposal cannot keep flushing the caches.
      if (row.status === "applied" && row.decidedAt !== null && d.now() - row.decidedAt < FRESHLY_DECIDED_MS) d.onVaultChange?.(row.vaultId);
      // People see who asked, by name (`broker proposal show`); agents polling their proposal need not.
      const requester = p.kind === "user" ? await requesterOf(d, row) : undefined;
      return c.json({
        ...viewProposal(row, open.vault.name),
        ...(requester && { requested_by: requester.name, requested_by_kind: requester.kind, requested_by_role: requester.role }),
      });
    },
  );

  r.post(
    "/:id/approve",
    describe({
      summary: "Approve a proposal with the credential values (applied in one transaction)",
      tags: ["proposals"],
      auth: "bearer",
      who: "human user sessions of admins and members; never agents or scoped sessions",
      success: { status: 200, schema: ProposalAnswer },
      errors: [409],
    }),
    jsonBody(ProposalApprovalInput),
    async (c) => {
      const p = c.get("principal");
      const { row, open } = await readProposalFor(d, p, readProposalId(c.req.param("id")), c.req.header("x-vault"), "approve");
      const body = c.req.valid("json");
      await approveProposal(d, open, row, body.credentials, { rules: body.rules });
      return c.json(viewProposal((await d.store.proposals.byId(row.id))!, open.vault.name));
    },
  );

  r.post(
    "/:id/reject",
    describe({
      summary: "Reject a proposal",
      tags: ["proposals"],
      auth: "bearer",
      who: "human user sessions of admins and members",
      success: { status: 200, schema: ProposalAnswer },
      errors: [409],
    }),
    async (c) => {
      const p = c.get("principal");
      const { row, open } = await readProposalFor(d, p, readProposalId(c.req.param("id")), c.req.header("x-vault"), "approve");
      await rejectProposal(d, open, row);
      return c.json(viewProposal((await d.store.proposals.byId(row.id))!, open.vault.name));
    },
  );

  // A fresh approval link (the old one stops working), for a person who may decide the proposal.
  r.post(
    "/:id/approval-link",
    describe({
      summary: "A fresh approval link for a pending proposal (the old one stops working)",
      tags: ["proposals"],
      auth: "bearer",
      who: "human user sessions of admins and members",
      success: { status: 201, schema: ProposalApprovalLink },
      errors: [409],
    }),
    async (c) => {
      const { row, open } = await readProposalFor(d, c.get("principal"), readProposalId(c.req.param("id")), c.req.header("x-vault"), "approve");
      return c.json(await reissueApprovalLink(d, open, row), 201);
    },
  );
  return r;
}
