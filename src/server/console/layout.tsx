/** @jsxImportSource hono/jsx */
// The frame of every console page: the document shell (pages/document.tsx), the header
// with the product name and navigation, the flash message, an optional vault header with its
// section tabs (pending counts on Proposals and Requests), and the main area. Sign-out is a POST
// form button, never a link.

import type { Child } from "hono/jsx";
import { VERSION } from "../../version.ts";
import { Document } from "../ui/index.ts";
import { Badge, Button, PageContext, PostForm } from "../ui/index.ts";
import type { PendingSummary } from "../../workflows/index.ts";
import type { Flash } from "./flash.ts";

export type NavItem = "vaults" | "account" | "settings" | "secret-stores" | "workload-identity";

export interface LayoutUser {
  readonly email: string;
  readonly owner: boolean;
}

/** The sections of a vault, in tab order; a vault page names its own with `vault.section`. */
export const VAULT_SECTIONS = [
  { slug: "credentials", label: "Credentials" },
  { slug: "services", label: "Services" },
  { slug: "proposals", label: "Proposals" },
  { slug: "requests", label: "Requests" },
  { slug: "agents", label: "Agents" },
  { slug: "members", label: "Members" },
  { slug: "logs", label: "Logs" },
  { slug: "settings", label: "Settings" },
] as const;

export type VaultSection = (typeof VAULT_SECTIONS)[number]["slug"];

export interface LayoutVault {
  readonly name: string;
  readonly role: string;
  /** The tab this page belongs to; "overview" is the vault's own page. */
  readonly section?: VaultSection | "overview";
  /** What waits for a decision, as badges on the Proposals and Requests tabs (renderPage fills it in). */
  readonly pending?: PendingSummary;
}

export interface LayoutProps {
  readonly title: string;
  readonly csrf: string;
  readonly user?: LayoutUser;
  readonly flash?: Flash;
  readonly nav?: NavItem;
  readonly vault?: LayoutVault;
  /** Shown under the heading. */
  readonly lead?: Child;
  /** Narrow single-column pages (sign-in). */
  readonly narrow?: boolean;
  /** Load /assets/<name>.js (the page must also be served with scripts allowed). */
  readonly script?: string;
  readonly children?: Child;
}

/** `/vaults/<name>` or one of its sections; names are validated by the domain, encoded anyway. */
export function vaultPath(name: string, section?: VaultSection): string {
  return `/vaults/${encodeURIComponent(name)}${section ? `/${section}` : ""}`;
}

function Header(props: { user?: LayoutUser; nav?: NavItem }) {
  const link = (item: NavItem, href: string, label: string) => (
    <li>
      <a href={href} aria-current={props.nav === item ? "page" : undefined}>
        {label}
      </a>
    </li>
  );
  return (
    <header class="site-header">
      <div class="site-header-inner">
        <a class="brand" href="/">
          <span class="brand-mark" aria-hidden="true" />
          Broker
        </a>
        {props.user ? (
          <nav class="site-nav" aria-label="Main">
            <ul>
              {link("vaults", "/", "Vaults")}
              {link("account", "/account", "Account")}
              {props.user.owner ? link("settings", "/settings", "Settings") : null}
              {props.user.owner ? link("secret-stores", "/settings/secret-stores", "Secret stores") : null}
              {props.user.owner ? link("workload-identity", "/settings/workload-identity", "Workload identity") : null}
            </ul>
            <div class="site-user">
              <span class="site-email" title={props.user.email}>
                {props.user.email}
              </span>
              <PostForm action="/logout" class="inline-form" id="sign-out">
                <Button variant="link" small>
                  Sign out
                </Button>
              </PostForm>
            </div>
          </nav>
        ) : null}
      </div>
    </header>
  );
}

export function FlashMessage(props: { flash?: Flash }) {
  if (!props.flash) return null;
  const { kind, text } = props.flash;
  return (
    <div class={`flash flash-${kind}`} role={kind === "error" ? "alert" : "status"} id="flash">
      {text}
    </div>
  );
}

/** How many wait for a decision, as a small count after a tab's or a vault's name; nothing when none do. */
export function PendingCount(props: { n: number | null | undefined; what: string }) {
  if (!props.n) return null;
  return (
    <span class="count" title={`${props.n} ${props.what} waiting for a decision`}>
      <span class="visually-hidden"> (</span>
      {props.n > 99 ? "99+" : props.n}
      <span class="visually-hidden"> waiting)</span>
    </span>
  );
}

const TAB_COUNTS: Partial<Record<VaultSection, (p: PendingSummary) => [number | null, string]>> = {
  proposals: (p) => [p.pending_proposals, "proposals"],
  requests: (p) => [p.held_requests, "held requests"],
};

function VaultHeader(props: { vault: LayoutVault }) {
  const v = props.vault;
  const count = (slug: VaultSection) => {
    const of = v.pending && TAB_COUNTS[slug]?.(v.pending);
    return of ? <PendingCount n={of[0]} what={of[1]} /> : null;
  };
  return (
    <div class="vault-header">
      <p class="eyebrow">
        <a href="/">Vaults</a> <span aria-hidden="true">/</span>
      </p>
      <div class="vault-title">
        <a class="vault-name" href={vaultPath(v.name)}>
          {v.name}
        </a>{" "}
        <Badge tone="info">{v.role}</Badge>
      </div>
      <nav class="tabs" aria-label="Vault sections">
        <ul>
          <li>
            <a href={vaultPath(v.name)} aria-current={v.section === "overview" ? "page" : undefined}>
              Overview
            </a>
          </li>
          {VAULT_SECTIONS.map((s) => (
            <li>
              <a href={vaultPath(v.name, s.slug)} aria-current={v.section === s.slug ? "page" : undefined}>
                {s.label}
                {count(s.slug)}
              </a>
            </li>
          ))}
        </ul>
      </nav>
    </div>
  );
}

export function Layout(props: LayoutProps) {
  return (
    <Document title={`${props.title} · Broker`} colorScheme script={props.script} bodyClass="console">
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <PageContext.Provider value={{ csrf: props.csrf }}>
        <Header user={props.user} nav={props.nav} />
        <main id="main" class={props.narrow ? "page page-narrow" : "page"}>
          {props.vault ? <VaultHeader vault={props.vault} /> : null}
          <FlashMessage flash={props.flash} />
          <h1>{props.title}</h1>
          {props.lead ? <p class="lead">{props.lead}</p> : null}
          {props.children}
        </main>
        <footer class="site-footer">
          <p>Broker {VERSION} · agents use credentials through the broker and never see their values.</p>
        </footer>
      </PageContext.Provider>
    </Document>
  );
}
