// GET /v1/templates and /v1/templates/{id}: the catalogue of well-known APIs this release carries,
// public as the OpenAPI document is (it is the same for every instance of a release and holds no
// secret), so a CLI or a script can show it before signing in.

import { Hono } from "hono";
import { NotFound } from "../../errors.ts";
import { TemplateList, TemplateView } from "../../contract/index.ts";
import { operationsOf, templateById, templateKeyFields, TEMPLATES, type Template } from "../../templates/index.ts";
import { describe } from "../openapi/index.ts";
import type { ApiEnv } from "../kit/index.ts";

/** A template as the API shows it. */
export function viewTemplate(t: Template) {
  return {
    id: t.id,
    name: t.name,
    hosts: [...t.hosts],
    auth: t.auth,
    keys: templateKeyFields(t).map(([field, suggested]) => ({ field, suggested })),
    docs: t.docs,
    obtain: t.obtain,
    operations: operationsOf(t).map((name) => ({ name, summary: t.operations[name]!.summary, rules: [...t.operations[name]!.rules] })),
    connect: t.connect !== undefined,
    fill: { ...t.fill },
  };
}

export function templateRoutes() {
  const r = new Hono<ApiEnv>();
  r.get(
    "/",
    describe({
      summary: "The catalogue of service templates for well-known APIs",
      tags: ["templates"],
      auth: "none",
      success: { status: 200, schema: TemplateList },
    }),
    (c) => c.json({ templates: TEMPLATES.map(viewTemplate) }),
  );
  r.get(
    "/:id",
    describe({
      summary: "One template: hosts, auth, operations and their rules",
      tags: ["templates"],
      auth: "none",
      success: { status: 200, schema: TemplateView },
    }),
    (c) => {
      const t = templateById(c.req.param("id"));
      if (!t) throw new NotFound("no template with this id (GET /v1/templates lists them)");
      return c.json(viewTemplate(t));
    },
  );
  return r;
}
