// The proposal_hint of a 403 forbidden: a ready-to-edit proposal skeleton for the host, the
// endpoint to post it to, and the supported auth types, so an agent can ask a human for access. For a
// host a catalogue template serves, the skeleton names the template (read only, to start) and its
// credential slots with where a person gets them.

import { operationsOf, templateForHost, templateKeyFields, type Template } from "../templates/index.ts";

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
  const t = port === 443 ? templateForHost(host) : undefined;
  if (t) return templateHint(publicUrl, hostText, t);
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

/** The skeleton for a host a template serves: the template, read only, and a slot per key it needs. */
function templateHint(publicUrl: string, host: string, t: Template): Record<string, unknown> {
  return {
    host,
    endpoint: `${publicUrl}/v1/proposals`,
    method: "POST",
    template: { id: t.id, name: t.name, operations: operationsOf(t).map((name) => ({ name, summary: t.operations[name]!.summary })) },
    proposal: {
      services: [{ template: t.id, operations: ["read"], host, description: `${t.name}: read only (ask for write if you need it)` }],
      credentials: templateKeyFields(t).map(([, key]) => ({
        action: "set",
        key,
        description: `${t.name} credential (${key})`,
        obtain: t.obtain,
        obtain_instructions: `Create it at ${t.obtain}; how the broker sends it: ${t.docs}`,
      })),
      message: `Needs ${t.name} (${host}), read only.`,
      user_message: `Please approve read access to ${t.name} and paste the credential.`,
    },
  };
}
