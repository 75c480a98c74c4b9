// The proposal_hint of a 403 forbidden: a ready-to-edit proposal skeleton for the host, the
// endpoint to post it to, and the supported auth types, so an agent can ask a human for access.

export const AUTH_TYPES = [
  "bearer",
  "basic",
  "header",
  "query",
  "path",
  "passthrough",
  "oauth2_client_credentials",
  "oauth2_refresh",
  "aws_sigv4",
  "github_app",
] as const;

export function buildProposalHint(publicUrl: string, host: string, port: number): Record<string, unknown> {
  const hostText = port === 443 ? host : `${host}:${port}`;
  return {
    host: hostText,
    endpoint: `${publicUrl}/v1/proposals`,
    method: "POST",
    auth_types: AUTH_TYPES,
    proposal: {
      services: [{ action: "set", host: hostText, description: `Access to ${hostText}`, auth: { type: "bearer", token: "API_KEY" } }],
      credentials: [
        {
          action: "set",
          key: "API_KEY",
          description: `API key for ${hostText}`,
          obtain: `https://${hostText}/`,
          obtain_instructions: "Describe where a human can create this credential.",
        },
      ],
      message: `Needs access to ${hostText}.`,
      user_message: `Please approve access to ${hostText} and paste the credential.`,
    },
  };
}
