/** @jsxImportSource hono/jsx */
// Connecting an account at a template's provider: `/vaults/:vault/services/connect/:template` offers the
// template's operations and a "Connect with <name>" button (a CSRF-checked post that answers with a 303 to
// the provider), and `/connect/callback` is where the provider sends the browser back. The domain
// (workflows/connect.ts) decides every permission and writes everything; these pages only show which keys
// and which service were written. Never renders, logs or redirects with a token, code or verifier.

import { timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import { Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { BrokerError, InvalidRequest } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import { OPERATION_NAMES } from "../../templates/index.ts";
import { describeOperations, operationLines } from "../../words/index.ts";
import {
  beginConnect,
  completeConnect,
  CONNECT_CALLBACK_PATH,
  ConnectFailed,
  connectConfigured,
  describeConnect,
  type Connected,
  type ConnectOffer,
} from "../../workflows/index.ts";
import { clientIp, enforce } from "../kit/index.ts";
import { Button, LinkButton, Name, PostForm, Section } from "../ui/index.ts";
import { describeError, formOf, openConsoleVault, redirectWithFlash, renderPage, requireSignedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";

/** `/vaults/<vault>/services/connect/<template>`: the page that starts connecting an account. */
export function connectPath(vault: string, templateId: string): string {
  return `${vaultPath(vault, "services")}/connect/${encodeURIComponent(templateId)}`;
}

/** Whether this console offers "Connect" for `templateId`: the template has a connect flow and its provider is set up. */
export function canConnect(c: ConsoleContext, templateId: string): boolean {
  return connectConfigured(c.get("kit").connect, templateId);
}

/**
 * The browser that starts a flow must be the one that finishes it (RFC 6749 §10.12): the state also goes into a
 * short-lived cookie only the callback path sees. SameSite=Lax: the provider's redirect back is a cross-site
 * top-level navigation, which Strict would strip it from (as it strips the session cookie: the domain resumes
 * the session the flow was started from instead).
 */
function flowCookieName(d: Domain): string {
  return d.publicUrl.startsWith("https://") ? "__Secure-broker_connect" : "broker_connect";
}

function keepFlow(c: Context, d: Domain, state: string): void {
  setCookie(c, flowCookieName(d), state, {
    httpOnly: true,
    sameSite: "Lax",
    path: CONNECT_CALLBACK_PATH,
    maxAge: 600,
    secure: d.publicUrl.startsWith("https://"),
  });
}

function startedHere(c: Context, d: Domain): boolean {
  const held = getCookie(c, flowCookieName(d)) ?? "";
  const sent = new URL(c.req.url).searchParams.get("state") ?? "";
  deleteCookie(c, flowCookieName(d), { path: CONNECT_CALLBACK_PATH, secure: d.publicUrl.startsWith("https://") });
  return held.length > 0 && held.length === sent.length && timingSafeEqual(Buffer.from(held), Buffer.from(sent));
}

function ConnectForm(props: { vault: string; offer: ConnectOffer }) {
  const { offer } = props;
  const t = offer.template;
  const provider = new URL(offer.providerOrigin).host;
  return (
    <PostForm action={connectPath(props.vault, t.id)} id="connect-form" label={`Connect ${t.name}`}>
      <fieldset>
        <legend>What agents may do on {offer.host}</legend>
        {offer.operations.map((op) => (
          <label class="choice" for={`f-op-${op}`}>
            <input type="checkbox" name={`op_${op}`} id={`f-op-${op}`} checked={op === "read"} />
            <span>
              <strong>{op}</strong>: {t.operations[op]?.summary}
            </span>
          </label>
        ))}
      </fieldset>
      <p class="hint" id="connect-what">
        You sign in at <Name>{provider}</Name> and allow access. The broker keeps the refresh token {t.name} gives it, sealed in this vault as{" "}
        <Name>{offer.keys.refreshToken}</Name>, and makes a service for <Name>{offer.host}</Name> that obtains short-lived access tokens from it with this
        broker's own app (its client secret is set by whoever runs the broker and is never stored in a vault). Agents never see a token. The refresh token is a
        credential of this vault like any other: its members and admins can reveal, replace or delete it.
      </p>
      {offer.replacesService ? (
        <p class="warning" role="alert" id="replaces-service">
          This vault already has a service for <Name>{offer.host}</Name>: connecting replaces it.
        </p>
      ) : null}
      {offer.replacesKeys.length ? (
        <p class="warning" role="alert" id="replaces-keys">
          The vault already holds {offer.replacesKeys.join(", ")}: connecting replaces its value, for every service that uses it.
        </p>
      ) : null}
      {offer.replacedKeyHosts.length ? (
        <div class="warning" role="alert" id="replaced-key-hosts">
          <p>Check before you continue: the vault's other services send this key to these hosts today.</p>
          <ul>
            {offer.replacedKeyHosts.map((u) => (
              <li>
                <Name>{u.key}</Name> to <Name>{u.host}</Name>
              </li>
            ))}
          </ul>
          <p>
            After connecting they send your {t.name} account's refresh token instead: whoever runs those hosts receives it, and with it access to your account.
            Continue only if you trust them with it.
          </p>
          <label class="choice" for="f-confirm-key-hosts">
            <input type="checkbox" name="confirm_key_hosts" id="f-confirm-key-hosts" value="yes" required />
            <span>Yes, send the refresh token to {[...new Set(offer.replacedKeyHosts.map((u) => u.host))].join(", ")}</span>
          </label>
        </div>
      ) : null}
      <div class="actions">
        <Button variant="primary" id="connect-button">
          Connect with {t.name}
        </Button>
        <LinkButton href={vaultPath(props.vault, "services")}>Cancel</LinkButton>
      </div>
    </PostForm>
  );
}

async function renderConnect(c: ConsoleContext) {
  const { d, connect } = c.get("kit");
  const open = await openConsoleVault(c, "write_secrets");
  const offer = await describeConnect(d, connect, open, c.req.param("template") ?? "");
  const vault = open.vault.name;
  return renderPage(
    c,
    {
      title: `Connect ${offer.template.name}`,
      nav: "vaults",
      vault: { name: vault, role: open.role, section: "services" },
      lead: "Sign in at the provider instead of pasting a token: the broker keeps the refresh token in this vault, and agents never see a token.",
      // The form's post is answered with a 303 to the provider's sign-in page: form-action must allow it.
      formTargets: [offer.providerOrigin],
    },
    <Section title={`Connect your ${offer.template.name} account`} id="connect">
      <ConnectForm vault={vault} offer={offer} />
    </Section>,
  );
}

function renderConnected(c: ConsoleContext, done: Connected) {
  const t = done.template;
  const services = vaultPath(done.vault, "services");
  return renderPage(
    c,
    { title: `${t.name} connected`, lead: <Name>{done.host}</Name> },
    <Section title="Account connected" id="connected">
      <p id="message">
        Agents of the vault <Name>{done.vault}</Name> now reach <Name>{done.host}</Name> ({describeOperations(done.operations)}) with access tokens the broker
        obtains from your {t.name} account. The refresh token is sealed in the vault as <Name>{done.keys.refreshToken}</Name>: agents never see it or an access
        token, and the vault's members and admins can reveal it like any credential of the vault.
      </p>
      <ul class="small">
        {operationLines(t, done.operations).map((line) => (
          <li>{line}</li>
        ))}
      </ul>
      <div class="actions">
        <a href={services} class="btn btn-primary" id="open-services">
          Open the vault's services
        </a>
      </div>
    </Section>,
  );
}

function renderFailed(c: ConsoleContext, err: ConnectFailed) {
  const status = err.status === 403 ? 403 : 400;
  return renderPage(
    c,
    { title: err.provider ? `Could not connect ${err.provider}` : "Could not connect the account", status },
    <Section title="Nothing was connected" id="connect-failed">
      <p id="message">{describeError(err)}</p>
      <p class="hint">No credential or service was changed. Start again from the vault's services page.</p>
      <div class="actions">
        <LinkButton href="/">Back to the console</LinkButton>
      </div>
    </Section>,
  );
}

export function vaultConnectRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/services/connect/*", requireSignedIn);

  r.get("/vaults/:vault/services/connect/:template", (c) => renderConnect(c));

  r.post("/vaults/:vault/services/connect/:template", async (c) => {
    const { d, connect } = c.get("kit");
    const vault = c.req.param("vault") ?? "";
    try {
      const open = await openConsoleVault(c, "write_secrets");
      const form = formOf(c);
      const chosen = OPERATION_NAMES.filter((op) => form[`op_${op}`] === "on");
      const template = c.req.param("template") ?? "";
      const { url, state } = await beginConnect(d, connect, open, template, chosen, form.confirm_key_hosts === "yes");
      keepFlow(c, d, state);
      return c.redirect(url, 303);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      // Not confirmed: back to the page, which shows the hosts and the box to tick.
      const back =
        err instanceof InvalidRequest && err.field === "confirm_key_hosts" ? connectPath(vault, c.req.param("template") ?? "") : vaultPath(vault, "services");
      return redirectWithFlash(c, back, "error", describeError(err));
    }
  });

  // The provider's way back: anonymous as far as cookies go (a cross-site return leaves the Strict session
  // cookie behind), so it is rate limited per client address like the sign-in routes.
  r.get(CONNECT_CALLBACK_PATH, async (c) => {
    const { d, connect, log } = c.get("kit");
    if (d.rateLimiter) enforce(d.rateLimiter.check("AUTH", clientIp(c)));
    if (!startedHere(c, d)) {
      log.info("connect_rejected", { reason: "flow_not_started_in_this_browser" });
      return renderFailed(c, new ConnectFailed("bad_state", "this sign-in link was not started in this browser, or has already been used"));
    }
    try {
      const onReject = (reason: string, detail?: string) => log.info("connect_rejected", { reason, ...(detail && { detail }) });
      const done = await completeConnect(d, connect, new URL(c.req.url).searchParams, c.get("user")?.userId, onReject);
      log.info("account_connected", { vault: done.vault, template: done.template.id, host: done.host, operations: done.operations.join(" ") });
      return renderConnected(c, done);
    } catch (err) {
      if (err instanceof ConnectFailed) return renderFailed(c, err);
      throw err;
    }
  });

  return r;
}
