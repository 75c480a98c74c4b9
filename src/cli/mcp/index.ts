// The MCP server an agent runs (`broker mcp`): the broker's agent-facing API as MCP tools.

export { brokerApi } from "./broker-api.ts";
export { readAgentEnv } from "./broker-api.ts";
export { createMcpServer } from "./server.ts";
