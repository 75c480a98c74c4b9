/** @jsxImportSource hono/jsx */
// The web console, mounted at `/` by app.ts. Its middleware runs only on CONSOLE_PATHS, so the
// JSON API (/v1, /discover, /proxy, /approve, ...) is untouched; a JSON client asking a console
// path still gets the API's JSON 404. To add pages: write a `xxxRoutes()` returning
// Hono<ConsoleEnv> (see home.tsx, account.tsx) and mount it below, under one of CONSOLE_PATHS.

import { Hono } from "hono";
import type { Logger } from "../../log.ts";
import type { Domain } from "../../identity/index.ts";
import { accountRoutes } from "./account.tsx";
import { consoleContext, renderError, renderMessage, requireSignedIn, type ConsoleEnv } from "./context.tsx";
import { homeRoutes } from "./home.tsx";
import { vaultOverviewRoutes } from "./vault-overview.tsx";
import { signInRoutes } from "./sign-in.tsx";
import { instanceSettingsRoutes, type InstanceSettingsOptions } from "./instance-settings.tsx";
import { logTailAsset, vaultLogRoutes } from "./vault-logs.tsx";
import { vaultSettingsRoutes } from "./vault-settings.tsx";
import { vaultCredentialRoutes } from "./vault-credentials.tsx";
import { vaultServiceRoutes } from "./vault-services.tsx";
import { canConnect, vaultConnectRoutes } from "./vault-connect.tsx";
import type { ConnectDeps } from "../../workflows/index.ts";
import { agentPages } from "./vault-agents.tsx";
import { memberPages } from "./vault-members.tsx";
import { proposalPages } from "./vault-proposals.tsx";
import { heldRequestPages } from "./vault-held.tsx";
import { secretStoreRoutes } from "./secret-stores.tsx";
import { workloadIdentityRoutes } from "./workload-identity.tsx";

/** Every path the console answers (`/x/*` also matches `/x`). A new top-level page adds its prefix here. */
export const CONSOLE_PATHS = ["/", "/login", "/register", "/logout", "/account/*", "/vaults/*", "/settings/*", "/connect/*"] as const;

export interface ConsoleOptions extends InstanceSettingsOptions {
  /** Connecting accounts at templates' providers (BROKER_CONNECT_<ID>_*). */
  readonly connect?: ConnectDeps;
}

export function consoleRoutes(d: Domain, log: Logger, opts: ConsoleOptions = {}): Hono<ConsoleEnv> {
  const r = new Hono<ConsoleEnv>();
  r.onError((err, c) => renderError(c, err));
  const context = consoleContext(d, log, { connect: opts.connect });
  for (const path of CONSOLE_PATHS) r.use(path, context);

  r.route("/", signInRoutes());
  r.route("/", homeRoutes());
  r.route("/", vaultOverviewRoutes()); // /vaults/:vault, the dashboard
  r.route("/", accountRoutes());
  r.route("/", vaultCredentialRoutes());
  r.route("/", vaultServiceRoutes(opts.mintedState, canConnect));
  r.route("/", vaultConnectRoutes()); // /vaults/:vault/services/connect/:template and /connect/callback
  r.route("/", proposalPages());
  r.route("/", heldRequestPages());
  r.route("/", agentPages());
  r.route("/", memberPages());
  r.route("/", vaultLogRoutes());
  r.route("/", secretStoreRoutes()); // /settings/secret-stores and /vaults/:vault/settings/secret-stores
  r.route("/", workloadIdentityRoutes()); // /settings/workload-identity
  r.route("/", vaultSettingsRoutes());
  r.route("/", instanceSettingsRoutes(opts));
  r.route("/assets", logTailAsset()); // /assets/log-tail.js, beside the stylesheet
  // New page groups go above this line: the catch-all below answers any console path left over.
  for (const prefix of ["/account/*", "/vaults/*", "/settings/*"]) {
    r.get(prefix, requireSignedIn, (c) => renderMessage(c, "Not found", "There is no page at this address. Use the navigation above.", 404));
  }
  return r;
}
