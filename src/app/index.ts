// Composition: builds the whole broker (store, keyring, domain, egress core, API, transparent proxy),
// binds its listeners and owns its lifecycle (start, undo of a failed start, graceful stop). The only
// module that knows every other; the CLI's `server` command calls it.

export { startServer } from "./start.ts";
export type { RunningServer, StartOptions } from "./start-types.ts";
export { ListenFailed, type ListenSetting } from "./listen-error.ts";
export { serverCommand, superviseWorkers, type SupervisorOptions } from "./workers.ts";
export { joinSupervisor, NotAWorker, type SupervisorLink } from "./worker-link.ts";
export { DataDirBusy } from "./journal-lock.ts";
