/** @jsxImportSource hono/jsx */
// `/vaults/:vault`: the vault's dashboard. What waits for a decision first; while the vault is not yet
// set up, the next steps (add a credential, add a service, invite an agent, run a command through it
// with `broker vault run`); then how much the vault holds, each count a link to its tab. The counts come
// from summariseVault, which gives a role only the counts of the pages it may open. No script.

import { Hono } from "hono";
import type { Child } from "hono/jsx";
import { iso, mayInVault, type OpenVault } from "../../identity/index.ts";
import { summariseVault, type VaultSummary } from "../../workflows/index.ts";
import { Badge, Section, Time } from "../ui/index.ts";
import { openConsoleVault, plural, renderPage, requireSignedIn, type ConsoleEnv } from "./context.tsx";
import { vaultPath } from "./layout.tsx";
import { newServicePath } from "./vault-service-paths.ts";

/** What this person may do here, so each step either links to its page or says who does it. */
interface Abilities {
  readonly writeSecrets: boolean;
  readonly manage: boolean;
  readonly decide: boolean;
}

function abilitiesOf(open: OpenVault): Abilities {
  return {
    writeSecrets: mayInVault(open.principal, open.role, "write_secrets"),
    manage: mayInVault(open.principal, open.role, "manage"),
    decide: mayInVault(open.principal, open.role, "approve"),
  };
}

/** One count, the whole tile a link to the tab it counts. */
function Tile(props: { href: string; n: number; label: string; hint: string; id: string; alert?: boolean }) {
  return (
    <li>
      <a href={props.href} class={`tile${props.alert && props.n > 0 ? " tile-alert" : ""}`} id={props.id}>
        <span class="tile-n">{props.n}</span>
        <span class="tile-label">{props.label}</span>
        <span class="tile-hint">{props.hint}</span>
      </a>
    </li>
  );
}

function Counts(props: { vault: string; s: VaultSummary }) {
  const { vault, s } = props;
  return (
    <ul class="tiles" id="counts" aria-label="What this vault holds">
      <Tile
        id="count-credentials"
        href={vaultPath(vault, "credentials")}
        n={s.credentials}
        label={word(s.credentials, "Credential")}
        hint="values, by key name"
      />
      <Tile id="count-services" href={vaultPath(vault, "services")} n={s.services} label={word(s.services, "Service")} hint="hosts agents may reach" />
      {s.agents === null ? null : (
        <Tile id="count-agents" href={vaultPath(vault, "agents")} n={s.agents} label={word(s.agents, "Agent")} hint="with a role in this vault" />
      )}
      <Tile
        id="count-proposals"
        href={vaultPath(vault, "proposals")}
        n={s.pending_proposals}
        label={word(s.pending_proposals, "Pending proposal")}
        hint="agents asking for hosts or credentials"
        alert
      />
      {s.held_requests === null ? null : (
        <Tile
          id="count-requests"
          href={vaultPath(vault, "requests")}
          n={s.held_requests}
          label={word(s.held_requests, "Held request")}
          hint="waiting for approval, one by one"
          alert
        />
      )}
    </ul>
  );
}

const word = (n: number, singular: string) => (n === 1 ? singular : `${singular}s`);

/** "2 proposals and 1 held request wait for you", or nothing when nothing waits. */
function Waiting(props: { vault: string; s: VaultSummary; can: Abilities }) {
  const parts: Child[] = [];
  if (props.s.pending_proposals > 0) parts.push(<a href={vaultPath(props.vault, "proposals")}>{plural(props.s.pending_proposals, "proposal")}</a>);
  if (props.s.held_requests) parts.push(<a href={vaultPath(props.vault, "requests")}>{plural(props.s.held_requests, "held request")}</a>);
  if (parts.length === 0) return null;
  const one = parts.length === 1 && props.s.pending_proposals + (props.s.held_requests ?? 0) === 1;
  return (
    <p class="callout" id="waiting" role="status">
      {parts[0]}
      {parts.length > 1 ? <> and {parts[1]}</> : null} {one ? "waits" : "wait"} for a decision
      {props.can.decide ? ": approve or deny them." : " by an admin or member of this vault."}
    </p>
  );
}

interface Step {
  readonly id: string;
  readonly done: boolean;
  readonly title: string;
  readonly href?: string;
  readonly doneText: string;
  readonly todo: Child;
}

function Steps(props: { steps: readonly Step[]; children?: Child }) {
  return (
    <ol class="steps">
      {props.steps.map((s) => (
        <li class={s.done ? "step step-done" : "step"} id={s.id}>
          <span class="step-mark" aria-hidden="true">
            {s.done ? "✓" : ""}
          </span>
          <div class="step-body">
            <p class="step-title">
              {s.href && !s.done ? <a href={s.href}>{s.title}</a> : s.title} {s.done ? <Badge tone="success">done</Badge> : null}
            </p>
            <p class="small muted">{s.done ? s.doneText : s.todo}</p>
          </div>
        </li>
      ))}
      {props.children}
    </ol>
  );
}

function stepsFor(vault: string, s: VaultSummary, can: Abilities): Step[] {
  const byPeople = "A member or admin of this vault does this.";
  return [
    {
      id: "step-credential",
      done: s.credentials > 0,
      title: "Add a credential",
      href: can.writeSecrets ? `${vaultPath(vault, "credentials")}#set-credential` : undefined,
      doneText: `${plural(s.credentials, "credential")} stored.`,
      todo: can.writeSecrets ? "Store an API key or token by name. Agents never see its value." : byPeople,
    },
    {
      id: "step-service",
      done: s.services > 0,
      title: "Add a service",
      href: can.writeSecrets ? newServicePath(vault) : undefined,
      doneText: `${plural(s.services, "service")} set up.`,
      todo: can.writeSecrets ? "Name a host agents may reach and the credential it gets: start from a template or set one up yourself." : byPeople,
    },
    {
      id: "step-agent",
      done: (s.agents ?? 0) > 0,
      title: "Invite an agent",
      href: can.manage ? `${vaultPath(vault, "agents")}#invite` : undefined,
      doneText: `${plural(s.agents ?? 0, "agent")} invited.`,
      todo: can.manage ? "Make a one-time link; the agent redeems it and gets its own token." : "An admin of this vault invites agents.",
    },
  ];
}

/** The line to copy (selected whole with one click, no script: the console's main pages carry none). */
function RunCommand(props: { vault: string }) {
  return (
    <>
      <pre class="command" id="run-command" aria-label="Command to run">
        <code>{`broker vault run --vault ${props.vault} -- <command>`}</code>
      </pre>
      <p class="hint">
        Replace <code>&lt;command&gt;</code> with yours (e.g. <code>python agent.py</code>). It runs with a session of its own that ends with it; the broker
        adds the credentials on the way out.
      </p>
    </>
  );
}

/** The last step, never "done": running something through the vault. */
function RunStep(props: { vault: string }) {
  return (
    <li class="step" id="step-run">
      <span class="step-mark" aria-hidden="true" />
      <div class="step-body">
        <p class="step-title">Run your agent through the vault</p>
        <RunCommand vault={props.vault} />
      </div>
    </li>
  );
}

export function vaultOverviewRoutes() {
  const r = new Hono<ConsoleEnv>();
  r.get("/vaults/:vault", requireSignedIn, async (c) => {
    const open = await openConsoleVault(c, "read");
    const s = await summariseVault(c.get("kit").d, open);
    const can = abilitiesOf(open);
    const name = open.vault.name;
    const steps = stepsFor(name, s, can);
    // Agents count only for admins (null otherwise): for anyone else that step is not theirs to finish.
    const setUp = steps.every((step) => step.done || (step.id === "step-agent" && s.agents === null));
    const next = (
      <Section title="Next steps" id="next-steps" description="Three steps make this vault useful; then run your agent through it.">
        <Steps steps={steps}>
          <RunStep vault={name} />
        </Steps>
      </Section>
    );
    const body = (
      <>
        <Waiting vault={name} s={s} can={can} />
        {setUp ? null : next}
        <Counts vault={name} s={s} />
        {setUp ? (
          <Section title="Run your agent through this vault" id="use">
            <RunCommand vault={name} />
          </Section>
        ) : null}
        <p class="small muted" id="sections-note">
          Credentials hold the values and Services say where each one goes; Proposals (agents asking for more) and Requests (single requests held by a rule)
          wait for a person's decision; Logs record every request.
        </p>
      </>
    );
    const lead = (
      <>
        Created <Time iso={iso(open.vault.createdAt)} />.
      </>
    );
    const vault = { name, role: open.role, section: "overview" as const, pending: s };
    return renderPage(c, { title: "Overview", nav: "vaults", vault, lead }, body);
  });
  return r;
}
