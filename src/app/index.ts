// (module index: describe this module)
export { startServer, type RunningServer, type StartOptions } from "./start.ts";
export { ListenFailed, type ListenSetting } from "./listen-error.ts";
