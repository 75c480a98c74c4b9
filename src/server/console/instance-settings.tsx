/** @jsxImportSource hono/jsx */
// `/settings` (the instance owner only; getOwnerSettings refuses anyone else): allowed signup
// domains and rate limits (updateOwnerSettings, as PATCH /v1/owner/settings; read-only with the
// reason under BROKER_RATELIMIT_LOCK), audit retention (environment only, shown read-only), the audit
// log's signing key (its id and public half, with a Copy button), the LLM price table (instance-prices.tsx), and the
// root CA (instance-ca.tsx).
// Every refusal is the API's (the domain's, or its OwnerSettingsInput reading what is typed), so the
// page and the API agree.

import { Hono } from "hono";
import { OwnerSettingsInput, parseWith } from "../../contract/index.ts";
import { NotFound } from "../../errors.ts";
import type { RateLimitSettings, RateProfile } from "../../ratelimit/index.ts";
import { RATE_PROFILES } from "../../ratelimit/index.ts";
import { getOwnerSettings, requireOwner, rotateCa, updateOwnerSettings, type OwnerSettings } from "../../identity/index.ts";
import type { CaHolder } from "../../crypto/index.ts";
import type { MintedState } from "../../egress/index.ts";
import { Badge, Button, FormField, Name, PostForm, Section, Time } from "../ui/index.ts";
import { formOf, renderPage, requireConfirmation, requireSignedIn, runAction, signedIn, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { CaSection, fingerprintOf, ROTATE_PHRASE } from "./instance-ca.tsx";
import { COPY_SCRIPT_NAME } from "./one-time-link.tsx";
import type { AuditPublicKey } from "../../crypto/index.ts";
import { auditPublicKey, viewPrices, type AuditPublicKeyView } from "../../workflows/index.ts";
import { PricesSection, priceRoutes } from "./instance-prices.tsx";

/** Audit retention comes from the environment only (BROKER_AUDIT_RETENTION_DAYS, BROKER_AUDIT_MAX_ROWS). */
export interface AuditRetention {
  readonly days: number;
  readonly maxRows: number;
}

export interface InstanceSettingsOptions {
  readonly ca?: CaHolder;
  readonly auditRetention?: AuditRetention;
  /** A minted credential's state (refused, or valid until), for the services list. */
  readonly mintedState?: (vaultId: number, host: string) => MintedState | undefined;
  /** The audit log's signing key as this instance loaded it (absent: read from the store). */
  readonly auditKey?: AuditPublicKey;
}

type Tier = "auth" | "authed" | "proxy" | "global";

const TIERS: readonly { tier: Tier; name: string; what: string; knobs: readonly ("rps" | "burst" | "inflight")[] }[] = [
  { tier: "auth", name: "AUTH", what: "per client address: sign-in, registration, invite and approval pages", knobs: ["rps", "burst"] },
  { tier: "authed", name: "AUTHED", what: "per signed-in person or agent: the API and this console", knobs: ["rps", "burst"] },
  { tier: "proxy", name: "PROXY", what: "per agent and vault: /proxy and HTTPS_PROXY together", knobs: ["rps", "burst"] },
  { tier: "global", name: "GLOBAL", what: "the whole server: a backstop over everything", knobs: ["rps", "inflight"] },
];

const KNOB_LABEL = { rps: "Requests per second", burst: "Burst", inflight: "In flight at once" } as const;

const PROFILE_HELP: Record<RateProfile, string> = {
  default: "sized so an agent fanning out never waits",
  strict: "half the default numbers",
  loose: "twice the default numbers",
  off: "no limits at all (the numbers apply again with another profile)",
};

function knobValue(s: RateLimitSettings, tier: Tier, knob: string): number {
  return (s[tier] as unknown as Record<string, number>)[knob]!;
}

function DomainsForm(props: { domains: readonly string[] }) {
  return (
    <PostForm action="/settings/domains" id="allowed-domains" label="Allowed signup domains">
      <FormField
        label="Allowed email domains"
        name="allowed_domains"
        multiline
        value={props.domains.join("\n")}
        autocomplete="off"
        placeholder={"example.com\nexample.org"}
        hint="One per line. Empty: anyone may register. Applies to registration and to accepting a vault invite; you, the owner, are exempt."
      />
      <div class="actions">
        <Button variant="primary">Save domains</Button>
      </div>
    </PostForm>
  );
}

function RateLimitTable(props: { s: RateLimitSettings }) {
  return (
    <div class="table-wrap">
      <table class="table" id="rate-limits-table">
        <caption>
          Profile {props.s.profile}: {PROFILE_HELP[props.s.profile]}.
        </caption>
        <thead>
          <tr>
            <th scope="col">Tier</th>
            <th scope="col">Applies</th>
            <th scope="col" class="num">
              Requests per second
            </th>
            <th scope="col" class="num">
              Burst or in flight
            </th>
          </tr>
        </thead>
        <tbody>
          {TIERS.map((t) => (
            <tr>
              <td data-label="Tier">
                <span class="cell">
                  <code>{t.name}</code>
                </span>
              </td>
              <td data-label="Applies">
                <span class="cell">{t.what}</span>
              </td>
              <td data-label="Requests per second" class="num">
                <span class="cell">{String(knobValue(props.s, t.tier, "rps"))}</span>
              </td>
              <td data-label="Burst or in flight" class="num">
                <span class="cell">{String(knobValue(props.s, t.tier, t.knobs[1]!))}</span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function RateLimitForm(props: { s: RateLimitSettings }) {
  const s = props.s;
  return (
    <PostForm action="/settings/rate-limits" id="rate-limits" label="Rate limits">
      <div class="field">
        <label for="f-profile">Profile</label>
        <select id="f-profile" name="profile" aria-describedby="f-profile-hint">
          {RATE_PROFILES.map((p) => (
            <option value={p} selected={p === s.profile}>{`${p}: ${PROFILE_HELP[p]}`}</option>
          ))}
        </select>
        <p class="hint" id="f-profile-hint">
          Another profile starts from its own numbers; a number you change in the same save replaces that one value.
        </p>
      </div>
      {TIERS.map((t) => (
        <fieldset>
          <legend>
            {t.name} <span class="muted small">{t.what}</span>
          </legend>
          <div class="form-inline">
            {t.knobs.map((k) => (
              <div class="field">
                <label for={`f-${t.tier}-${k}`}>{KNOB_LABEL[k]}</label>
                <input
                  type="number"
                  id={`f-${t.tier}-${k}`}
                  name={`${t.tier}.${k}`}
                  value={String(knobValue(s, t.tier, k))}
                  min={k === "rps" ? "0.001" : "1"}
                  step={k === "rps" ? "any" : "1"}
                  required
                />
              </div>
            ))}
          </div>
        </fieldset>
      ))}
      <div class="actions">
        <Button variant="primary">Save rate limits</Button>
      </div>
    </PostForm>
  );
}

function RateLimitSection(props: { s: RateLimitSettings | undefined }) {
  const s = props.s;
  if (!s) {
    return (
      <Section title="Rate limits" id="rate">
        <p class="muted">Rate limiting is not configured on this server.</p>
      </Section>
    );
  }
  return (
    <Section title="Rate limits" id="rate" description="Requests over a limit get 429 with Retry-After. Changes apply at once and are kept across restarts.">
      {s.locked ? (
        <>
          <p class="warning" id="rate-locked">
            <Badge tone="warning">read-only</Badge> These limits are pinned to the server's environment by <code>BROKER_RATELIMIT_LOCK=true</code>, so they
            cannot be changed here or through the API. To change them, set <code>BROKER_RATELIMIT_PROFILE</code> or the{" "}
            <code>BROKER_RATELIMIT_&lt;TIER&gt;_&lt;KNOB&gt;</code> variables and restart the broker.
          </p>
          <RateLimitTable s={s} />
        </>
      ) : (
        <RateLimitForm s={s} />
      )}
    </Section>
  );
}

function RetentionSection(props: { retention: AuditRetention | undefined }) {
  const r = props.retention;
  return (
    <Section
      title="Audit log retention"
      id="retention"
      description="How long each vault's request log is kept. Set by the server's environment; restart the broker to change it."
    >
      {r ? (
        <dl class="overview" id="retention-facts">
          <dt>Kept for</dt>
          <dd>
            {r.days} {r.days === 1 ? "day" : "days"}{" "}
            <span class="muted small">
              (<code>BROKER_AUDIT_RETENTION_DAYS</code>)
            </span>
          </dd>
          <dt>At most</dt>
          <dd>
            {r.maxRows.toLocaleString("en-US")} records in all{" "}
            <span class="muted small">
              (<code>BROKER_AUDIT_MAX_ROWS</code>)
            </span>
          </dd>
        </dl>
      ) : (
        <p class="muted">
          Set by <code>BROKER_AUDIT_RETENTION_DAYS</code> (default 30 days) and <code>BROKER_AUDIT_MAX_ROWS</code>.
        </p>
      )}
    </Section>
  );
}

/** The Ed25519 key that signs the audit chains' checkpoints: its id and public half, to hand to whoever verifies an export. */
function AuditKeySection(props: { auditKey: AuditPublicKeyView | undefined }) {
  const k = props.auditKey;
  return (
    <Section
      title="Audit log signing key"
      id="audit-key"
      description="Every vault's audit log is a hash chain, and the broker signs checkpoints of the chains with this key. Anyone with the public key can check an exported log: nothing was changed, removed or inserted after it was signed. The private key is sealed with the data key and never leaves the broker."
    >
      {k ? (
        <>
          <dl class="overview" id="audit-key-facts">
            <dt>Key id</dt>
            <dd>
              <Name>{k.key_id}</Name>
            </dd>
            <dt>Created</dt>
            <dd>
              <Time iso={k.created_at} />
            </dd>
          </dl>
          <div class="field copy-field">
            <label for="audit-public-key">Public key (Ed25519, PEM)</label>
            <textarea id="audit-public-key" readonly rows={3} spellcheck={false} aria-describedby="audit-public-key-hint">
              {k.public_key_pem}
            </textarea>
            <div class="actions copy-actions">
              <button type="button" class="btn btn-secondary" data-copy="audit-public-key" hidden>
                Copy
              </button>
            </div>
            <p class="hint" id="audit-public-key-hint">
              Save it as a file for <code>broker audit verify --public-key FILE</code>. It is also served, without signing in, at{" "}
              <a href="/v1/audit/public-key">
                <code>/v1/audit/public-key</code>
              </a>
              .
            </p>
          </div>
        </>
      ) : (
        <p class="muted">The key is made on the server's first start.</p>
      )}
    </Section>
  );
}

async function renderInstanceSettings(c: ConsoleContext, opts: InstanceSettingsOptions, settings: OwnerSettings) {
  const ca = opts.ca?.current;
  const auditKey = await auditPublicKey(c.get("kit").d, opts.auditKey).catch((err: unknown) => {
    if (err instanceof NotFound) return undefined;
    throw err;
  });
  const body = (
    <>
      <Section title="Who may sign up" id="signup" description="Limit registration to people with an email address at your organisation's domains.">
        <DomainsForm domains={settings.allowed_domains} />
      </Section>
      <RateLimitSection s={settings.rate_limits} />
      <RetentionSection retention={opts.auditRetention} />
      <AuditKeySection auditKey={auditKey} />
      <PricesSection prices={c.get("kit").d.prices ? viewPrices(c.get("kit").d) : undefined} />
      <CaSection ca={ca} fingerprint={ca ? await fingerprintOf(ca) : undefined} publicUrl={c.get("kit").d.publicUrl} />
    </>
  );
  return renderPage(
    c,
    {
      title: "Instance settings",
      nav: "settings",
      lead: "Settings for the whole broker. Only you, the owner, see this page.",
      scripts: true,
      script: COPY_SCRIPT_NAME,
    },
    body,
  );
}

/** The knobs a person changed (compared with `current`), plus the profile when it changed, as a body would carry them. */
function ratePatchOf(form: Record<string, string>, current: RateLimitSettings): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  if (form.profile !== undefined && form.profile !== current.profile) patch.profile = form.profile;
  for (const t of TIERS) {
    const knobs: Record<string, number> = {};
    for (const k of t.knobs) {
      const raw = (form[`${t.tier}.${k}`] ?? "").trim();
      if (raw === "") continue;
      const n = Number(raw); // NaN is refused by the schema, naming the field
      if (n !== knobValue(current, t.tier, k)) knobs[k] = n;
    }
    if (Object.keys(knobs).length) patch[t.tier] = knobs;
  }
  return patch;
}

export function instanceSettingsRoutes(opts: InstanceSettingsOptions = {}) {
  const r = new Hono<ConsoleEnv>();

  r.get("/settings", requireSignedIn, async (c) => renderInstanceSettings(c, opts, await getOwnerSettings(c.get("kit").d, signedIn(c))));

  r.post("/settings/domains", requireSignedIn, (c) => {
    const domains = (formOf(c).allowed_domains ?? "").split(/[\s,]+/).filter(Boolean);
    return runAction(c, {
      run: async () => {
        requireOwner(signedIn(c)); // anyone else is refused before what they typed is read
        return updateOwnerSettings(c.get("kit").d, signedIn(c), parseWith(OwnerSettingsInput, { allowed_domains: domains }));
      },
      success: (s) => (s.allowed_domains.length ? `Saved: only ${s.allowed_domains.join(", ")} may sign up.` : "Saved: anyone may sign up."),
      redirect: "/settings",
    });
  });

  r.post("/settings/rate-limits", requireSignedIn, async (c) => {
    const d = c.get("kit").d;
    return runAction(c, {
      run: async () => {
        const current = (await getOwnerSettings(d, signedIn(c))).rate_limits; // the owner check comes first
        if (!current) return updateOwnerSettings(d, signedIn(c), { rate_limits: {} }); // the domain explains
        return updateOwnerSettings(d, signedIn(c), parseWith(OwnerSettingsInput, { rate_limits: ratePatchOf(formOf(c), current) }));
      },
      success: (s) =>
        `Saved: rate limits now follow the ${s.rate_limits?.profile ?? "default"} profile${s.rate_limits?.profile === "off" ? " (no limits)" : ""} with the numbers shown.`,
      redirect: "/settings",
    });
  });

  priceRoutes(r);

  r.post("/settings/ca/rotate", requireSignedIn, (c) =>
    runAction(c, {
      run: async () => {
        requireOwner(signedIn(c)); // before the typed phrase is read: anyone else learns nothing from it
        requireConfirmation(c, ROTATE_PHRASE);
        if (!opts.ca) throw new NotFound("this server has no root CA");
        const fresh = await rotateCa(signedIn(c), opts.ca);
        c.get("kit").log.info("ca_rotated", { by: signedIn(c).id });
        return fresh;
      },
      success: "Rotated: a new root certificate is active. Download it and trust it in every client that uses HTTPS_PROXY.",
      redirect: "/settings#ca",
      failure: "/settings#ca-rotate",
    }),
  );

  return r;
}
