// `broker service add --template github --operations read,write [--key MY_TOKEN] [host]`: a service
// from the catalogue, its auth and rules filled in by the server from the template. `--template` is
// also path auth's template (`/bot{value}`, which always starts with "/"); any other value names a
// catalogue template.

import { CliFailure } from "./fail.ts";

export const TEMPLATE_ARGS = {
  operations: { type: "string", description: "With --template <id>: the operations agents may use, e.g. read or read,write (default read)" },
  key: { type: "string", description: "With --template <id>: the credential KEY to send, in place of the template's suggested one" },
} as const;

export const TEMPLATE_EXAMPLES = `  broker service add --template github --operations read        GitHub's API, read only, with the key GITHUB_TOKEN
  broker service add --template stripe --operations read,write --key STRIPE_LIVE
  broker service add acme.atlassian.net --template jira --username you@example.com
                                                                 the host and the username are your own (template show lists them)
  broker template list                                           every template, with its operations`;

interface TemplateFlags {
  template?: string;
  operations?: string;
  key?: string;
  auth?: string;
  username?: string;
  "app-id"?: string;
  "installation-id"?: string;
}

/** The auth flags that give a template's own settings (`fill`: Twilio's Account SID, a GitHub App's ids). */
const SETTING_FLAGS = { username: "username", "app-id": "app_id", "installation-id": "installation_id" } as const;

/** Whether --template names a catalogue template (not a path auth template). */
export function namesCatalogueTemplate(flags: TemplateFlags): flags is TemplateFlags & { template: string } {
  return flags.template !== undefined && !flags.template.startsWith("/");
}

/** The body's template fields, or a usage failure naming what does not go with a template. */
export function templateFields(flags: TemplateFlags & { template: string }): Record<string, unknown> {
  if (flags.auth !== undefined) throw new CliFailure("--template <id> gives the auth; leave out --auth", "or leave out --template for a custom service", 2);
  const operations = flags.operations
    ?.split(",")
    .map((op) => op.trim())
    .filter(Boolean);
  const settings = Object.fromEntries(
    Object.entries(SETTING_FLAGS).flatMap(([flag, field]) =>
      flags[flag as keyof typeof SETTING_FLAGS] ? [[field, flags[flag as keyof typeof SETTING_FLAGS]]] : [],
    ),
  );
  return {
    template: flags.template,
    ...(operations?.length && { operations }),
    // The single key most templates have; a template with several names them through the API's `keys`.
    ...(flags.key && { keys: { token: flags.key } }),
    ...(Object.keys(settings).length && { settings }),
  };
}

/** --operations or --key without a catalogue template: say what they go with. */
export function refuseStrayTemplateFlags(flags: TemplateFlags): void {
  for (const f of ["operations", "key"] as const) {
    if (flags[f] !== undefined) throw new CliFailure(`--${f} goes with --template <id>`, "broker template list shows the templates", 2);
  }
}
