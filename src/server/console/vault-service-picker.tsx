/** @jsxImportSource hono/jsx */
// The first step of adding a service: the catalogue's templates as a list searched on the server (a
// GET form, `q` matched against id, name and hosts), each with its hosts and how its credential is
// sent, plus "Custom service"; and, for a custom service (or changing an existing one's type), the
// choice of auth type. Links and GET forms only, so it works without JavaScript.

import { TEMPLATES, type Template } from "../../templates/index.ts";
import { authCell } from "../../words/index.ts";
import { Badge, Name, Section } from "../ui/index.ts";
import { openConsoleVault, renderPage, type ConsoleContext } from "./context.tsx";
import { AUTH_CHOICES, authChoiceOf } from "./vault-service-form.tsx";
import { editServicePath, findService, newServicePath, servicePath, vaultOf } from "./vault-service-paths.ts";

/**
 * Whether this console offers "Connect an account" for a template: its provider is configured on the
 * server (vault-connect.tsx's canConnect answers it). The services routes default to none: hidden.
 */
export type ConnectConfigured = (c: ConsoleContext, templateId: string) => boolean;

/** The templates matching every word of `q` in their id, name or hosts (all of them for an empty `q`), by name. */
export function searchTemplates(q: string): Template[] {
  const words = q.toLowerCase().split(/\s+/).filter(Boolean);
  return TEMPLATES.filter((t) => {
    const text = [t.id, t.name, ...t.hosts].join(" ").toLowerCase();
    return words.every((w) => text.includes(w));
  }).sort((a, b) => a.name.localeCompare(b.name, "en"));
}

/** How a template's credential is sent, in a few words ("Bearer token", "Custom header private-token"), and its suggested keys. */
export function templateAuthParts(t: Template): { how: string; keys: readonly string[] } {
  const a = t.auth;
  const how =
    a.type === "header"
      ? `Custom header ${a.header}`
      : a.type === "query"
        ? `Query parameter ?${a.param}=`
        : a.type === "path"
          ? `In the path ${a.template}`
          : (authChoiceOf(a.type)?.label ?? a.type);
  return { how, keys: authCell(a).keys };
}

/** A template's hosts in a few words: the first, and how many more. */
function hostsLine(hosts: readonly string[]): string {
  return hosts.length > 1 ? `${hosts[0]} and ${hosts.length - 1} more` : (hosts[0] ?? "");
}

function TemplateItem(props: { vault: string; t: Template; connect: boolean }) {
  const { t } = props;
  const { how, keys } = templateAuthParts(t);
  return (
    <li>
      <a class="pick" href={newServicePath(props.vault, { template: t.id })} id={`template-${t.id}`}>
        <span class="pick-name">
          {t.name}
          {props.connect ? (
            <>
              {" "}
              <Badge tone="info">connect</Badge>
            </>
          ) : null}
        </span>
        <span class="pick-hosts" title={t.hosts.join(", ")}>
          {hostsLine(t.hosts)}
        </span>
        <span class="pick-auth">
          {how}
          {keys.length ? <span class="pick-keys"> · {keys.join(", ")}</span> : null}
        </span>
      </a>
    </li>
  );
}

function SearchForm(props: { vault: string; q: string }) {
  return (
    <form method="get" action={newServicePath(props.vault)} role="search" class="search-form" aria-label="Search the catalogue">
      <label for="f-q">Search the catalogue</label>
      <div class="search-row">
        <input type="search" id="f-q" name="q" value={props.q} maxlength={100} autocomplete="off" placeholder="e.g. github, openai, api.stripe.com" />
        <button type="submit" class="btn btn-secondary" id="search">
          Search
        </button>
      </div>
    </form>
  );
}

/** GET /vaults/:vault/services/new: the catalogue, searched, and the way to a custom service. */
export async function renderPicker(c: ConsoleContext, connectConfigured: ConnectConfigured) {
  const open = await openConsoleVault(c, "write_secrets");
  const vault = open.vault.name;
  const q = (c.req.query("q") ?? "").slice(0, 100).trim();
  const found = searchTemplates(q);
  const body = (
    <>
      <Section
        title="Start from a template"
        id="templates"
        description="Each template knows its API's host, how its credential is sent and what read and write mean there."
      >
        <SearchForm vault={vault} q={q} />
        <div class="pick-bar">
          <p class="muted small" id="template-count">
            {q ? `${found.length} of ${TEMPLATES.length} templates match.` : `${TEMPLATES.length} templates.`}{" "}
            {q ? <a href={newServicePath(vault)}>Show all</a> : null}
          </p>
          <a class="btn btn-secondary btn-small" href={newServicePath(vault, { custom: "1" })} id="custom-service">
            Custom service…
          </a>
        </div>
        {found.length ? (
          <ul class="pick-list" id="template-list">
            {found.map((t) => (
              <TemplateItem vault={vault} t={t} connect={t.connect !== undefined && connectConfigured(c, t.id)} />
            ))}
          </ul>
        ) : (
          <p id="no-template">No template matches your search. Try another word, or set the service up yourself with “Custom service”.</p>
        )}
      </Section>
    </>
  );
  const lead = (
    <>
      Pick the API agents should reach, or set up any other host. <a href={servicePath(vault)}>Back to the services</a>
    </>
  );
  return renderPage(c, { title: "Add a service", nav: "vaults", vault: vaultOf(open), lead }, body);
}

function TypeItem(props: { href: string; type: string; label: string; help: string; current: boolean }) {
  return (
    <li>
      <a class="pick" href={props.href} id={`type-${props.type}`} aria-current={props.current ? "true" : undefined}>
        <span class="pick-name">
          {props.label}
          {props.current ? (
            <>
              {" "}
              <Badge>now</Badge>
            </>
          ) : null}
        </span>
        <span class="pick-auth">{props.help}</span>
      </a>
    </li>
  );
}

/**
 * The choice of auth type: for a new custom service (GET …/services/new?custom=1), or for an existing
 * service (GET …/services/:host/edit?type=choose), each choice a link to that type's form.
 */
export async function renderTypeChoice(c: ConsoleContext, editing?: string) {
  const open = await openConsoleVault(c, "write_secrets");
  const vault = open.vault.name;
  const current = editing ? await findService(c, open, editing) : undefined;
  const href = (type: string) => (current ? editServicePath(vault, current.host, type) : newServicePath(vault, { custom: "1", type }));
  const list = (minted: boolean) => (
    <ul class="pick-list">
      {AUTH_CHOICES.filter((a) => !!a.minted === minted).map((a) => (
        <TypeItem href={href(a.type)} type={a.type} label={a.label} help={a.help} current={current?.auth.type === a.type} />
      ))}
    </ul>
  );
  const body = (
    <>
      <Section title="Sent as stored" id="static-types" description="The broker adds the stored value to each request.">
        {list(false)}
      </Section>
      <Section
        title="Made or signed by the broker"
        id="minted-types"
        description="The broker makes a short-lived token, or signs each request, from stored keys."
      >
        {list(true)}
      </Section>
    </>
  );
  const back = current ? servicePath(vault, current.host, "edit") : newServicePath(vault);
  const lead = current ? (
    <>
      For <Name>{current.host}</Name>. <a href={back}>Back</a>
    </>
  ) : (
    <>
      Choose one; the next page asks only for what it needs. <a href={back}>Back to the catalogue</a>
    </>
  );
  return renderPage(c, { title: "How is the credential sent?", nav: "vaults", vault: vaultOf(open), lead }, body);
}
