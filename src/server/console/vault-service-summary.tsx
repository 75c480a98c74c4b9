// Every auth field's form label, for a refusal's message ("Token URL must be…"), and the same label
// on a template's key choices. How a service's auth reads in the services table is words/'s
// (authCell). Field names only, never a value.

/** The form's label for each auth field, so a refusal reads "Token URL must be…" rather than "Auth.token_url must be…". */
export const FIELD_LABELS: Readonly<Record<string, string>> = {
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

/**
 * A refusal's text with the auth field it names said as the form's label ("auth.token_url", or a
 * template's "keys.token" and "settings.username"); any other text unchanged.
 */
export function labelAuthField(text: string, field: string | undefined): string {
  const [, root, name] = /^(auth|keys|settings)\.(\w+)$/.exec(field ?? "") ?? [];
  const label = name ? FIELD_LABELS[name] : undefined;
  const prefix = `${root}.${name} `;
  return label && text.toLowerCase().startsWith(prefix.toLowerCase()) ? `${label} ${text.slice(prefix.length)}` : text;
}
