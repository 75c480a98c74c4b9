/** @jsxImportSource hono/jsx */
// The "Notifications" section of `/vaults/:vault/settings`: the vault's proposal webhooks (listWebhooks,
// addWebhook, removeWebhook, as /v1/vaults/:vault/webhooks; human admins only, decided by the domain;
// the add form read by the API's WebhookInput).
// The signing secret appears in exactly one response, the no-store page answering the add post: never a
// flash, URL or log. Receiver URLs are shown masked (listWebhooks does it: Slack's webhook URLs are secrets).

import { Hono } from "hono";
import { parseWith, WebhookInput } from "../../contract/index.ts";
import { BrokerError, PermissionDenied } from "../../errors.ts";
import { addWebhook, DELIVERY_STATUS_WORDS, listWebhooks, removeWebhook, type WebhookView } from "../../workflows/index.ts";
import { type OpenVault } from "../../identity/index.ts";
import { Badge, ConfirmForm, FormField, LinkButton, Name, PostForm, Section, Table, Time, type BadgeTone } from "../ui/index.ts";
import {
  describeError,
  formOf,
  openConsoleVault,
  redirectWithFlash,
  renderPage,
  requireConfirmation,
  requireSignedIn,
  runAction,
  type ConsoleContext,
  type ConsoleEnv,
} from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { COPY_SCRIPT_NAME, CopyField, SubmitRow } from "./one-time-link.tsx";

const DESCRIPTION =
  "The broker tells a URL when an agent files a proposal and when one is approved, rejected or expires: names, hosts and key names, never a credential value.";

const TONE: Record<string, BadgeTone> = { delivered: "success", pending: "info", retrying: "warning", failed: "danger", blocked: "danger" };

const hooksPath = (vault: string) => `${vaultPath(vault, "settings")}/webhooks`;

function WebhookTable(props: { vault: string; hooks: readonly WebhookView[] }) {
  return (
    <Table
      id="webhooks"
      rows={props.hooks}
      empty={
        <p class="muted" id="webhooks-empty">
          No webhooks yet: nobody is told about new proposals except on the Proposals page.
        </p>
      }
      columns={[
        { label: "Receiver", cell: (w) => <Name>{w.url /* masked by listWebhooks */}</Name> },
        { label: "Format", cell: (w) => (w.format === "slack" ? "Slack" : "JSON") },
        {
          label: "Last delivery",
          cell: (w) => (
            <>
              <Badge tone={TONE[w.delivery.status] ?? "neutral"}>{DELIVERY_STATUS_WORDS[w.delivery.status] ?? w.delivery.status}</Badge>
              {w.delivery.event ? (
                <span class="small">
                  {" "}
                  {w.delivery.event}, <Time iso={w.delivery.at} />, {w.delivery.attempts === 1 ? "1 attempt" : `${w.delivery.attempts} attempts`}
                </span>
              ) : null}
              {w.delivery.error ? <p class="small muted">{w.delivery.error}</p> : null}
            </>
          ),
        },
        {
          label: "",
          class: "actions-cell",
          cell: (w) => (
            <details class="disclosure">
              <summary>Remove…</summary>
              <ConfirmForm action={`${hooksPath(props.vault)}/${w.id}/delete`} phrase={`webhook ${w.id}`} button="Remove webhook">
                <p class="small">The receiver gets no more events. Its secret stops being used.</p>
              </ConfirmForm>
            </details>
          ),
        },
      ]}
    />
  );
}

/** The section, for the settings page: the list and the add form for human admins, a note for everyone else. */
export async function renderNotifications(props: { c: ConsoleContext; open: OpenVault }) {
  let hooks: WebhookView[];
  try {
    hooks = await listWebhooks(props.c.get("kit").d, props.open);
  } catch (err) {
    if (!(err instanceof PermissionDenied)) throw err;
    return (
      <Section title="Notifications" id="notifications" description={DESCRIPTION}>
        <p class="muted" id="notifications-refused">
          Only a human admin of the vault can see and change where proposals are announced.
        </p>
      </Section>
    );
  }
  const vault = props.open.vault.name;
  return (
    <Section title="Notifications" id="notifications" description={DESCRIPTION}>
      <WebhookTable vault={vault} hooks={hooks} />
      <h3>Add a webhook</h3>
      <PostForm action={hooksPath(vault)} id="add-webhook" label="Add a webhook">
        <FormField
          label="Receiver URL"
          name="url"
          type="url"
          required
          maxlength={2048}
          autocomplete="off"
          placeholder="https://hooks.slack.com/services/…"
          hint="https:// (or http:// for a receiver on a private network the operator allowed)."
        />
        <div class="field">
          <label class="choice" for="f-slack">
            <input type="checkbox" name="slack" id="f-slack" />
            <span>Slack format: send a one-line message (a Slack incoming webhook) instead of the JSON event</span>
          </label>
        </div>
        <SubmitRow label="Add webhook" id="add-webhook-submit" />
      </PostForm>
    </Section>
  );
}

export function vaultWebhookRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.use("/vaults/:vault/settings/webhooks", requireSignedIn);
  r.use("/vaults/:vault/settings/webhooks/*", requireSignedIn);

  // The signing secret is shown once, in this answer only (no flash, no URL, no log).
  r.post("/vaults/:vault/settings/webhooks", async (c) => {
    const back = `${vaultPath(c.req.param("vault"), "settings")}#notifications`;
    const form = formOf(c);
    let open: OpenVault;
    let added: Awaited<ReturnType<typeof addWebhook>>;
    try {
      open = await openConsoleVault(c, "manage");
      added = await addWebhook(c.get("kit").d, open, parseWith(WebhookInput, { url: (form.url ?? "").trim(), slack: form.slack !== undefined }));
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      return redirectWithFlash(c, back, "error", describeError(err));
    }
    const { webhook, secret } = added;
    const body = (
      <Section title="Webhook added" id="webhook-added">
        <p>
          Proposal events of this vault now go to the receiver at <Name>{new URL(webhook.url).host}</Name> (
          {webhook.format === "slack" ? "Slack format" : "JSON events"}). Each request carries a <code>Broker-Signature</code> header: an HMAC-SHA256 of the
          timestamp and body, keyed with the secret below. Check it on the receiver (see the API documentation, section Webhooks).
        </p>
        {/* reveal: the admin who added the webhook sees its signing secret once */}
        <CopyField
          id="webhook-secret"
          label="Signing secret"
          value={secret.reveal()}
          hint="Shown only once: store it now. This page is the only place it appears."
        />
        <div class="actions">
          <LinkButton href={back} variant="primary">
            Done
          </LinkButton>
        </div>
      </Section>
    );
    const lead = <Badge tone="warning">shown once</Badge>;
    return renderPage(
      c,
      {
        title: "Webhook added",
        nav: "vaults",
        vault: { name: open.vault.name, role: open.role, section: "settings" },
        lead,
        scripts: true,
        script: COPY_SCRIPT_NAME,
      },
      body,
    );
  });

  r.post("/vaults/:vault/settings/webhooks/:id/delete", (c) => {
    const id = c.req.param("id");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "manage");
        requireConfirmation(c, `webhook ${id}`);
        await removeWebhook(c.get("kit").d, open, id);
      },
      success: `Webhook ${id} removed; it gets no more events.`,
      redirect: `${vaultPath(c.req.param("vault"), "settings")}#notifications`,
    });
  });
  return r;
}
