// `vault run`'s NO_PROXY (never a host a service names: loopback goes when a service is on loopback), the
// exit codes it explains as TLS verification failures, and `agent redeem`'s reading of an invite.

import { expect, test } from "bun:test";
import { childEnvironment, noProxyFor } from "../../../src/cli/commands/vault-run.ts";
import { parseAgentInvite } from "../../../src/cli/commands/agent-redeem.ts";
import { tlsFailure } from "../../../src/cli/kit/run-activity.ts";
import { CliFailure } from "../../../src/cli/kit/index.ts";

const run = { addr: "http://127.0.0.1:14321", token: "av_sess_x", vault: "v", proxyPort: 14322, caFile: "/tmp/ca.pem", tls: false };

test("NO_PROXY keeps loopback only while no service is on loopback", () => {
  expect(noProxyFor([])).toBe("localhost,127.0.0.1");
  expect(noProxyFor(["api.github.com", "api.example.com:8443", "*.example.org"])).toBe("localhost,127.0.0.1");
  for (const host of ["127.0.0.1:8443", "127.0.0.2", "localhost:3000", "app.localhost", "*.localhost", "[::1]:8443", "::1"])
    expect(noProxyFor(["api.github.com", host])).toBe("");
});

test("an empty NO_PROXY is not set at all (nor no_grpc_proxy)", () => {
  const kept = childEnvironment({}, { ...run, noProxy: "localhost,127.0.0.1" });
  expect([kept.NO_PROXY, kept.no_grpc_proxy]).toEqual(["localhost,127.0.0.1", "localhost,127.0.0.1"]);
  const none = childEnvironment({ NO_PROXY: "*", no_proxy: "*", no_grpc_proxy: "*" }, { ...run, noProxy: "" });
  for (const name of ["NO_PROXY", "no_proxy", "no_grpc_proxy"]) expect(none[name]).toBeUndefined();
  expect(none.HTTPS_PROXY).toBe("http://av_sess_x:v@127.0.0.1:14322");
});

test("exit codes read as a TLS verification failure", () => {
  expect(tlsFailure(["curl", "https://x"], 60)).toBe("exit code 60: the TLS certificate was not verified");
  expect(tlsFailure(["/usr/bin/curl"], 60)).toBe("exit code 60: the TLS certificate was not verified");
  expect(tlsFailure(["sh", "-c", "curl …"], 60)).toContain("(if it is curl's)");
  expect(tlsFailure(["wget", "https://x"], 5)).toContain("wget's exit code 5");
  for (const [cmd, code] of [
    ["curl", 0],
    ["curl", 7],
    ["git", 5],
    ["sh", 1],
  ] as const)
    expect(tlsFailure([cmd], code)).toBeUndefined();
});

test("agent redeem takes a link (its base is the broker) or a bare token, and names a person's invite", () => {
  expect(parseAgentInvite("https://broker.example/invite/av_inv_abc-_1")).toEqual({ token: "av_inv_abc-_1", base: "https://broker.example" });
  expect(parseAgentInvite(" http://127.0.0.1:14321/broker/invite/av_inv_x/ ")).toEqual({ token: "av_inv_x", base: "http://127.0.0.1:14321/broker" });
  expect(parseAgentInvite("av_inv_x")).toEqual({ token: "av_inv_x" });
  expect(() => parseAgentInvite("https://b.example/v1/vault-invites/av_uinv_x/accept")).toThrow("an invite for a person");
  for (const bad of ["", "nonsense", "ftp://b.example/invite/av_inv_x", "https://b.example/invite/av_inv_x?y=1", "https://u:p@b.example/invite/av_inv_x"])
    expect(() => parseAgentInvite(bad)).toThrow(CliFailure);
});
