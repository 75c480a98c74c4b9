/** @jsxImportSource hono/jsx */
// A service's auth in the services table for the types the broker mints or signs (the keys it uses,
// where the token comes from), and every auth field's form label for a refusal's message. Key names
// and settings only, never a value.

import type { MintedAuthType } from "../../store/index.ts";
import type { ServiceAuth } from "../../workflows/index.ts";
import { Name } from "../ui/index.ts";

export const MINTED_LABEL: Record<MintedAuthType, string> = {
  oauth2_client_credentials: "OAuth client",
  oauth2_refresh: "OAuth refresh",
  aws_sigv4: "AWS SigV4",
  github_app: "GitHub App",
};

/** Where an https URL points, host and path, for a table cell. */
function shortUrl(url: string | undefined): string {
  if (!url || !URL.canParse(url)) return "?";
  const u = new URL(url);
  return `${u.host}${u.pathname === "/" ? "" : u.pathname}`;
}

/** The services table's cell for a minted type: the keys it uses, then in words where the token comes from. */
export function MintedSummary(props: { auth: ServiceAuth }) {
  const a = props.auth;
  const keys = (names: (string | undefined)[]) =>
    names
      .filter((k): k is string => !!k)
      .map((k, i) => (
        <>
          {i ? " " : ""}
          <Name>{k}</Name>
        </>
      ));
  switch (a.type) {
    case "oauth2_client_credentials":
      return (
        <>
          {keys([a.client_id, a.client_secret])}
          <span class="muted small">
            {" "}
            token from {shortUrl(a.token_url)}
            {a.scopes?.length ? `, scopes ${a.scopes.join(" ")}` : ""}
            {a.audience ? `, audience ${a.audience}` : ""}
          </span>
        </>
      );
    case "oauth2_refresh":
      return (
        <>
          {keys([a.refresh_token, a.client_id, a.client_secret])}
          <span class="muted small"> token refreshed at {shortUrl(a.token_url)}</span>
        </>
      );
    case "aws_sigv4":
      return (
        <>
          {keys([a.access_key_id, a.secret_access_key, a.session_token])}
          <span class="muted small">
            {" "}
            signs for {a.service ?? "the host's service"} in {a.region ?? "the host's region"}
          </span>
        </>
      );
    default:
      return (
        <>
          {keys([a.private_key])}
          <span class="muted small">
            {" "}
            app {a.app_id}, installation {a.installation_id}
            {a.api_url ? ` at ${shortUrl(a.api_url)}` : ""}
          </span>
        </>
      );
  }
}

/** The form's label for each auth field, so a refusal reads "Token URL must be…" rather than "Auth.token_url must be…". */
const FIELD_LABELS: Record<string, string> = {
  type: "How the credential is sent",
  token: "Credential key",
  username: "Username",
  header: "Header name",
  prefix: "Header prefix",
  param: "Query parameter",
  template: "Path template",
  token_url: "Token URL",
  client_id: "Client ID",
  client_secret: "Client secret",
  refresh_token: "Refresh token",
  client_auth: "Client authentication",
  scopes: "Scopes",
  audience: "Audience",
  access_key_id: "Access key ID",
  secret_access_key: "Secret access key",
  session_token: "Session token",
  region: "Region",
  service: "Service",
  app_id: "App ID",
  installation_id: "Installation ID",
  private_key: "Private key",
  api_url: "API URL",
};

/** A refusal's text with the auth field it names said as the form's label; any other text unchanged. */
export function labelAuthField(text: string, field: string | undefined): string {
  const name = /^auth\.(\w+)$/.exec(field ?? "")?.[1];
  const label = name ? FIELD_LABELS[name] : undefined;
  const prefix = `auth.${name} `;
  return label && text.toLowerCase().startsWith(prefix.toLowerCase()) ? `${label} ${text.slice(prefix.length)}` : text;
}
