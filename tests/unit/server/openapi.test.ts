// GET /v1/openapi.json: a valid OpenAPI 3.1 document generated from the routes the app registered,
// so it cannot drift from the code: every route is in it, every JSON API route is described (summary,
// callers, answer), every write endpoint that reads a JSON body names its schema, and on each of them a
// field the schema does not know gets 400 naming it.

import { describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import type { EgressDeps } from "../../../src/egress/index.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createApi } from "../../../src/server/app.ts";
import type { Metrics } from "../../../src/server/kit/metrics.ts";
import { isApiPath, openApiPath } from "../../../src/server/openapi/document.ts";
import type { CaHolder } from "../../../src/crypto/index.ts";
import { createTestApi } from "../../helpers/api.ts";

/** Write routes that take no JSON body (a decision, a logout, a revocation). */
const NO_BODY = new Set([
  "POST /v1/auth/logout",
  "POST /v1/proposals/{id}/reject",
  "POST /v1/proposals/{id}/approval-link",
  "POST /v1/vaults/{vault}/request-approvals/{id}/approve",
  "POST /v1/vaults/{vault}/request-approvals/{id}/deny",
  "POST /v1/ca/rotate",
  "POST /v1/auth/oidc/link",
  "POST /v1/secret-stores/{name}/check",
  "POST /v1/vaults/{vault}/budgets/{name}/reset",
]);

async function setUp() {
  const h = await createTestApi();
  // Every optional part registered, so every route exists (none is called here but the document).
  const app = createApi({
    domain: h.domain,
    log: createMemoryLogger(),
    egress: {} as EgressDeps,
    ca: {} as CaHolder,
    metrics: { registry: {} as Metrics, token: undefined },
  });
  const res = await app.request("/v1/openapi.json", { headers: { host: "127.0.0.1" } });
  expect(res.status).toBe(200);
  return { h, app, doc: (await res.json()) as { openapi: string; paths: Record<string, Record<string, any>> } };
}

describe("the OpenAPI document", () => {
  test("validates as OpenAPI 3.1", async () => {
    const { doc } = await setUp();
    expect(doc.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(doc as unknown as Parameters<Validator["validate"]>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  test("lists every registered route; every JSON API route is described", async () => {
    const { app, doc } = await setUp();
    const missing: string[] = [];
    const undescribed: string[] = [];
    for (const r of app.routes) {
      if (r.method === "ALL") continue; // use() middleware; /proxy/* is checked below
      const path = openApiPath(r.path);
      const op = doc.paths[path]?.[r.method.toLowerCase()];
      if (!op) (isApiPath(r.path) ? undescribed : missing).push(`${r.method} ${path}`);
    }
    expect({ missing, undescribed }).toEqual({ missing: [], undescribed: [] });
    expect(Object.keys(doc.paths["/proxy/{target}"] ?? {}).sort()).toEqual(["delete", "get", "patch", "post", "put"]);
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        expect({ at: `${method} ${path}`, summary: typeof op.summary }).toEqual({ at: `${method} ${path}`, summary: "string" });
        expect(Object.keys(op.responses).length).toBeGreaterThan(0);
      }
    }
  });

  test("every write endpoint of the JSON API that reads a body names its schema", async () => {
    const { doc } = await setUp();
    const withoutBody: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      if (!isApiPath(path) || path.startsWith("/proxy")) continue;
      for (const method of ["post", "put", "patch"]) {
        const op = ops[method];
        if (op && !op.requestBody && !NO_BODY.has(`${method.toUpperCase()} ${path}`)) withoutBody.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(withoutBody).toEqual([]);
  });

  test("a field the schema does not know gets 400 naming it, on every write endpoint with a body", async () => {
    const { h, doc } = await setUp();
    const owner = (await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } })).body.token as string;
    expect((await h.call("POST", "/v1/vaults", { token: owner, body: { name: "main" } })).status).toBe(201);
    const params: Record<string, string> = { vault: "main", key: "API_KEY", host: "api.example.com", id: "1", token: "av_inv_x", name: "bot" };
    const checked: string[] = [];
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of ["post", "put", "patch"]) {
        if (!ops[method]?.requestBody) continue;
        const url = path.replace(/\{([^}]+)\}/g, (_m, p: string) => params[p] ?? "x");
        const res = await h.call(method.toUpperCase(), url, { token: owner, body: { zz_not_a_field: 1 } });
        expect({ at: `${method} ${path}`, status: res.status, field: res.body?.field }).toEqual({
          at: `${method} ${path}`,
          status: 400,
          field: "zz_not_a_field",
        });
        expect(res.body.message).toContain("zz_not_a_field is not a field");
        checked.push(`${method} ${path}`);
      }
    }
    expect(checked.length).toBeGreaterThan(10);
  });

  test("a misspelt field inside a nested object is named with its path", async () => {
    const { h } = await setUp();
    const owner = (await h.call("POST", "/v1/auth/register", { body: { email: "o@example.com", password: "hunter2hunter2" } })).body.token as string;
    await h.call("POST", "/v1/vaults", { token: owner, body: { name: "main" } });
    const misspelt = [
      [{ vault: "main", contianed: true }, "/v1/sessions", "contianed"],
      [{ host: "api.example.com", auth: { type: "bearer", tokn: "K" } }, "/v1/vaults/main/services", "auth.tokn"],
      [
        { host: "api.example.com", auth: { type: "passthrough" }, rules: [{ methods: ["POST"], paths: ["/a"], aprove: "each" }] },
        "/v1/vaults/main/services",
        "rules[0].aprove",
      ],
    ] as const;
    for (const [body, path, field] of misspelt) {
      const res = await h.call("POST", path, { token: owner, body });
      expect({ path, status: res.status, error: res.body.error, field: res.body.field }).toEqual({ path, status: 400, error: "invalid_request", field });
    }
    // Spelt right, the same bodies are accepted.
    expect(
      (
        await h.call("POST", "/v1/vaults/main/services", {
          token: owner,
          body: { host: "api.example.com", auth: { type: "passthrough" }, rules: [{ methods: ["POST"], paths: ["/a"], approve: "each" }] },
        })
      ).status,
    ).toBe(201);
  });
});

test("docs/api.md names every path of the JSON API (and links the document)", async () => {
  const { doc } = await setUp();
  const md = await Bun.file(new URL("../../../docs/api.md", import.meta.url)).text();
  expect(md).toContain("GET /v1/openapi.json");
  const unnamed: string[] = [];
  for (const [path, ops] of Object.entries(doc.paths)) {
    if (!isApiPath(path)) continue;
    if (path.startsWith("/proxy")) {
      if (!md.includes("{base_url}/proxy/<host")) unnamed.push(path);
      continue;
    }
    for (const method of Object.keys(ops)) if (!md.includes(`${method.toUpperCase()} ${path}`)) unnamed.push(`${method.toUpperCase()} ${path}`);
  }
  expect(unnamed).toEqual([]);
});
