// A template-asked service on the approval page and the console's proposal card, said alike: "GitHub
// (api.github.com), read only" and a line per operation saying what an agent could then do.

import { templateById } from "../../templates/index.ts";
import { describeTemplateChoice, operationLines } from "../../words/index.ts";

export function TemplateChoice(props: { service: { readonly host: string; readonly template?: string; readonly operations?: readonly string[] } }) {
  const { host, template, operations = [] } = props.service;
  if (!template) return null;
  const t = templateById(template);
  return (
    <>
      <dt>Template</dt>
      <dd class="template-choice">
        <strong>{describeTemplateChoice(t?.name ?? template, host, operations)}</strong>
        {t ? (
          <ul class="plain-list small">
            {operationLines(t, operations).map((line) => (
              <li>{line}</li>
            ))}
          </ul>
        ) : null}
      </dd>
    </>
  );
}
