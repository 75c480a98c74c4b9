/** @jsxImportSource hono/jsx */
// The identity-provider (OpenID Connect) parts of the pages: the "Sign in with <name>" link on the
// sign-in and approval pages, and the account page's list of linked providers with Link and
// Unlink. The flows themselves are the API's, under /v1/auth/oidc; pages only link and post there.

import { type IdentityView, isSafeReturnTo } from "../../identity/index.ts";
import { Button, PostForm, Section, Table, Time } from "./components.tsx";

/** What the pages need of the configured provider (Domain.oidc, from BROKER_OIDC_*); absent: the feature is off. */
export interface SignInProvider {
  readonly name: string;
}

export const OIDC_LOGIN_PATH = "/v1/auth/oidc/login";
export const OIDC_LINK_PATH = "/v1/auth/oidc/link";

/**
 * The origin the provider's sign-in page is on, for the account page's form-action (the Link form's
 * 303 goes there). Read from an authorization URL built with throw-away values; nothing is stored.
 */
export function providerOrigin(o: { buildAuthorizationUrl(p: { state: string; nonce: string; codeChallenge: string }): string }): string {
  return new URL(o.buildAuthorizationUrl({ state: "-", nonce: "-", codeChallenge: "-" })).origin;
}

/** Where "Sign in with …" goes: the provider, then back to `returnTo` if it is a path on this origin, else `/`. */
export function providerLoginHref(returnTo: string): string {
  return `${OIDC_LOGIN_PATH}?return_to=${encodeURIComponent(isSafeReturnTo(returnTo) ? returnTo : "/")}`;
}

/** "Sign in with <name>": a plain link (GET), since starting a sign-in changes nothing here. */
export function ProviderSignIn(props: { provider: SignInProvider | undefined; returnTo: string; class?: string }) {
  if (!props.provider) return null;
  return (
    <div class={props.class ?? "provider-sign-in"}>
      <p class="muted small provider-or">or</p>
      <a href={providerLoginHref(props.returnTo)} class="btn btn-secondary" id="provider-sign-in">
        Sign in with {props.provider.name}
      </a>
    </div>
  );
}

/** The issuer as a person knows it: its host name (the whole URL in the title). */
export function issuerHost(issuer: string): string {
  try {
    return new URL(issuer).host || issuer;
  } catch {
    return issuer;
  }
}

function IdentitiesTable(props: { identities: readonly IdentityView[] }) {
  return (
    <Table
      id="identities"
      rows={props.identities}
      empty={
        <p class="muted" id="no-identities">
          No provider is linked to this account yet.
        </p>
      }
      columns={[
        { label: "Provider", cell: (i) => <span title={i.issuer}>{issuerHost(i.issuer)}</span> },
        { label: "Email there", cell: (i) => i.email },
        { label: "Linked", cell: (i) => <Time iso={i.created_at} /> },
        {
          label: "",
          class: "actions-cell",
          cell: (i) => (
            <PostForm action={`/account/identities/${i.id}/unlink`} class="inline-form">
              <Button variant="danger" small>
                Unlink
              </Button>
            </PostForm>
          ),
        },
      ]}
    />
  );
}

/** Account settings: linked providers, and a Link form when the feature is on. */
export function IdentitiesSection(props: { provider: SignInProvider | undefined; identities: readonly IdentityView[] }) {
  if (!props.provider && props.identities.length === 0) return null;
  const description = props.provider
    ? `Sign in with ${props.provider.name} instead of your password. Linking asks the provider who you are, then brings you back here.`
    : "Identity-provider sign-in is turned off on this broker; these links are kept but not used.";
  return (
    <Section title="Sign-in providers" id="providers" description={description}>
      <IdentitiesTable identities={props.identities} />
      {props.provider ? (
        <PostForm action={OIDC_LINK_PATH} id="link-provider" label={`Link ${props.provider.name}`}>
          <div class="actions">
            <Button variant="secondary" id="link-provider-button">
              Link {props.provider.name}
            </Button>
          </div>
        </PostForm>
      ) : null}
    </Section>
  );
}
