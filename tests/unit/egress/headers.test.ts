// Header rules in both directions.

import { describe, expect, test } from "bun:test";
import { buildUpstreamHeaders, cleanResponseHeaders, type Injection } from "../../../src/egress/headers.ts";
import { Secret } from "../../../src/secret.ts";

const inject = (header: string, value: string): Injection => ({ header, value: new Secret(value) });

describe("buildUpstreamHeaders", () => {
  test("drops hop-by-hop, framing and Host headers", () => {
    const src: [string, string][] = [
      ["Connection", "keep-alive"],
      ["Keep-Alive", "timeout=5"],
      ["Proxy-Connection", "keep-alive"],
      ["TE", "trailers"],
      ["Trailer", "X-T"],
      ["Transfer-Encoding", "chunked"],
      ["Upgrade", "websocket"],
      ["Proxy-Authenticate", "Basic"],
      ["Host", "evil.test"],
      ["Content-Length", "3"],
      ["Accept", "*/*"],
    ];
    expect(buildUpstreamHeaders(src, undefined, false)).toEqual([["Accept", "*/*"]]);
  });

  test("drops headers named in Connection (any case, several tokens, several Connection headers)", () => {
    const src: [string, string][] = [
      ["connection", "X-Secret-Hop, x-other"],
      ["Connection", " close , X-Third"],
      ["x-secret-hop", "1"],
      ["X-Other", "2"],
      ["x-third", "3"],
      ["x-kept", "4"],
    ];
    expect(buildUpstreamHeaders(src, undefined, false)).toEqual([["x-kept", "4"]]);
  });

  test("drops X-Vault and Proxy-Authorization always", () => {
    const src: [string, string][] = [
      ["X-Vault", "v"],
      ["Proxy-Authorization", "Basic abc"],
      ["x-keep", "k"],
    ];
    expect(buildUpstreamHeaders(src, undefined, false)).toEqual([["x-keep", "k"]]);
    expect(buildUpstreamHeaders(src, undefined, true)).toEqual([["x-keep", "k"]]);
  });

  test("client Authorization is dropped on explicit ingress, kept on transparent passthrough", () => {
    const src: [string, string][] = [
      ["Authorization", "Bearer av_sess_x"],
      ["accept", "a"],
    ];
    expect(buildUpstreamHeaders(src, undefined, true)).toEqual([["accept", "a"]]);
    expect(buildUpstreamHeaders(src, undefined, false)).toEqual(src);
  });

  test("keeps order, case and duplicates of everything else", () => {
    const src: [string, string][] = [
      ["anthropic-version", "2023-06-01"],
      ["X-Dup", "1"],
      ["Accept-Encoding", "gzip"],
      ["x-dup", "2"],
      ["If-None-Match", '"etag"'],
      ["X-Dup", "3"],
    ];
    expect(buildUpstreamHeaders(src, undefined, true)).toEqual(src);
  });

  test("injection replaces any client value: exactly one auth header", () => {
    const src: [string, string][] = [
      ["Authorization", "Bearer client"],
      ["authorization", "Bearer client2"],
      ["accept", "a"],
    ];
    for (const explicit of [true, false]) {
      const out = buildUpstreamHeaders(src, inject("authorization", "Bearer real"), explicit);
      expect(out.filter(([k]) => k.toLowerCase() === "authorization")).toEqual([["authorization", "Bearer real"]]);
      expect(out).toEqual([
        ["accept", "a"],
        ["authorization", "Bearer real"],
      ]);
    }
  });

  test("custom header injection replaces the client's header of that name, any case", () => {
    const src: [string, string][] = [
      ["X-Api-Key", "client"],
      ["x-api-key", "client2"],
      ["Authorization", "Bearer av_sess_x"],
    ];
    const out = buildUpstreamHeaders(src, inject("x-api-key", "pfx real"), true);
    expect(out).toEqual([["x-api-key", "pfx real"]]);
  });

  test("a client cannot shield its header from replacement by naming it in Connection", () => {
    const src: [string, string][] = [
      ["Connection", "authorization"],
      ["Authorization", "Bearer client"],
    ];
    const out = buildUpstreamHeaders(src, inject("authorization", "Bearer real"), true);
    expect(out).toEqual([["authorization", "Bearer real"]]);
  });

  test("the injected value stays wrapped until the list is built", () => {
    const inj = inject("authorization", "Bearer real");
    expect(String(inj.value)).toBe("[redacted]");
    expect(JSON.stringify(inj)).not.toContain("real");
  });
});

describe("cleanResponseHeaders", () => {
  test("drops Set-Cookie (explicit proxy), hop-by-hop and X-Broker-Error, keeps the rest", () => {
    const h = new Headers();
    h.append("Set-Cookie", "a=1");
    h.append("Set-Cookie", "b=2");
    h.append("Set-Cookie2", "c=3");
    h.append("Connection", "keep-alive, X-Hop");
    h.append("X-Hop", "1");
    h.append("Keep-Alive", "timeout=5");
    h.append("Transfer-Encoding", "chunked");
    h.append("Upgrade", "h2c");
    h.append("Proxy-Authenticate", "Basic");
    h.append("Trailer", "X");
    h.append("Content-Type", "text/plain");
    h.append("Content-Encoding", "gzip");
    h.append("Content-Length", "10");
    h.append("ETag", '"x"');
    h.append("Location", "/next");
    h.append("X-Broker-Error", "forbidden");
    const out = new Headers(cleanResponseHeaders([...h], { keepCookies: false }));
    const names: string[] = [];
    out.forEach((_v, k) => names.push(k));
    expect(names.sort()).toEqual(["content-encoding", "content-length", "content-type", "etag", "location"]);
    expect(out.getSetCookie()).toEqual([]);
    expect(out.get("content-encoding")).toBe("gzip");
  });

  test("names are compared whatever their case (a list from any producer)", () => {
    const out = cleanResponseHeaders(
      [
        ["Set-Cookie", "a=1"],
        ["X-Broker-Error", "forbidden"],
        ["Connection", "X-Hop"],
        ["X-Hop", "1"],
        ["Content-Type", "text/plain"],
      ],
      { keepCookies: false },
    );
    expect(out).toEqual([["Content-Type", "text/plain"]]);
  });

  test("keeps each Set-Cookie intact for the tunnel, and still drops X-Broker-Error", () => {
    const h = new Headers();
    h.append("Set-Cookie", "a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Path=/");
    h.append("Set-Cookie", "b=2");
    h.append("X-Broker-Error", "rate_limited");
    h.append("Content-Type", "text/plain");
    const out = new Headers(cleanResponseHeaders([...h], { keepCookies: true }));
    expect(out.getSetCookie()).toEqual(["a=1; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Path=/", "b=2"]);
    expect(out.has("x-broker-error")).toBe(false);
    expect(out.get("content-type")).toBe("text/plain");
  });

  test("a Connection header naming 16,000 tokens (several lines) is handled in linear time, and drops only what it names", () => {
    const tokens = Array.from({ length: 16_000 }, (_, i) => `x-${i.toString(36)}`);
    const src: [string, string][] = [
      ["Connection", tokens.slice(0, 8_000).join(",")],
      ["connection", `${tokens.slice(8_000).join(", ")}, Content-Encoding`],
      ["X-0", "named"],
      ["x-" + (15_999).toString(36), "named"],
      ["Content-Encoding", "gzip"],
      ["X-Kept", "1"],
    ];
    const out = cleanResponseHeaders(src, { keepCookies: true });
    expect(out).toEqual([
      ["Content-Encoding", "gzip"],
      ["X-Kept", "1"],
    ]);
  });
});
