// The MCP server behind `broker mcp`: four tools and one resource for an agent, all through the
// broker's HTTP API with the agent's own session. There is no tool that reads a value or writes a
// credential or a service: such changes reach a vault only through a proposal a person approves.

import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { DiscoveryBody, RequestApprovalAnswerBody } from "../../contract/index.ts";
import { VERSION } from "../../version.ts";
import { BrokerApiError, type BrokerApi } from "./broker-api.ts";

/** A tool's answer: the JSON as text for any client, and as structured content for those that read it. */
function ok(value: unknown): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value, null, 2) }], structuredContent: value as Record<string, unknown> };
}

/** The broker's refusal as a tool error, its envelope whole (code, message, proposal_hint). */
async function guarded(run: () => Promise<unknown>): Promise<CallToolResult> {
  try {
    return ok(await run());
  } catch (err) {
    if (!(err instanceof BrokerApiError)) throw err;
    return { isError: true, content: [{ type: "text", text: JSON.stringify({ status: err.status, ...err.envelope }, null, 2) }] };
  }
}

const Auth = z
  .looseObject({ type: z.string() })
  .describe('how the broker adds the credential, e.g. {"type": "bearer", "token": "GITHUB_TOKEN"}; key names only, never values');
const ProposedService = z.object({
  host: z.string().describe("e.g. api.github.com (host:port when not 443; *.example.com for one sub-domain level)"),
  description: z.string().optional(),
  auth: Auth,
  rules: z
    .array(z.looseObject({ methods: z.array(z.string()), paths: z.array(z.string()) }))
    .optional()
    .describe("methods and paths to allow; leave out for everything"),
});
const Slot = z.object({
  key: z.string().describe("credential key name: A-Z, 0-9, _ (starting with a letter)"),
  description: z.string().optional(),
  obtain: z.string().optional().describe("https URL where a person creates the credential"),
  obtain_instructions: z.string().optional(),
});

export function createMcpServer(api: BrokerApi): McpServer {
  const server = new McpServer({ name: "broker", version: VERSION });

  server.registerTool(
    "discover",
    {
      title: "What the broker lets you reach",
      description:
        "Lists the hosts reachable through the credential broker (with how the credential is added and any rules on methods and paths) and the names of the credentials in your vault. Call it first. The broker adds credentials to your HTTPS requests itself; you never see or need a value.",
      annotations: { readOnlyHint: true },
    },
    () => guarded(() => api.json("GET", "/discover")),
  );

  server.registerTool(
    "propose_access",
    {
      title: "Ask a person for a host or credential",
      description:
        "Files a proposal: hosts (services) you need to reach and credential slots a person fills in. Returns an approval_url: give it to your person and wait (proposal_status). Use it after a 403 forbidden (its proposal_hint is a ready proposal) or a 403 request_not_allowed. Never put a credential value in it; nothing here writes a credential or a service directly.",
      inputSchema: {
        services: z.array(ProposedService).optional(),
        credentials: z.array(Slot).optional(),
        message: z.string().describe("for the person deciding: what you need and why"),
        user_message: z.string().optional(),
      },
    },
    (input) =>
      guarded(() =>
        api.json("POST", "/v1/proposals", {
          ...input,
          services: input.services?.map((s) => ({ action: "set", ...s })),
          credentials: input.credentials?.map((c) => ({ action: "set", ...c })),
        }),
      ),
  );

  server.registerTool(
    "proposal_status",
    {
      title: "Has the person decided?",
      description: "The status of a proposal you filed: pending, applied (retry your request), rejected or expired (tell your person; do not retry).",
      inputSchema: { id: z.number().int().positive().describe("the proposal's id, from propose_access") },
      annotations: { readOnlyHint: true },
    },
    ({ id }) => guarded(() => api.json("GET", `/v1/proposals/${id}`)),
  );

  server.registerTool(
    "request_approval_status",
    {
      title: "Has the person approved the held request?",
      description:
        "After a 428 approval_required (a rule asks a person to approve each such request), the state of that approval: pending, approved (send the identical request again now: it goes through once), denied (do not retry), used or expired.",
      inputSchema: {
        approval_id: z
          .string()
          .regex(/^apr_[A-Za-z0-9_-]{16}$/)
          .describe("the approval_id from the 428 answer"),
      },
      annotations: { readOnlyHint: true },
    },
    ({ approval_id }) =>
      guarded(async () => {
        const { vault } = (await api.json("GET", "/discover")) as DiscoveryBody;
        const view = (await api.json("GET", `/v1/vaults/${encodeURIComponent(vault)}/request-approvals/${approval_id}`)) as RequestApprovalAnswerBody;
        return {
          id: view.id,
          state: view.state,
          method: view.method,
          url: view.url,
          expires_at: view.expires_at,
          decided_by: view.decided_by,
          approval_url: view.approval_url,
        };
      }),
  );

  server.registerResource(
    "agent-guide",
    "broker://agent-guide",
    {
      title: "Using the credential broker",
      description: "How an agent calls APIs through the broker, and what to do on 403, 428 and other answers",
      mimeType: "text/markdown",
    },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/markdown", text: await api.text("/v1/skills/agent") }] }),
  );
  return server;
}
