// The CONNECT listener: proxy auth, TLS termination with minted leaves, HTTP/1.1 framing inside
// tunnels, blind tunnels. Never imports the server.

export { bindTunnelListener, startTunnelListener, type BoundTunnelListener, type TunnelListener } from "./listener.ts";
export type { TunnelDeps, TunnelLimits } from "./context.ts";
