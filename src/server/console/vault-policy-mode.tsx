/** @jsxImportSource hono/jsx */
// Report mode in the console (architecture.md D33): the "Report mode" section of `/vaults/:vault/settings` (the
// vault's policy mode, the requests it let through in the last 24 h with a link to them in the log, and for human
// admins the form: updateVault, as PATCH /v1/vaults/:vault), the "Rules mode" section of a service's edit page
// (updateService's rules_mode, human admins), and how a marked record reads on the Logs page. Every write is the
// API's own call, so the domain decides who may make it.

import { Hono } from "hono";
import { parseWith, PolicyModeInput, VaultUpdateInput } from "../../contract/index.ts";
import { mayInVault, updateVault, type OpenVault } from "../../identity/index.ts";
import { WOULD_REFUSE } from "../../store/index.ts";
import { countWouldRefuse, updateService, type ServiceView } from "../../workflows/index.ts";
import { Badge, Button, PostForm, Section } from "../ui/index.ts";
import { formOf, openConsoleVault, plural, requireSignedIn, runAction, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { servicePath } from "./vault-service-paths.ts";

const DAY_MS = 24 * 3600_000;
/** The count stops here: "10,000 or more" says enough, and the count stays a bounded index range. */
const COUNT_CAP = 10_000;

/** The Logs page filtered to what report mode let through. */
export function wouldRefuseLogPath(vault: string): string {
  return `${vaultPath(vault, "logs")}?would_refuse=1`;
}

/** What a marked record's refusal was, in words. */
const REFUSALS: Readonly<Record<string, string>> = {
  request_not_allowed: "outside the service's rules",
  forbidden: "no service for this host, and the vault refuses such hosts",
};

/** A record's `error` split into the refusal report mode let through (if any) and what else failed. */
export function wouldRefuseOf(error: string | null): { code: string; words: string; rest: string | null } | undefined {
  if (!error?.startsWith(WOULD_REFUSE)) return undefined;
  const [code = "", ...rest] = error.slice(WOULD_REFUSE.length).split(",");
  return { code, words: REFUSALS[code] ?? code, rest: rest.length ? rest.join(",") : null };
}

/** The Status cell's note for a record: "would be refused: outside the service's rules", then any other error. */
export function ErrorNote(props: { error: string | null }) {
  const marked = wouldRefuseOf(props.error);
  if (!marked) return props.error ? <span class="small"> {props.error}</span> : null;
  return (
    <>
      {" "}
      <Badge tone="warning">would be refused</Badge>
      <span class="small" title={`${WOULD_REFUSE}${marked.code}`}>
        {" "}
        {marked.words} (report mode let it through){marked.rest ? `; ${marked.rest}` : ""}
      </span>
    </>
  );
}

const MODES = [
  {
    value: "enforce",
    label: "Enforce",
    help: "Requests the rules refuse, and hosts the setting above refuses, get 403. The default.",
  },
  {
    value: "report",
    label: "Report only",
    help: "Such requests go through as if allowed; each is marked “would be refused” in the log and counted, so you can tighten rules and see what they would stop before they stop anything. Requests a rule holds for approval are still held.",
  },
] as const;

function ModeChoice(props: { name: string; current: string; choices: readonly { value: string; label: string; help: string }[]; id: string }) {
  return (
    <>
      {props.choices.map((ch) => (
        <label class="choice" for={`${props.id}-${ch.value}`}>
          <input
            type="radio"
            name={props.name}
            id={`${props.id}-${ch.value}`}
            value={ch.value}
            checked={props.current === ch.value}
            aria-describedby={`${props.id}-${ch.value}-help`}
          />
          <span>
            <strong>{ch.label}</strong>
            <br />
            <span class="muted small" id={`${props.id}-${ch.value}-help`}>
              {ch.help}
            </span>
          </span>
        </label>
      ))}
    </>
  );
}

/** The settings page's "Report mode" section: the mode, the last 24 h's marked requests, and the form for human admins. */
export async function renderPolicyMode(props: { c: ConsoleContext; open: OpenVault }) {
  const { c, open } = props;
  const name = open.vault.name;
  const mode = open.vault.policyMode;
  const logs = mayInVault(open.principal, open.role, "read_logs");
  const count = logs ? await countWouldRefuse(c.get("kit").d, open, c.get("kit").d.now() - DAY_MS, COUNT_CAP) : undefined;
  const counted =
    count === undefined ? null : (
      <p id="would-refuse-count">
        {count === 0 ? (
          "No request in the last 24 hours would have been refused."
        ) : (
          <>
            <strong>{count >= COUNT_CAP ? `${COUNT_CAP.toLocaleString("en-US")} or more requests` : plural(count, "request")}</strong> in the last 24 hours
            would have been refused and went through in report mode. <a href={wouldRefuseLogPath(name)}>See them in the log</a>.
          </>
        )}
      </p>
    );
  return (
    <Section
      title="Report mode"
      id="policy-mode"
      description="Try out rules before they refuse anything: in report mode a request the rules or the setting above would refuse goes through, and the log marks it."
    >
      <p id="policy-mode-current">
        <Badge tone={mode === "report" ? "warning" : "success"}>{mode === "report" ? "report only" : "enforced"}</Badge>{" "}
        {mode === "report"
          ? "Nothing is refused by the rules or the unmatched-host setting; what would be is marked in the log."
          : "The rules and the unmatched-host setting refuse what they do not allow."}{" "}
        A service can have its own mode (on its edit page).
      </p>
      {counted}
      {mayInVault(open.principal, open.role, "policy_mode") ? (
        <PostForm action={`${vaultPath(name, "settings")}/policy-mode`} id="policy-mode-form" label="Report mode">
          <fieldset>
            <legend>When a request is outside the rules or goes to a host the vault refuses</legend>
            <ModeChoice name="policy_mode" id="policy" current={mode} choices={MODES} />
          </fieldset>
          <div class="actions">
            <Button variant="primary">Save</Button>
          </div>
        </PostForm>
      ) : (
        <p class="muted">Only a human admin of the vault can change this.</p>
      )}
    </Section>
  );
}

/** A service's edit page: its own rules mode (or its vault's), for human admins; nothing for anyone else. */
export function RulesModeSection(props: { open: OpenVault; service: ServiceView }) {
  const { open, service } = props;
  if (!mayInVault(open.principal, open.role, "policy_mode")) return null;
  const vaultMode = open.vault.policyMode === "report" ? "report only" : "enforce";
  const choices = [
    { value: "vault", label: `As the vault (${vaultMode})`, help: "The vault's report mode setting decides." },
    { value: "enforce", label: "Enforce", help: "Requests outside this service's rules get 403, whatever the vault's setting." },
    {
      value: "report",
      label: "Report only",
      help: "Requests outside this service's rules go through, marked “would be refused” in the log. Requests a rule holds for approval are still held.",
    },
  ];
  return (
    <Section title="Rules mode" id="rules-mode" description="Whether this service's rules refuse, or only report what they would refuse.">
      <PostForm action={`${servicePath(open.vault.name, service.host)}/rules-mode`} id="rules-mode-form" label="Rules mode">
        <fieldset>
          <legend>Requests outside this service's rules</legend>
          <ModeChoice name="rules_mode" id="rules-mode" current={service.rules_mode ?? "vault"} choices={choices} />
        </fieldset>
        <div class="actions">
          <Button variant="primary">Save</Button>
        </div>
      </PostForm>
    </Section>
  );
}

/** The mode a service's rules run in, for the services table: a badge where they only report. */
export function ReportBadge(props: { service: ServiceView; vaultMode: string }) {
  const mode = props.service.rules_mode ?? props.vaultMode;
  if (mode !== "report" || !props.service.rules) return null;
  return (
    <div class="small">
      <Badge tone="warning">report only</Badge> <span class="muted">requests outside these rules go through, marked in the log</span>
    </div>
  );
}

export function policyModeRoutes() {
  const r = new Hono<ConsoleEnv>();

  r.post("/vaults/:vault/settings/policy-mode", requireSignedIn, (c) =>
    runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "manage");
        return updateVault(c.get("kit").d, open, parseWith(VaultUpdateInput, { policy_mode: formOf(c).policy_mode ?? "" }));
      },
      success: (v) =>
        v.policy_mode === "report"
          ? "Saved: report mode. Requests the rules or the unmatched-host setting would refuse go through, marked in the log."
          : "Saved: the rules and the unmatched-host setting are enforced.",
      redirect: `${vaultPath(c.req.param("vault"), "settings")}#policy-mode`,
    }),
  );

  r.post("/vaults/:vault/services/:host/rules-mode", requireSignedIn, (c) => {
    const host = c.req.param("host");
    return runAction(c, {
      run: async () => {
        const open = await openConsoleVault(c, "write_secrets");
        const raw = formOf(c).rules_mode ?? "";
        const rules_mode = raw === "vault" ? null : parseWith(PolicyModeInput, raw, "rules_mode");
        return updateService(c.get("kit").d, open, host, { rules_mode });
      },
      success: (s) =>
        s.rules_mode === "report"
          ? `Saved: requests outside the rules of ${s.host} go through, marked in the log.`
          : s.rules_mode === "enforce"
            ? `Saved: the rules of ${s.host} are enforced, whatever the vault's setting.`
            : `Saved: the rules of ${s.host} follow the vault's report mode setting.`,
      redirect: servicePath(c.req.param("vault"), host, "edit"),
    });
  });

  return r;
}
