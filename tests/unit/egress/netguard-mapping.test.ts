// BROKER_RESOLVE in the network guard: a mapped host:port skips DNS, and its address is classified exactly as a
// resolved answer would be (default block, allowlist, private ranges, always-blocked, the broker's own listeners).

import { describe, expect, test } from "bun:test";
import { EgressBlocked } from "../../../src/errors.ts";
import { compileNetPolicy, resolveChecked, type NetPolicyInput, type Resolver } from "../../../src/egress/netguard.ts";

const neverCalled: Resolver = async (host) => {
  throw new Error(`resolver called for ${host}`);
};

function recordingResolver(answers: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  return Object.assign(
    async (host: string) => {
      calls.push(host);
      return answers[host] ?? [];
    },
    { calls },
  );
}

function mapping(address: string, settings: Partial<NetPolicyInput> = {}) {
  return compileNetPolicy({ allowPrivateRanges: false, allowlist: [], ...settings, hostMappings: [{ host: "api.github.com", port: 443, address }] });
}

/** What the guard says: the dialled addresses, or the refusal's message. */
async function verdict(host: string, port: number, policy: ReturnType<typeof compileNetPolicy>, resolver: Resolver = neverCalled): Promise<string[] | string> {
  try {
    return await resolveChecked(host, port, policy, resolver);
  } catch (err) {
    if (err instanceof EgressBlocked) return err.message;
    throw err;
  }
}

describe("a mapped host:port", () => {
  test("is dialled at the mapped address, DNS never asked", async () => {
    expect(await verdict("api.github.com", 443, mapping("8.8.8.8"))).toEqual(["8.8.8.8"]);
  });

  test("matches the name case-insensitively and without a trailing dot", async () => {
    expect(await verdict("API.GitHub.com.", 443, mapping("8.8.8.8"))).toEqual(["8.8.8.8"]);
  });

  test("other ports and other hosts still resolve through DNS", async () => {
    const resolver = recordingResolver({ "api.github.com": ["140.82.112.6"], "github.com": ["140.82.112.3"] });
    const policy = mapping("8.8.8.8");
    expect(await verdict("api.github.com", 8443, policy, resolver)).toEqual(["140.82.112.6"]);
    expect(await verdict("github.com", 443, policy, resolver)).toEqual(["140.82.112.3"]);
    expect(resolver.calls).toEqual(["api.github.com", "github.com"]);
  });

  test("an IP-literal destination is never mapped", async () => {
    expect(await verdict("127.0.0.1", 443, mapping("8.8.8.8"))).toBe("egress to 127.0.0.1 is blocked: loopback range 127.0.0.0/8");
  });
});

describe("the guard judges the mapped address as it would a DNS answer", () => {
  test("loopback: refused by default, allowed by the allowlist or with private ranges allowed", async () => {
    expect(await verdict("api.github.com", 443, mapping("127.0.0.1"))).toBe("egress to api.github.com is blocked: loopback range 127.0.0.0/8");
    expect(await verdict("api.github.com", 443, mapping("::1"))).toBe("egress to api.github.com is blocked: loopback address ::1/128");
    expect(await verdict("api.github.com", 443, mapping("127.0.0.1", { allowlist: ["127.0.0.1/32"] }))).toEqual(["127.0.0.1"]);
    expect(await verdict("api.github.com", 443, mapping("127.0.0.1", { allowPrivateRanges: true }))).toEqual(["127.0.0.1"]);
  });

  test("a private address outside the allowlist stays refused", async () => {
    expect(await verdict("api.github.com", 443, mapping("10.1.2.3", { allowlist: ["127.0.0.1/32"] }))).toBe(
      "egress to api.github.com is blocked: private range 10.0.0.0/8",
    );
  });

  for (const address of ["169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200"]) {
    test(`${address} is refused whatever the settings`, async () => {
      for (const settings of [{}, { allowPrivateRanges: true }, { allowlist: ["0.0.0.0/0", "::/0"] }]) {
        const said = await verdict("api.github.com", 443, mapping(address, settings));
        expect(typeof said === "string" && said.startsWith("egress to api.github.com is blocked: ")).toBe(true);
      }
    });
  }

  test("the broker's own listener is refused even with private ranges allowed", async () => {
    const policy = compileNetPolicy({
      allowPrivateRanges: true,
      allowlist: [],
      ownListeners: [{ host: "127.0.0.1", port: 14321 }],
      hostMappings: [{ host: "api.github.com", port: 14321, address: "127.0.0.1" }],
    });
    expect(await verdict("api.github.com", 14321, policy)).toBe("egress to api.github.com is blocked: the broker's own listener (port 14321)");
  });
});
