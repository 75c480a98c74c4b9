// The egress core's handling of gRPC's own encodings on an injected request (issue 31, items 2 and 3),
// through egress() with a scripted upstream answer: a gRPC body under a Content-Encoding, and a -bin
// header that is not base64, are refused with the 502 for undecodable bodies and the upstream's body
// is let go (cancelled); -bin head fields and trailers reach the agent scanned decoded; a -bin trailer
// that is not base64 is dropped and the gRPC call made to fail.

import { beforeAll, describe, expect, test } from "bun:test";
import { UndecodableResponse } from "../../../src/errors.ts";
import { compileNetPolicy, createPlanCache, egress, type Answer, type EgressDeps, type PlanCache, type Upstream } from "../../../src/egress/index.ts";
import type { HeaderList } from "../../../src/http/http1.ts";
import { createMemoryLogger } from "../../../src/log.ts";
import { createTestApi, type TestApi } from "../../helpers/api.ts";

const SECRET = `sk-grpc-md-${crypto.randomUUID()}`;
const AUTH = `Bearer ${SECRET}`;
const b64 = (text: string) => Buffer.from(text).toString("base64");
const lenient = (text: string) => b64(text).replace(/(.{8})/g, "$1.");
let api: TestApi;
let plans: PlanCache;
let vault: { id: number; name: string };

beforeAll(async () => {
  api = await createTestApi();
  const reg = await api.call("POST", "/v1/auth/register", { body: { email: "owner@example.com", password: "correct horse battery" } });
  const token = reg.body.token as string;
  expect((await api.call("POST", "/v1/vaults", { token, body: { name: "v1" } })).status).toBe(201);
  expect((await api.call("PUT", "/v1/vaults/v1/credentials/API_KEY", { token, body: { value: SECRET } })).status).toBe(200);
  expect(
    (await api.call("POST", "/v1/vaults/v1/services", { token, body: { host: "grpc.example.com", auth: { type: "bearer", token: "API_KEY" } } })).status,
  ).toBe(201);
  vault = { id: (await api.store.vaults.byName("v1"))!.id, name: "v1" };
  plans = createPlanCache(api.store, api.domain.dataKey, () => ({}));
});

/** An upstream answer whose body is a stream that says whether it was cancelled. */
function scripted(headers: HeaderList, trailers?: HeaderList) {
  const state = { cancelled: false, authorization: "" };
  const body = new ReadableStream<Uint8Array>({
    pull: (ctrl) => ctrl.enqueue(new Uint8Array(5)), // an empty gRPC message, again and again until read or cancelled
    cancel: () => void (state.cancelled = true),
  });
  const upstream: Upstream = {
    async send(_dest, req) {
      state.authorization = req.headers.find(([k]) => k.toLowerCase() === "authorization")?.[1] ?? "";
      const answer: Answer = { status: 200, statusText: "", headers, body, ...(trailers ? { trailers: Promise.resolve(trailers) } : {}) };
      return answer;
    },
    open: async () => {
      throw new Error("unused");
    },
    openPlain: async () => {
      throw new Error("unused");
    },
    close() {},
  };
  return { upstream, state };
}

function deps(upstream: Upstream): EgressDeps {
  return {
    plans,
    policy: compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [] }),
    resolver: async () => ["192.0.2.10"],
    upstream,
    audit: { record() {} },
    log: createMemoryLogger(),
    now: Date.now,
    maxRequestBytes: 0,
    maxResponseBytes: 0,
  };
}

const input = {
  principal: "p",
  contained: false,
  host: "grpc.example.com",
  port: 443,
  method: "POST",
  target: "/echo.v1.Echo/Unary",
  headers: [["content-type", "application/grpc"]] as [string, string][],
  body: null,
  bodyLength: null,
  ingress: "transparent" as const,
};

async function refusal(headers: HeaderList): Promise<{ err: unknown; cancelled: boolean }> {
  const { upstream, state } = scripted(headers);
  const err = await egress({ ...input, vault }, deps(upstream)).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(state.authorization).toBe(AUTH); // the credential went out, so the answer is scanned
  return { err, cancelled: state.cancelled };
}

describe("refused before any byte reaches the agent, the upstream body let go", () => {
  test("a gRPC response under Content-Encoding: deflate", async () => {
    const { err, cancelled } = await refusal([
      ["content-type", "application/grpc"],
      ["content-encoding", "deflate"],
    ]);
    expect(err).toBeInstanceOf(UndecodableResponse);
    expect(cancelled).toBe(true);
  });

  test("a -bin header that is not base64, on a gRPC response or any other", async () => {
    for (const type of ["application/grpc", "application/json"]) {
      const { err, cancelled } = await refusal([
        ["content-type", type],
        ["x-echo-bin", lenient(AUTH)],
      ]);
      expect(err).toBeInstanceOf(UndecodableResponse);
      expect((err as Error).message.includes(SECRET)).toBe(false);
      expect(cancelled).toBe(true);
    }
  });
});

describe("scanned decoded on the way to the agent", () => {
  test("-bin head fields and trailers hold Bearer [redacted] once decoded", async () => {
    const { upstream } = scripted(
      [
        ["content-type", "application/grpc"],
        ["x-echo-bin", b64(AUTH)],
      ],
      [
        ["grpc-status", "0"],
        ["grpc-status-details-bin", b64(AUTH)],
      ],
    );
    const res = await egress({ ...input, vault }, deps(upstream));
    const decode = (lines: HeaderList, name: string) => Buffer.from(lines.find(([k]) => k === name)?.[1] ?? "", "base64").toString();
    expect(decode(res.headers, "x-echo-bin")).toBe("Bearer [redacted]");
    const trailers = await res.trailers!;
    expect(decode(trailers, "grpc-status-details-bin")).toBe("Bearer [redacted]");
    expect(trailers.find(([k]) => k === "grpc-status")?.[1]).toBe("0");
    if (res.body && !(res.body instanceof Uint8Array)) await res.body.cancel();
  });

  test("a -bin trailer that is not base64: dropped, grpc-status INTERNAL, x-broker-error says why", async () => {
    const { upstream } = scripted(
      [["content-type", "application/grpc"]],
      [
        ["grpc-status", "0"],
        ["x-echo-bin", lenient(AUTH)],
      ],
    );
    const res = await egress({ ...input, vault }, deps(upstream));
    expect(res.status).toBe(200);
    const trailers = Object.fromEntries(await res.trailers!);
    expect("x-echo-bin" in trailers).toBe(false);
    expect(trailers).toMatchObject({ "grpc-status": "13", "x-broker-error": "undecodable_response" });
    if (res.body && !(res.body instanceof Uint8Array)) await res.body.cancel();
  });
});
