// `broker template list|show <id>`: the catalogue of well-known APIs this broker carries, read from
// the server (GET /v1/templates), so what is shown is what `service add --template` will use.

import { defineCommand } from "citty";
import type { TemplateListBody, TemplateViewBody } from "../../contract/index.ts";
import { describeRules } from "../../words/index.ts";
import { apiPath, jsonArg, openContext, printJson, printLine, printTable } from "../kit/index.ts";

const list = defineCommand({
  meta: { name: "list", description: "List the service templates: id, name, hosts and operations" },
  args: { ...jsonArg },
  async run({ args }) {
    const { templates } = await openContext().client.request<TemplateListBody>("GET", apiPath("v1", "templates"));
    if (args.json) return printJson(templates);
    printTable(
      templates,
      [
        { title: "ID", value: (t) => t.id },
        { title: "NAME", value: (t) => t.name },
        { title: "HOSTS", value: (t) => t.hosts.join(", ") },
        { title: "OPERATIONS", value: (t) => t.operations.map((o) => o.name).join(", ") },
        { title: "AUTH", value: (t) => t.auth.type },
      ],
      "The server has no templates.",
    );
    printLine(`\n${templates.length} templates. Details: broker template show <id>; use one: broker service add --template <id> --operations read`);
  },
});

const show = defineCommand({
  meta: { name: "show", description: "Show one template: its auth, credential keys, where to get them, and each operation's rules" },
  args: { id: { type: "positional", description: "Template id, e.g. github", required: true }, ...jsonArg },
  async run({ args }) {
    const t = await openContext().client.request<TemplateViewBody>("GET", apiPath("v1", "templates", args.id), {
      hints: { 404: "`broker template list` shows the template ids" },
    });
    if (args.json) return printJson(t);
    printLine(`${t.name} (${t.id})`);
    printLine(`  hosts:      ${t.hosts.join(", ")}`);
    printLine(`  auth:       ${t.auth.type}${t.keys.length ? `, keys ${t.keys.map((k) => `${k.field}=${k.suggested}`).join(", ")}` : ""}`);
    printLine(`  get it at:  ${t.obtain}`);
    printLine(`  auth docs:  ${t.docs}`);
    if (t.connect) printLine("  connect:    an account can be connected in the console (Services, Connect)");
    for (const [field, what] of Object.entries(t.fill)) printLine(`  your own:   ${field === "host" ? "the host" : `--${field.replace("_", "-")}`}: ${what}`);
    for (const op of t.operations) printLine(`  ${op.name.padEnd(11)} ${op.summary}\n  ${"".padEnd(11)} ${describeRules(op.rules)}`);
    printLine(
      `\nUse it: broker service add --template ${t.id} --operations ${t.operations
        .map((o) => o.name)
        .slice(0, 2)
        .join(",")}`,
    );
  },
});

export default defineCommand({
  meta: { name: "template", description: "The catalogue of service templates for well-known APIs" },
  subCommands: { list, show },
});
