// `broker workload-issuer add|update|list|remove` (issue 39; docs/api.md, Workload identity): the issuers whose
// tokens the broker trusts, with their keys found by discovery, at a JWKS address, or given as a file. The instance
// owner only; the bindings from their claims to vaults are workload-binding.ts.

import { readFileSync } from "node:fs";
import { defineCommand } from "citty";
import type { WorkloadIssuerListBody, WorkloadIssuerViewBody } from "../../contract/index.ts";
import { apiPath, CliFailure, formatTime, jsonArg, openContext, printJson, printLine, printTable } from "../kit/index.ts";
import { OWNER_HINT } from "./workload-binding.ts";

const keyArgs = {
  "jwks-url": { type: "string", description: "Where its keys are, when it has no discovery document (https://…)" },
  "jwks-file": { type: "string", description: "A JWKS file with its public keys, for an issuer the broker cannot reach (a cluster's keys)" },
} as const;

/** The key source flags as the API's fields; a JWKS file is read here and sent as its text. */
function keysOf(args: { "jwks-url"?: string; "jwks-file"?: string }): { jwks_url?: string; jwks?: string } {
  if (args["jwks-url"] && args["jwks-file"]) throw new CliFailure("give --jwks-url or --jwks-file, not both", undefined, 2);
  if (args["jwks-url"]) return { jwks_url: args["jwks-url"] };
  if (!args["jwks-file"]) return {};
  try {
    return { jwks: readFileSync(args["jwks-file"], "utf8") };
  } catch (err) {
    throw new CliFailure(
      `cannot read the JWKS file ${args["jwks-file"]}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
      'give the path of a JSON file with {"keys": [...]}',
      2,
    );
  }
}

function readAudiences(text: string): string[] {
  return text
    .split(",")
    .map((a) => a.trim())
    .filter(Boolean);
}

function skewOf(text: string | undefined): { clock_skew_seconds?: number } {
  if (text === undefined) return {};
  const skew = Number(text);
  if (!Number.isInteger(skew)) throw new CliFailure("--clock-skew must be a whole number of seconds", undefined, 2);
  return { clock_skew_seconds: skew };
}

/** The keys an issuer has now, as the API takes them: kept by an update that names none. */
function keptKeys(i: WorkloadIssuerViewBody): { jwks_url?: string; jwks?: string } {
  if (i.jwks !== null) return { jwks: i.jwks };
  return i.jwks_url ? { jwks_url: i.jwks_url } : {};
}

function describeKeys(i: WorkloadIssuerViewBody): string {
  if (i.jwks_kids !== null) return `file (${i.jwks_kids.length ? i.jwks_kids.join(",") : "keys without kid"})`;
  return i.jwks_url ?? "discovery";
}

const issuerAdd = defineCommand({
  meta: {
    name: "add",
    description:
      "Trust a workload issuer (owner). Example: broker workload-issuer add github --issuer https://token.actions.githubusercontent.com --audience https://broker.example.com",
  },
  args: {
    name: { type: "positional", description: "The issuer's name (1-24 lower-case letters, digits, -)", required: true },
    issuer: { type: "string", description: "The iss its tokens carry (https://…); its keys are found by OIDC discovery", required: true },
    ...keyArgs,
    audience: { type: "string", description: "Audiences a token must name, comma-separated", required: true },
    "clock-skew": { type: "string", description: "Seconds of clock skew tolerated (0-300, default 60)" },
    "require-jti": { type: "boolean", description: "Refuse tokens without a jti, so each token is exchanged once" },
    ...jsonArg,
  },
  async run({ args }) {
    const body = {
      name: args.name,
      issuer: args.issuer,
      ...keysOf(args),
      audiences: readAudiences(args.audience),
      ...skewOf(args["clock-skew"]),
      ...(args["require-jti"] ? { require_jti: true } : {}),
    };
    const ctx = openContext();
    const issuer = await ctx.client.request<WorkloadIssuerViewBody>("POST", apiPath("v1", "workload-issuers"), { body, hints: { 403: OWNER_HINT } });
    if (args.json) return printJson(issuer);
    printLine(
      `Trusting ${issuer.name} (${issuer.issuer}). Bind its tokens to a vault with: broker workload-binding add ${issuer.name} <name> --vault V --claim sub=…`,
    );
  },
});

const issuerUpdate = defineCommand({
  meta: {
    name: "update",
    description:
      "Change a trusted issuer; what is not given stays, and its bindings stay (owner). Example: broker workload-issuer update cluster --jwks-file keys.json",
  },
  args: {
    name: { type: "positional", description: "The issuer's name", required: true },
    issuer: { type: "string", description: "The iss its tokens carry (https://…)" },
    ...keyArgs,
    discovery: { type: "boolean", description: "Find its keys by OIDC discovery again (drops a JWKS URL or file)" },
    audience: { type: "string", description: "Audiences a token must name, comma-separated (replaces the list)" },
    "clock-skew": { type: "string", description: "Seconds of clock skew tolerated (0-300)" },
    "require-jti": { type: "boolean", description: "Refuse tokens without a jti (--no-require-jti: accept them)" },
    ...jsonArg,
  },
  async run({ args }) {
    const ctx = openContext();
    const hints = { 403: OWNER_HINT };
    const { issuers } = await ctx.client.request<WorkloadIssuerListBody>("GET", apiPath("v1", "workload-issuers"), { hints });
    const now = issuers.find((i) => i.name === args.name);
    if (!now) throw new CliFailure(`no workload issuer named ${args.name}`, "see them with: broker workload-issuer list", 1);
    const keys = keysOf(args);
    if (args.discovery && (keys.jwks || keys.jwks_url)) throw new CliFailure("--discovery is instead of --jwks-url or --jwks-file", undefined, 2);
    const body = {
      name: now.name,
      issuer: args.issuer ?? now.issuer,
      ...(args.discovery ? {} : Object.keys(keys).length ? keys : keptKeys(now)),
      audiences: args.audience === undefined ? now.audiences : readAudiences(args.audience),
      clock_skew_seconds: now.clock_skew_seconds,
      ...skewOf(args["clock-skew"]),
      require_jti: args["require-jti"] ?? now.require_jti,
    };
    const issuer = await ctx.client.request<WorkloadIssuerViewBody>("PUT", apiPath("v1", "workload-issuers", args.name), { body, hints });
    if (args.json) return printJson(issuer);
    printLine(`Changed issuer ${issuer.name}: keys from ${describeKeys(issuer)}, audiences ${issuer.audiences.join(", ")}; its bindings stay.`);
  },
});

const issuerList = defineCommand({
  meta: { name: "list", description: "List the trusted workload issuers (owner)" },
  args: jsonArg,
  async run({ args }) {
    const ctx = openContext();
    const { issuers } = await ctx.client.request<WorkloadIssuerListBody>("GET", apiPath("v1", "workload-issuers"), { hints: { 403: OWNER_HINT } });
    if (args.json) return printJson(issuers);
    printTable(
      issuers,
      [
        { title: "NAME", value: (i) => i.name },
        { title: "ISSUER", value: (i) => i.issuer, max: 60 },
        { title: "KEYS", value: describeKeys, max: 60 },
        { title: "AUDIENCES", value: (i) => i.audiences.join(","), max: 40 },
        { title: "JTI", value: (i) => (i.require_jti ? "required" : "if given") },
        { title: "CREATED", value: (i) => formatTime(i.created_at) },
      ],
      "No workload issuers. Add one with: broker workload-issuer add <name> --issuer https://… --audience …",
    );
  },
});

const issuerRemove = defineCommand({
  meta: { name: "remove", description: "Stop trusting an issuer: its bindings, their agents and sessions go too (owner)" },
  args: { name: { type: "positional", description: "The issuer's name", required: true } },
  async run({ args }) {
    const ctx = openContext();
    await ctx.client.request("DELETE", apiPath("v1", "workload-issuers", args.name), { hints: { 403: OWNER_HINT } });
    printLine(`Removed issuer ${args.name}, its bindings and their sessions.`);
  },
});

export const workloadIssuerCommand = defineCommand({
  meta: { name: "workload-issuer", description: "Issuers whose tokens workloads sign in with (CI OIDC, Kubernetes, SPIFFE)" },
  subCommands: { add: issuerAdd, update: issuerUpdate, list: issuerList, remove: issuerRemove },
});
