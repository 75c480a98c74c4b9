// Workload identity (issue 39): /v1/workload-issuers, the owner's trusted issuers and their bindings, and
// POST /v1/sessions/exchange, where a workload trades its platform token for a session (RFC 8693). The exchange is
// anonymous: it is rate-limited like sign-in (AUTH tier, app.ts) and never logs or echoes the token it reads.

import { Hono, type MiddlewareHandler } from "hono";
import type { Domain } from "../../identity/index.ts";
import {
  addWorkloadBinding,
  addWorkloadIssuer,
  exchangeWorkloadToken,
  listWorkloadBindings,
  listWorkloadIssuers,
  removeWorkloadBinding,
  removeWorkloadIssuer,
  updateWorkloadIssuer,
} from "../../identity/index.ts";
import {
  parseWith,
  TokenExchangeAnswer,
  TokenExchangeInput,
  WorkloadBindingInput,
  WorkloadBindingList,
  WorkloadBindingView,
  WorkloadIssuerInput,
  WorkloadIssuerList,
  WorkloadIssuerView,
} from "../../contract/index.ts";
import { InvalidRequest } from "../../errors.ts";
import type { Logger } from "../../log.ts";
import { bearerToken, jsonBody, readCappedText, requirePrincipal, sessionClientOf } from "../kit/index.ts";
import type { ApiEnv } from "../kit/index.ts";
import { BODY_SCHEMA, describe } from "../openapi/index.ts";

const tags = ["workload identity"];
const owner = "the instance owner";
const EXCHANGE_MAX_BYTES = 32 * 1024;

export function workloadIssuerRoutes(d: Domain) {
  const r = new Hono<ApiEnv>();
  r.use("*", requirePrincipal(d));
  r.get(
    "/",
    describe({ summary: "List the trusted workload issuers", tags, auth: "bearer", who: owner, success: { status: 200, schema: WorkloadIssuerList } }),
    async (c) => c.json(await listWorkloadIssuers(d, c.get("principal"))),
  );
  r.post(
    "/",
    describe({ summary: "Trust a workload issuer", tags, auth: "bearer", who: owner, success: { status: 201, schema: WorkloadIssuerView }, errors: [409] }),
    jsonBody(WorkloadIssuerInput),
    async (c) => c.json(await addWorkloadIssuer(d, c.get("principal"), c.req.valid("json")), 201),
  );
  r.put(
    "/:issuer",
    describe({
      summary: "Change a trusted issuer (new keys, audiences, skew, the jti rule); its bindings stay",
      tags,
      auth: "bearer",
      who: owner,
      success: { status: 200, schema: WorkloadIssuerView },
    }),
    jsonBody(WorkloadIssuerInput),
    async (c) => c.json(await updateWorkloadIssuer(d, c.get("principal"), c.req.param("issuer"), c.req.valid("json"))),
  );
  r.delete(
    "/:issuer",
    describe({
      summary: "Stop trusting an issuer: its bindings, their agents and sessions go too",
      tags,
      auth: "bearer",
      who: owner,
      success: { status: 204 },
    }),
    async (c) => {
      await removeWorkloadIssuer(d, c.get("principal"), c.req.param("issuer"));
      return c.body(null, 204);
    },
  );
  r.get(
    "/:issuer/bindings",
    describe({
      summary: "List an issuer's bindings, in the order they are tried",
      tags,
      auth: "bearer",
      who: owner,
      success: { status: 200, schema: WorkloadBindingList },
    }),
    async (c) => c.json(await listWorkloadBindings(d, c.get("principal"), c.req.param("issuer"))),
  );
  r.post(
    "/:issuer/bindings",
    describe({
      summary: "Bind claim conditions to a vault and a role",
      tags,
      auth: "bearer",
      who: owner,
      success: { status: 201, schema: WorkloadBindingView },
      errors: [409],
    }),
    jsonBody(WorkloadBindingInput),
    async (c) => c.json(await addWorkloadBinding(d, c.get("principal"), c.req.param("issuer"), c.req.valid("json")), 201),
  );
  r.delete(
    "/:issuer/bindings/:name",
    describe({ summary: "Remove a binding, its agent and every session exchanged under it", tags, auth: "bearer", who: owner, success: { status: 204 } }),
    async (c) => {
      await removeWorkloadBinding(d, c.get("principal"), c.req.param("issuer"), c.req.param("name"));
      return c.body(null, 204);
    },
  );
  return r;
}

/** The exchange's body, form-encoded (RFC 8693's own encoding) or JSON, read by TokenExchangeInput. */
const exchangeBody: MiddlewareHandler = Object.assign(
  (async (c, next) => {
    const text = await readCappedText(c, EXCHANGE_MAX_BYTES);
    const type = (c.req.header("content-type") ?? "").toLowerCase();
    let raw: unknown;
    if (type.startsWith("application/x-www-form-urlencoded")) raw = Object.fromEntries(new URLSearchParams(text));
    else {
      try {
        raw = text.trim() === "" ? {} : JSON.parse(text);
      } catch {
        throw new InvalidRequest("send the exchange form-encoded or as JSON");
      }
    }
    c.req.addValidatedData("json", parseWith(TokenExchangeInput, raw) as object);
    await next();
  }) as MiddlewareHandler,
  { [BODY_SCHEMA]: TokenExchangeInput },
);

export function workloadExchangeRoutes(d: Domain, log: Logger) {
  const r = new Hono<ApiEnv>();
  r.post(
    "/",
    describe({
      summary: "Exchange a workload's platform token (a JWT from a trusted issuer) for a session bound to a vault (RFC 8693)",
      description: "With the workload's current session as the bearer, a rotated platform token renews that session instead.",
      tags,
      auth: "none",
      who: "workloads whose token a binding admits",
      success: { status: 200, schema: TokenExchangeAnswer },
    }),
    exchangeBody,
    async (c) => {
      const input = c.req.valid("json" as never) as TokenExchangeInput;
      // With its current session as the bearer, a running workload renews that session with its rotated token.
      const bearer = bearerToken(c);
      const renewing = bearer ? { principal: await d.auth.authenticate(bearer), token: bearer } : undefined;
      const { answer, who } = await exchangeWorkloadToken(d, input, sessionClientOf(c, "api"), renewing);
      log.info("workload_exchange", who);
      return c.json(answer);
    },
  );
  return r;
}
