// One HTTPS exchange with a secret store (or its login or token endpoint), through the same network guard
// and verified TLS client as every upstream request: a connection's address is a host like any other, so
// it cannot point the broker at an internal address unless the operator allowed that range. Never follows
// a redirect; reads at most 1 MiB of the answer, counted as it arrives.

import { EgressBlocked } from "../errors.ts";
import { cappedBody, type HeaderList } from "../http/index.ts";
import { resolveChecked, type NetPolicy, type Resolver, type Upstream } from "../egress/index.ts";
import { SecretStoreError } from "./types.ts";

export interface StoreHttpDeps {
  readonly upstream: Upstream;
  readonly policy: NetPolicy;
  readonly resolver: Resolver;
}

export interface StoreRequest {
  readonly method: "GET" | "POST" | "PUT";
  /** https://host[:port]/path?query */
  readonly url: string;
  readonly headers: HeaderList;
  readonly body?: Uint8Array;
}

export interface StoreAnswer {
  readonly status: number;
  readonly headers: HeaderList;
  readonly body: Uint8Array;
}

const MAX_ANSWER_BYTES = 1024 * 1024;

/** Sends `req`; a guard refusal or an unreachable host is a SecretStoreError naming the host only. */
export async function storeHttp(deps: StoreHttpDeps, req: StoreRequest): Promise<StoreAnswer> {
  const u = new URL(req.url);
  if (u.protocol !== "https:") throw new SecretStoreError(`${u.host}: only https:// store addresses are used`, "invalid");
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const port = Number(u.port || 443);
  let answer;
  try {
    answer = await deps.upstream.send(
      { host, port, addresses: () => resolveChecked(host, port, deps.policy, deps.resolver) },
      {
        method: req.method,
        target: `${u.pathname}${u.search}`,
        headers: req.headers,
        body: req.body ? new Blob([req.body as Uint8Array<ArrayBuffer>]).stream() : null,
        bodyLength: req.body ? req.body.byteLength : 0,
      },
    );
  } catch (err) {
    if (err instanceof EgressBlocked) throw new SecretStoreError(`${u.host} is blocked by the network guard`, "invalid");
    throw new SecretStoreError(`${u.host} could not be reached`, "unreachable");
  }
  const body = await cappedBody(answer.body, MAX_ANSWER_BYTES).catch(() => {
    throw new SecretStoreError(`${u.host} broke off its answer`, "unreachable");
  });
  if (body === undefined) throw new SecretStoreError(`${u.host} sent an answer larger than ${MAX_ANSWER_BYTES} bytes`, "invalid");
  return { status: answer.status, headers: answer.headers, body };
}

/** The answer's JSON object, or undefined when it is not one. */
export function jsonObject(a: StoreAnswer): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(a.body)) as unknown;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
