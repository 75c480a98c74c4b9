// The broker's HTTP API as an agent reaches it from `broker mcp`: the session token and address that
// `broker vault run` sets (never the person's own CLI login), X-Vault for agent tokens, and the error
// envelope kept whole so a tool can hand it to the model (message, code, proposal_hint).

export interface AgentEnv {
  readonly addr: string;
  readonly token: string;
  /** For agent tokens (av_agt_…), which name their vault with X-Vault on every call. */
  readonly vault?: string;
}

/** The environment's settings, or what is missing, in words. */
export function readAgentEnv(env: Record<string, string | undefined>): AgentEnv | string {
  const addr = env.BROKER_ADDR?.trim();
  const token = env.BROKER_SESSION_TOKEN?.trim();
  if (!addr || !token) return "broker mcp needs BROKER_ADDR and BROKER_SESSION_TOKEN, as `broker vault run -- broker mcp` sets them";
  if (!/^https?:\/\//.test(addr)) return "BROKER_ADDR must be the broker's http:// or https:// address";
  return { addr: addr.replace(/\/+$/, ""), token, vault: env.BROKER_VAULT?.trim() || undefined };
}

/** A broker answer that is not a success: the envelope as sent (never holds a credential value). */
export class BrokerApiError extends Error {
  constructor(
    readonly status: number,
    readonly envelope: Record<string, unknown>,
  ) {
    super(typeof envelope.message === "string" ? envelope.message : `HTTP ${status}`);
  }
}

export interface BrokerApi {
  json(method: string, path: string, body?: unknown): Promise<unknown>;
  text(path: string): Promise<string>;
}

export function brokerApi(env: AgentEnv): BrokerApi {
  const headers = (json: boolean): Record<string, string> => ({
    authorization: `Bearer ${env.token}`,
    ...(env.vault && env.token.startsWith("av_agt_") ? { "x-vault": env.vault } : {}),
    ...(json ? { "content-type": "application/json" } : {}),
  });
  async function call(method: string, path: string, body?: unknown): Promise<Response> {
    const res = await fetch(`${env.addr}${path}`, {
      method,
      headers: headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.ok) return res;
    const text = await res.text();
    let envelope: Record<string, unknown>;
    try {
      envelope = JSON.parse(text) as Record<string, unknown>;
    } catch {
      envelope = { error: "http_error", message: `the broker answered HTTP ${res.status}` };
    }
    throw new BrokerApiError(res.status, envelope);
  }
  return {
    json: async (method, path, body) => (await call(method, path, body)).json(),
    text: async (path) => (await call("GET", path)).text(),
  };
}
