// The catalogue of well-known APIs as data in the binary (architecture.md D23): each template's hosts,
// auth with suggested key names, where to get the credential, and operations as ordinary rules; and the
// pure expansion of a choice (template, operations, keys) into a service's auth and rules.

import { TEMPLATES } from "./catalogue/index.ts";
import { templateServing } from "./expand.ts";
import type { Template } from "./template.ts";

export * from "./template.ts";
export * from "./expand.ts";
export { TEMPLATES } from "./catalogue/index.ts";

const BY_ID = new Map(TEMPLATES.map((t) => [t.id, t]));

/** The template with id `id`, if the catalogue has one. */
export function templateById(id: string): Template | undefined {
  return BY_ID.get(id);
}

/** The catalogue's template for a concrete host (`api.github.com`), if one serves it. */
export function templateForHost(host: string): Template | undefined {
  return templateServing(TEMPLATES, host);
}
