// `broker mcp`: an MCP server on stdio for an agent, run inside `broker vault run` so it holds only the
// run's scoped session (BROKER_ADDR, BROKER_SESSION_TOKEN), never the person's own login. Nothing but
// MCP messages goes to stdout; a missing setting is said on stderr with exit 2.

import { defineCommand } from "citty";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { brokerApi, readAgentEnv } from "../mcp/index.ts";
import { createMcpServer } from "../mcp/index.ts";

const command = defineCommand({
  meta: { name: "mcp", description: "Serve the broker to an agent over the Model Context Protocol (stdio); run it under `broker vault run`" },
  args: {},
  async run() {
    const env = readAgentEnv(process.env);
    if (typeof env === "string") throw new CliFailure(env, "configure your MCP client to start `broker vault run -- broker mcp`", 2);
    const server = createMcpServer(brokerApi(env));
    await server.connect(new StdioServerTransport());
    // Serve until the client closes stdin.
    await new Promise<void>((resolve) => process.stdin.once("close", resolve).once("end", resolve));
    await server.close();
  },
});

addHelpFooter(
  command,
  () => `TOOLS

  discover                  hosts and credential names this session can use (never values)
  propose_access            file a proposal for a person to approve (returns its approval_url)
  proposal_status           pending, applied, rejected or expired
  request_approval_status   the state of a request a rule held for a person (after a 428)

RESOURCE

  broker://agent-guide      how to call APIs through the broker

CONFIGURE YOUR MCP CLIENT

  Claude Code:     claude mcp add broker -- broker vault run -- broker mcp
  JSON (Claude Desktop, Cursor, …):
    {"mcpServers": {"broker": {"command": "broker", "args": ["vault", "run", "--", "broker", "mcp"]}}}

The server holds only the scoped session \`vault run\` mints (revoked when it exits); no tool reads a
credential's value or writes a credential or a service.`,
);

export default command;
