// The API server: Hono routes over Bun.serve. Never imports the tunnel.

export { createApi, type ApiDeps } from "./app.ts";
export { startServer, type RunningServer, type StartOptions, type TunnelContext, type TunnelStarter } from "./serve.ts";
export { ListenFailed, type ListenSetting } from "./listen-error.ts";
