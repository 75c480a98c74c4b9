// A listener that cannot bind, explained by the setting an operator changes to fix it. Start-up turns the
// runtime's socket error (EADDRINUSE, EACCES, EADDRNOTAVAIL…) into one of these so the process can exit
// with a sentence naming the variable and the port, instead of running on half-started.

export type ListenSetting = "BROKER_PORT" | "BROKER_PROXY_PORT";

export class ListenFailed extends Error {
  constructor(
    readonly setting: ListenSetting,
    readonly host: string,
    readonly port: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Runs `start`; a socket error from it becomes a ListenFailed, anything else passes through unchanged. */
export async function listenOrExplain<T>(setting: ListenSetting, host: string, port: number, start: () => T | Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code !== "string" || !/^E[A-Z]+$/.test(code)) throw err;
    throw new ListenFailed(setting, host, port, code, explain(setting, host, port, code, err instanceof Error ? err.message : String(err)));
  }
}

function explain(setting: ListenSetting, host: string, port: number, code: string, detail: string): string {
  switch (code) {
    case "EADDRINUSE":
      return `${setting} ${port} is already in use on ${host} (EADDRINUSE); choose another port or stop the other process`;
    case "EACCES":
      return `${setting} ${port} needs privileges this process lacks (EACCES); choose a port above 1023`;
    case "EADDRNOTAVAIL":
      return `BROKER_HOST ${host} is not an address of this machine (EADDRNOTAVAIL); use 127.0.0.1, 0.0.0.0 or one of its addresses`;
    default:
      return `${setting} ${port}: cannot listen on ${host} (${code}: ${detail})`;
  }
}
