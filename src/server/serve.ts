// Starts the API listener: opens the store, unlocks the keyring, binds Bun.serve to the Hono app.

import type { Config } from "../config.ts";
import type { Logger } from "../log.ts";
import type { Secret } from "../secret.ts";
import { openStore, type Store } from "../store/index.ts";
import { createAuthenticator, createHashGate, unlockKeyring } from "../vault/index.ts";
import { createApi } from "./app.ts";

export interface RunningServer {
  readonly apiUrl: string;
  readonly store: Store;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly config: Config;
  readonly log: Logger;
  readonly masterPassword: Secret | undefined;
  readonly now?: () => number;
}

export async function startServer(opts: StartOptions): Promise<RunningServer> {
  const { config, log } = opts;
  const now = opts.now ?? Date.now;
  const store = await openStore(config.dataDir);
  try {
    const keyring = await unlockKeyring(store, opts.masterPassword, { now });
    if (keyring.created) log.info("keyring_created", { mode: keyring.mode });
    if (keyring.passwordUnused) {
      log.warn("master_password_unused", { hint: "the store has no master password; run `broker master-password set` to add one" });
    }
    const hostPart = config.bindHost.includes(":") ? `[${config.bindHost}]` : config.bindHost;
    const domain = {
      store,
      dataKey: keyring.dataKey,
      auth: createAuthenticator(store, { now }),
      hashing: createHashGate({ concurrency: 2, queue: 64 }),
      now,
      publicUrl: config.publicUrl,
      proxyUrl: `http://${hostPart}:${config.proxyPort}`,
    };
    const api = createApi({ domain, log });
    const server = Bun.serve({ hostname: config.bindHost, port: config.apiPort, fetch: api.fetch, error: () => new Response("internal error", { status: 500 }) });
    const apiUrl = `http://${hostPart}:${server.port}`;
    log.info("listening", { api: apiUrl, data_dir: config.dataDir, keyring: keyring.mode });
    return {
      apiUrl,
      store,
      async stop() {
        await server.stop(true);
        store.close();
      },
    };
  } catch (err) {
    store.close();
    throw err;
  }
}
