// `broker server`: runs the broker in the foreground until SIGINT or SIGTERM.

import { defineCommand } from "citty";
import { loadConfig, SETTINGS, takeMasterPassword } from "../../config.ts";
import { RATE_LIMIT_SETTINGS } from "../../ratelimit/index.ts";
import { KeyringError } from "../../errors.ts";
import { createLogger } from "../../log.ts";
import { openStore } from "../../store/index.ts";
import { DataDirBusy, joinSupervisor, ListenFailed, NotAWorker, serverCommand, startServer, superviseWorkers, type SupervisorLink } from "../../app/index.ts";
import { keyringMode } from "../../crypto/index.ts";
import { CliFailure } from "../kit/index.ts";
import { addHelpFooter } from "../kit/index.ts";
import { promptHidden, stdinIsTerminal } from "../kit/index.ts";

const serverCli = defineCommand({
  meta: { name: "server", description: "Run the broker server (API, web console and proxy) in the foreground" },
  args: {
    workers: {
      type: "string",
      description: "Processes serving both ports together, sharing state through the store: a number, or auto (one per core); default 1 (BROKER_WORKERS)",
    },
  },
  async run({ args }) {
    if (args.workers !== undefined) process.env.BROKER_WORKERS = args.workers;
    const masterPassword = takeMasterPassword(process.env); // first: no later child may inherit it
    const config = loadConfig(process.env);
    const log = createLogger({ level: config.logLevel }, config.worker ? { worker: config.worker.id } : {});
    // The runtime prints a few warnings of its own (bun:sql retrying its LISTEN connection while the
    // database is away): keep the log one JSON object per line, as log collectors expect.
    console.warn = (...args: unknown[]) => log.warn("runtime_warning", { detail: args.map(String).join(" ").slice(0, 500) });
    for (const warning of config.warnings) log.warn("config_warning", { detail: warning });
    if (!isLoopback(config.bindHost) && !config.publicUrl?.startsWith("https://")) {
      // Session tokens and, on the approval page, passwords and credential values cross this listener.
      log.warn("api_exposed_without_tls", {
        detail: `the API listens on ${config.bindHost} over plain HTTP; put it behind a TLS-terminating proxy, set BROKER_PUBLIC_URL to its https:// address and BROKER_TRUSTED_PROXIES to the proxy's address`,
      });
    }

    let password = masterPassword;
    let supervisor: SupervisorLink | undefined;
    if (config.worker) {
      // A worker of `--workers N`: the supervisor says so (and gives the master password) on its standard input.
      supervisor = await joinSupervisor(config.worker).catch((err) => {
        throw err instanceof NotAWorker ? new CliFailure(`cannot start: ${err.message}`) : err;
      });
      password = supervisor.masterPassword ?? password;
    } else if (!password && stdinIsTerminal()) {
      using store = await openStore(config);
      if ((await keyringMode(store)) === "password") password = await promptHidden("Master password: ");
    }
    if (config.workers > 1 && !config.worker) {
      const code = await superviseWorkers({
        config,
        log,
        masterPassword: password,
        command: serverCommand(),
        onReady: ({ apiUrl, proxyAddress }) =>
          process.stderr.write(
            `broker ready with ${config.workers} workers: console at ${config.publicUrl ?? apiUrl}/${proxyAddress ? `, HTTPS_PROXY on ${proxyAddress}` : ""}\n`,
          ),
      }).catch((err) => {
        // A fixed port another process holds (perhaps another broker's workers): stop as a lone broker would.
        if (err instanceof ListenFailed) throw new CliFailure(`cannot start: ${err.message}`);
        throw err;
      });
      process.exit(code);
    }
    const server = await startServer({ config, log, masterPassword: password, tunnel: true }).catch((err) => {
      // A worker that cannot start lets go of its supervisor's pipe, or the read watching it would keep it running.
      supervisor?.close();
      if (err instanceof KeyringError) throw new CliFailure(`cannot start: ${err.message}`, err.hint);
      // Nothing is left listening (startServer undid its start): the process can exit non-zero.
      if (err instanceof ListenFailed || err instanceof DataDirBusy) throw new CliFailure(`cannot start: ${err.message}`);
      throw err;
    });
    // A worker tells its supervisor where it listens (app/workers.ts), whatever its log level prints.
    if (config.worker) process.send?.({ type: "listening", api: server.apiUrl, proxy: server.proxyAddress ?? null });
    // One line for the person at the terminal, beside the JSON log lines: where to go next (the supervisor's, for workers).
    const fresh = (await server.store.users.count()) === 0;
    const consoleUrl = `${config.publicUrl ?? server.apiUrl}/`;
    if (!config.worker)
      process.stderr.write(
        fresh
          ? `broker ready: open ${consoleUrl} to create the owner account (or: broker auth register --email you@example.com)\n`
          : `broker ready: console at ${consoleUrl}${server.proxyAddress ? `, HTTPS_PROXY on ${server.proxyAddress}` : ""}\n`,
      );
    await new Promise<void>((resolve, reject) => {
      let stopping = false;
      const shutdown = (signal: "SIGINT" | "SIGTERM") => {
        if (stopping && config.worker) {
          // A worker gets a signal twice when it was sent to the whole group (Ctrl-C, systemd's stop of the cgroup) and
          // the supervisor passes it on: the second is not a person's "now". The supervisor forces with SIGKILL.
          return;
        }
        if (stopping) {
          // The second signal: whoever sent it does not want to wait for the grace time.
          log.warn("shutdown_forced", { signal });
          process.exit(signal === "SIGINT" ? 130 : 143);
        }
        stopping = true;
        supervisor?.close();
        void server.stop({ graceMs: config.shutdownGraceMs, reason: signal }).then(resolve, reject);
      };
      process.on("SIGINT", () => shutdown("SIGINT"));
      process.on("SIGTERM", () => shutdown("SIGTERM"));
      // Its supervisor gone (killed outright), a worker stops as on SIGTERM rather than hold the ports as an orphan.
      void supervisor?.gone.then(() => {
        if (stopping) return;
        log.warn("supervisor_gone", { detail: "the supervisor of the workers is gone; this worker stops" });
        shutdown("SIGTERM");
      });
    });
  },
});

function isLoopback(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\./.test(host);
}

addHelpFooter(serverCli, () => {
  const all = [...SETTINGS, ...RATE_LIMIT_SETTINGS];
  const width = Math.max(...all.map((s) => s.name.length));
  const lines = all.map((s) => `  ${s.name.padEnd(width)}  ${s.description} (default: ${s.default})`);
  return `ENVIRONMENT\n\n${lines.join("\n")}`;
});

export default serverCli;
