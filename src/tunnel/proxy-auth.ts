// Proxy-Authorization for the CONNECT listener (architecture.md D7): `Basic base64(<token>:<vault>)`,
// which clients build from http://<token>:<vault>@host:port, or `Bearer <token>`. The header is
// hop-by-hop and never forwarded.

export interface ProxyCredentials {
  readonly token: string;
  readonly vault: string | undefined;
}

export function parseProxyAuthorization(header: string | undefined): ProxyCredentials | undefined {
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return { token: bearer[1]!, vault: undefined };
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  const user = decodeURIComponent(colon < 0 ? decoded : decoded.slice(0, colon));
  const pass = colon < 0 ? "" : decodeURIComponent(decoded.slice(colon + 1));
  if (!user) return undefined;
  return { token: user, vault: pass || undefined };
}
