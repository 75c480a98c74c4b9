// `broker master-password set|change|remove`: re-wrap the data key in the local store.
// Credential ciphertexts are never touched. Passwords come from BROKER_MASTER_PASSWORD (the
// current one), --password-stdin (one per line), or a prompt without echo.

import { defineCommand } from "citty";
import { loadConfig, takeMasterPassword } from "../../config.ts";
import { KeyringError } from "../../errors.ts";
import type { Secret } from "../../secret.ts";
import { openStore, type Store } from "../../store/index.ts";
import { changeMasterPassword, removeMasterPassword, setMasterPassword } from "../../crypto/index.ts";
import { CliFailure } from "../kit/index.ts";
import { promptHidden, promptNewPassword, readStdinLine } from "../kit/index.ts";

const sharedArgs = {
  "password-stdin": { type: "boolean", description: "Read passwords from standard input, one per line" },
  "data-dir": { type: "string", description: "Data directory (default: BROKER_DATA_DIR or ~/.broker)" },
} as const;

interface Sources {
  readonly fromStdin: boolean;
  readonly fromEnv: Secret | undefined;
}

async function currentPassword(src: Sources): Promise<Secret> {
  if (src.fromEnv) return src.fromEnv;
  return src.fromStdin ? readStdinLine("current master password") : promptHidden("Current master password: ");
}

async function newPassword(src: Sources): Promise<Secret> {
  const pw = src.fromStdin ? await readStdinLine("new master password") : await promptNewPassword("master password");
  if (pw.reveal().length < 8) throw new CliFailure("the master password must be at least 8 characters", "choose a longer password");
  return pw;
}

async function withStore(args: { "data-dir"?: string }, fn: (store: Store) => Promise<void>): Promise<void> {
  const env = args["data-dir"] ? { ...process.env, BROKER_DATA_DIR: args["data-dir"] } : process.env;
  const config = loadConfig(env);
  using store = await openStore(config);
  try {
    await fn(store);
  } catch (err) {
    if (err instanceof KeyringError) throw new CliFailure(err.message, err.hint);
    throw err;
  }
}

function sources(args: { "password-stdin"?: boolean }): Sources {
  return { fromStdin: Boolean(args["password-stdin"]), fromEnv: takeMasterPassword(process.env) };
}

export default defineCommand({
  meta: { name: "master-password", description: "Set, change or remove the master password that wraps the data key" },
  subCommands: {
    set: defineCommand({
      meta: { name: "set", description: "Protect a passwordless store with a master password" },
      args: sharedArgs,
      async run({ args }) {
        const src = sources(args);
        // For `set`, BROKER_MASTER_PASSWORD (if given) is the new password: the one the server will use.
        const next = src.fromEnv ?? (await newPassword(src));
        await withStore(args, (store) => setMasterPassword(store, next));
        console.log("Master password set. Start the server with BROKER_MASTER_PASSWORD, or on a terminal to be prompted.");
      },
    }),
    change: defineCommand({
      meta: { name: "change", description: "Replace the master password (current from BROKER_MASTER_PASSWORD, stdin or prompt)" },
      args: sharedArgs,
      async run({ args }) {
        const src = sources(args);
        const current = await currentPassword(src);
        const next = await newPassword(src);
        await withStore(args, (store) => changeMasterPassword(store, current, next));
        console.log("Master password changed. The old password no longer unlocks the store.");
      },
    }),
    remove: defineCommand({
      meta: { name: "remove", description: "Remove the master password (the data key is then stored unwrapped)" },
      args: sharedArgs,
      async run({ args }) {
        const src = sources(args);
        const current = await currentPassword(src);
        await withStore(args, (store) => removeMasterPassword(store, current));
        console.log("Master password removed. The store is now passwordless: protect the data directory's file permissions.");
      },
    }),
  },
});
