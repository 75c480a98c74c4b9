// Network guard: a table of address forms, each run with the default policy, with an allowlist covering it and with
// private ranges allowed; then resolution (every answer checked, literals never resolved, no caching) and own listeners.

import { describe, expect, test } from "bun:test";
import { EgressBlocked, UpstreamUnreachable } from "../../../src/errors.ts";
import { checkAddress, compileNetPolicy, resolveChecked, systemResolver, type NetPolicy, type Resolver } from "../../../src/egress/netguard.ts";

/** always: blocked whatever the settings; private: blocked by default only; refused: not accepted as an address. */
type Kind = "always" | "private" | "refused" | "public";
type Row = readonly [address: string, kind: Kind, allowlist: readonly string[]];

const EVERYTHING = ["0.0.0.0/0", "::/0"];
const TEREDO_127_0_0_1 = "2001:0:4136:e378:8000:63bf:80ff:fffe"; // server 65.54.227.120, client 127.0.0.1 (XOR ffffffff)
const TEREDO_METADATA = "2001:0:4136:e378:8000:63bf:5601:5601"; // client 169.254.169.254

const ROWS: readonly Row[] = [
  ["169.254.169.254", "always", ["169.254.169.254/32", ...EVERYTHING]],
  ["::ffff:169.254.169.254", "always", ["169.254.169.254/32", ...EVERYTHING]],
  ["::ffff:a9fe:a9fe", "always", ["169.254.0.0/16", ...EVERYTHING]],
  ["::169.254.169.254", "always", EVERYTHING],
  ["64:ff9b::a9fe:a9fe", "always", EVERYTHING],
  ["64:ff9b:1::a9fe:a9fe", "always", EVERYTHING],
  ["2002:a9fe:a9fe::1", "always", EVERYTHING],
  [TEREDO_METADATA, "always", EVERYTHING],
  ["fd00:ec2::254", "always", ["fd00:ec2::254/128", ...EVERYTHING]],
  ["FD00:0EC2:0:0:0:0:0:0254", "always", EVERYTHING],
  ["[fd00:ec2::254]", "always", EVERYTHING],
  ["169.254.170.2", "always", ["169.254.170.2/32", "169.254.0.0/16", ...EVERYTHING]],
  ["::ffff:169.254.170.2", "always", ["169.254.0.0/16", "::ffff:0:0/96", ...EVERYTHING]],
  ["64:ff9b::a9fe:aa02", "always", ["169.254.0.0/16", "64:ff9b::/96", ...EVERYTHING]],
  ["2002:a9fe:aa02::1", "always", ["169.254.0.0/16", "2002::/16", ...EVERYTHING]],
  ["169.254.170.23", "always", ["169.254.170.23/32", "169.254.0.0/16", ...EVERYTHING]],
  ["::ffff:a9fe:aa17", "always", ["169.254.0.0/16", ...EVERYTHING]],
  ["64:ff9b:1::a9fe:aa17", "always", ["169.254.0.0/16", ...EVERYTHING]],
  ["fd00:ec2::23", "always", ["fd00:ec2::23/128", "fd00::/8", "fc00::/7", ...EVERYTHING]],
  ["fd00:ec2:0:0:0:0:0:23", "always", ["fd00::/8", ...EVERYTHING]],
  ["fd00:ec2:0::254", "always", ["fd00::/8", "fc00::/7"]],
  ["100.100.100.200", "always", ["100.100.100.200/32", "100.64.0.0/10", ...EVERYTHING]],
  ["::ffff:100.100.100.200", "always", ["100.64.0.0/10", ...EVERYTHING]],
  ["64:ff9b::6464:64c8", "always", ["100.64.0.0/10", ...EVERYTHING]],
  ["2002:6464:64c8::", "always", ["100.64.0.0/10", ...EVERYTHING]],
  ["192.0.0.192", "always", ["192.0.0.192/32", "192.0.0.0/24", ...EVERYTHING]],
  ["::ffff:c000:c0", "always", ["192.0.0.0/24", ...EVERYTHING]],
  ["64:ff9b::192.0.0.192", "always", ["192.0.0.0/24", ...EVERYTHING]],
  ["2002:c000:c0::", "always", ["192.0.0.0/24", ...EVERYTHING]],

  ["127.0.0.1", "private", ["127.0.0.1/32"]],
  ["127.0.0.2", "private", ["127.0.0.0/8"]],
  ["::1", "private", ["::1/128"]],
  ["0:0:0:0:0:0:0:1", "private", ["::1/128"]],
  ["[::1]", "private", ["::1/128"]],
  ["10.1.2.3", "private", ["10.0.0.0/8"]],
  ["172.16.0.1", "private", ["172.16.0.0/12"]],
  ["172.31.255.255", "private", ["172.16.0.0/12"]],
  ["192.168.1.1", "private", ["192.168.1.0/24"]],
  ["100.64.0.1", "private", ["100.64.0.0/10"]],
  ["169.254.1.1", "private", ["169.254.0.0/16"]],
  ["fe80::1", "private", ["fe80::/10"]],
  ["fe80::1%eth0", "private", ["fe80::/10"]],
  ["fc00::1", "private", ["fc00::/7"]],
  ["fd12::1", "private", ["fd12::/16"]],
  ["fec0::1", "private", ["fec0::/10"]],
  ["0.0.0.0", "private", ["0.0.0.0/32"]],
  ["0.1.2.3", "private", ["0.0.0.0/8"]],
  ["::", "private", ["::/128"]],
  ["224.0.0.1", "private", ["224.0.0.0/4"]],
  ["ff02::1", "private", ["ff00::/8"]],
  ["255.255.255.255", "private", ["255.255.255.255/32"]],
  ["240.0.0.1", "private", ["240.0.0.0/4"]],
  ["::ffff:127.0.0.1", "private", ["127.0.0.1/32"]],
  ["::ffff:7f00:1", "private", ["127.0.0.1/32"]],
  ["::ffff:10.0.0.1", "private", ["::ffff:a00:0/104"]], // a mapped allowlist entry means its IPv4 range
  ["::127.0.0.1", "private", ["127.0.0.1/32"]],
  ["::7f00:1", "private", ["127.0.0.1/32"]],
  ["64:ff9b::7f00:1", "private", ["127.0.0.0/8"]],
  ["64:ff9b::127.0.0.1", "private", ["127.0.0.0/8"]],
  ["64:ff9b:1::7f00:1", "private", ["127.0.0.0/8"]],
  ["64:ff9b:1:0:7f:0:100:0", "private", ["127.0.0.1/32"]], // a /64 local-use prefix carrying 127.0.0.1 (read as /96: 1.0.0.0)
  ["64:ff9b:1:7f00:0:100::", "private", ["127.0.0.1/32", "0.0.0.0/8"]], // the /48 layout of 127.0.0.1
  ["2002:7f00:1::", "private", ["127.0.0.0/8"]],
  ["2002:c0a8:101::1", "private", ["192.168.1.1/32"]],
  [TEREDO_127_0_0_1, "private", ["127.0.0.1/32"]],

  ["0177.0.0.1", "refused", ["127.0.0.0/8", ...EVERYTHING]],
  ["2130706433", "refused", ["127.0.0.0/8", ...EVERYTHING]],
  ["127.1", "refused", ["127.0.0.0/8", ...EVERYTHING]],
  ["0x7f.1", "refused", ["127.0.0.0/8", ...EVERYTHING]],
  ["0x7f000001", "refused", EVERYTHING],
  ["127.0.0.01", "refused", EVERYTHING],
  ["::ffff:0177.0.0.1", "refused", EVERYTHING],
  ["::ffff:0x7f.0.0.1", "refused", EVERYTHING],
  ["[127.0.0.1]", "refused", EVERYTHING],
  ["8.8.8.8%eth0", "refused", EVERYTHING],
  ["fe80::1%", "refused", EVERYTHING],
  ["fe80::1%eth0/64", "refused", EVERYTHING],
  ["::00001", "refused", EVERYTHING],
  ["1::2::3", "refused", EVERYTHING],
  ["1:2:3:4:5:6:7", "refused", EVERYTHING],
  ["1.2.3.4.5", "refused", EVERYTHING],
  [" 8.8.8.8", "refused", EVERYTHING],
  ["8.8.8.8\n", "refused", EVERYTHING],
  ["example.com", "refused", EVERYTHING],
  ["", "refused", EVERYTHING],

  ["8.8.8.8", "public", ["8.8.8.8/32"]],
  ["1.1.1.1", "public", []],
  ["172.32.0.1", "public", []],
  ["172.15.255.255", "public", []],
  ["100.128.0.1", "public", []],
  ["223.255.255.255", "public", []],
  ["2606:4700:4700::1111", "public", []],
  ["::ffff:8.8.8.8", "public", []],
  ["64:ff9b::808:808", "public", []],
  ["64:ff9b:1::808:808", "public", []],
  ["2002:808:808::1", "public", []],
];

const POLICIES = ["default", "allowlisted", "private ranges allowed"] as const;
type PolicyName = (typeof POLICIES)[number];

/** Whether each kind is allowed under each policy. */
const EXPECTED: Record<Kind, Record<PolicyName, boolean>> = {
  always: { default: false, allowlisted: false, "private ranges allowed": false },
  private: { default: false, allowlisted: true, "private ranges allowed": true },
  refused: { default: false, allowlisted: false, "private ranges allowed": false },
  public: { default: true, allowlisted: true, "private ranges allowed": true },
};

function policyFor(name: PolicyName, allowlist: readonly string[]): NetPolicy {
  if (name === "default") return compileNetPolicy({ allowPrivateRanges: false, allowlist: [] });
  if (name === "allowlisted") return compileNetPolicy({ allowPrivateRanges: false, allowlist });
  return compileNetPolicy({ allowPrivateRanges: true, allowlist: [] });
}

describe("checkAddress: the address table", () => {
  for (const [address, kind, allowlist] of ROWS) {
    for (const name of POLICIES) {
      test(`${JSON.stringify(address)} (${kind}) with ${name}`, () => {
        const verdict = checkAddress(address, 443, policyFor(name, allowlist));
        expect(verdict.allowed).toBe(EXPECTED[kind][name]);
        if (!verdict.allowed && kind === "always") expect(verdict.reason).toContain("cloud metadata");
        if (!verdict.allowed && kind === "refused") expect(verdict.reason).toMatch(/not a valid IP address|ambiguous IPv4/);
      });
    }
  }

  test("allowlist 127.0.0.1/32 allows 127.0.0.1 but not 127.0.0.2", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.1/32"] });
    expect(checkAddress("127.0.0.1", 80, policy)).toEqual({ allowed: true });
    expect(checkAddress("127.0.0.2", 80, policy)).toEqual({ allowed: false, reason: "loopback range 127.0.0.0/8" });
  });

  test("the allowlist and private ranges together never allow the metadata address", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: true, allowlist: ["169.254.169.254/32", "fd00:ec2::254/128", ...EVERYTHING] });
    for (const ip of ["169.254.169.254", "::ffff:a9fe:a9fe", "fd00:ec2::254"]) expect(checkAddress(ip, 80, policy).allowed).toBe(false);
  });

  test("each credential endpoint is refused by name, with the allowlist covering it and private ranges allowed", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: true, allowlist: ["169.254.0.0/16", "100.64.0.0/10", "192.0.0.0/24", "fd00::/8", ...EVERYTHING] });
    const reasons = {
      "169.254.169.254": "cloud metadata endpoint (AWS, GCP, Azure and OCI instance metadata) 169.254.169.254/32",
      "fd00:ec2::254": "cloud metadata endpoint (AWS instance metadata over IPv6) fd00:ec2::254/128",
      "169.254.170.2": "cloud metadata endpoint (ECS task credentials) 169.254.170.2/32",
      "169.254.170.23": "cloud metadata endpoint (EKS pod identity) 169.254.170.23/32",
      "fd00:ec2::23": "cloud metadata endpoint (EKS pod identity over IPv6) fd00:ec2::23/128",
      "100.100.100.200": "cloud metadata endpoint (Alibaba Cloud instance metadata) 100.100.100.200/32",
      "192.0.0.192": "cloud metadata endpoint (Oracle Cloud instance metadata) 192.0.0.192/32",
    };
    for (const [ip, reason] of Object.entries(reasons)) expect(checkAddress(ip, 80, policy)).toEqual({ allowed: false, reason });
    expect(checkAddress("::ffff:169.254.170.2", 80, policy)).toEqual({
      allowed: false,
      reason: "cloud metadata endpoint (ECS task credentials) 169.254.170.2/32 (the IPv4 inside an IPv4-mapped address)",
    });
  });

  test("the neighbours of the credential endpoints follow the ordinary rules", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["169.254.0.0/16", "100.64.0.0/10", "fd00::/8"] });
    for (const ip of ["169.254.170.3", "169.254.170.22", "100.100.100.201", "fd00:ec2::24"]) expect(checkAddress(ip, 80, policy)).toEqual({ allowed: true });
    expect(checkAddress("192.0.0.193", 80, DEFAULT_POLICY)).toEqual({ allowed: true });
  });

  test("an allowlisted outer address does not excuse the IPv4 inside it", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["2002::/16", "64:ff9b::/96"] });
    expect(checkAddress("2002:7f00:1::", 443, policy)).toEqual({
      allowed: false,
      reason: "loopback range 127.0.0.0/8 (the IPv4 inside a 6to4 address)",
    });
    expect(checkAddress("64:ff9b::a00:1", 443, policy).allowed).toBe(false);
  });

  test("a Teredo address is judged by its server field too", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: [] });
    const verdict = checkAddress("2001:0:a00:1:8000:63bf:f7f7:f7f7", 443, policy); // server 10.0.0.1, client 8.8.8.8
    expect(verdict).toEqual({ allowed: false, reason: "private range 10.0.0.0/8 (the IPv4 inside the server field of a Teredo address)" });
  });

  test("an invalid allowlist entry fails when the policy is compiled", () => {
    expect(() => compileNetPolicy({ allowPrivateRanges: false, allowlist: ["not-a-cidr"] })).toThrow();
  });
});

const DEFAULT_POLICY = compileNetPolicy({ allowPrivateRanges: false, allowlist: [] });

function fixedResolver(answers: Record<string, string[]>): Resolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (host: string) => {
    calls.push(host);
    return answers[host] ?? [];
  };
  return Object.assign(resolve, { calls });
}

const neverCalled: Resolver = async (host) => {
  throw new Error(`resolver called for ${host}`);
};

async function refusal(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected a refusal");
}

describe("resolveChecked", () => {
  test("returns every checked address in resolver order, in canonical form", async () => {
    const resolver = fixedResolver({ "api.example.com": ["2606:4700:4700:0:0:0:0:1111", "8.8.8.8"] });
    expect(await resolveChecked("api.example.com", 443, DEFAULT_POLICY, resolver)).toEqual(["2606:4700:4700::1111", "8.8.8.8"]);
  });

  test("a mixed answer is refused with EgressBlocked naming the host", async () => {
    const resolver = fixedResolver({ "mixed.example.com": ["8.8.8.8", "10.0.0.1"] });
    const err = await refusal(resolveChecked("mixed.example.com", 443, DEFAULT_POLICY, resolver));
    expect(err).toBeInstanceOf(EgressBlocked);
    expect((err as EgressBlocked).host).toBe("mixed.example.com");
    expect((err as EgressBlocked).message).toBe("egress to mixed.example.com is blocked: private range 10.0.0.0/8");
  });

  test("an IP literal is checked as it is and never resolved", async () => {
    expect(await resolveChecked("8.8.8.8", 443, DEFAULT_POLICY, neverCalled)).toEqual(["8.8.8.8"]);
    expect(await resolveChecked("[2606:4700:4700::1111]", 443, DEFAULT_POLICY, neverCalled)).toEqual(["2606:4700:4700::1111"]);
    for (const host of ["127.0.0.1", "[::1]", "::ffff:127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.1", "127.1"]) {
      expect(await refusal(resolveChecked(host, 443, DEFAULT_POLICY, neverCalled))).toBeInstanceOf(EgressBlocked);
    }
  });

  test("an empty answer or a failed lookup is UpstreamUnreachable", async () => {
    expect(await refusal(resolveChecked("nowhere.example.com", 443, DEFAULT_POLICY, fixedResolver({})))).toBeInstanceOf(UpstreamUnreachable);
    const failing: Resolver = async () => {
      throw Object.assign(new Error("getaddrinfo ENOTFOUND"), { code: "ENOTFOUND" });
    };
    expect(await refusal(resolveChecked("nowhere.example.com", 443, DEFAULT_POLICY, failing))).toBeInstanceOf(UpstreamUnreachable);
  });

  test("an answer that is not an address is refused", async () => {
    const resolver = fixedResolver({ "odd.example.com": ["8.8.8.8", "0177.0.0.1"] });
    expect(await refusal(resolveChecked("odd.example.com", 443, DEFAULT_POLICY, resolver))).toBeInstanceOf(EgressBlocked);
  });

  test("DNS rebinding: the second lookup is made afresh and refused", async () => {
    let call = 0;
    const rebinding: Resolver = async () => (++call === 1 ? ["93.184.215.14"] : ["127.0.0.1"]);
    expect(await resolveChecked("rebind.example.com", 443, DEFAULT_POLICY, rebinding)).toEqual(["93.184.215.14"]);
    const err = await refusal(resolveChecked("rebind.example.com", 443, DEFAULT_POLICY, rebinding));
    expect(err).toBeInstanceOf(EgressBlocked);
    expect(call).toBe(2);
  });

  test("systemResolver returns the addresses of localhost, which the default policy refuses", async () => {
    const addresses = await systemResolver("localhost");
    expect(addresses.length).toBeGreaterThan(0);
    expect(await refusal(resolveChecked("localhost", 443, DEFAULT_POLICY, systemResolver))).toBeInstanceOf(EgressBlocked);
  });
});

describe("own listeners", () => {
  const loopbackApi = [{ host: "127.0.0.1", port: 14321 }];

  test("127.0.0.1:14321 is refused even with allowlist 127.0.0.0/8 and private ranges allowed", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: true, allowlist: ["127.0.0.0/8"], ownListeners: loopbackApi });
    for (const ip of ["127.0.0.1", "::ffff:127.0.0.1", "::1", "0.0.0.0", "::", "64:ff9b::7f00:1"]) {
      const verdict = checkAddress(ip, 14321, policy);
      expect(verdict.allowed).toBe(false);
      if (!verdict.allowed) expect(verdict.reason).toContain("own listener");
    }
  });

  test("127.0.0.1 on another port is allowed by the allowlist", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: false, allowlist: ["127.0.0.0/8"], ownListeners: loopbackApi });
    expect(checkAddress("127.0.0.1", 9999, policy)).toEqual({ allowed: true });
  });

  test("resolveChecked refuses a name that points at a listener", async () => {
    const policy = compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: loopbackApi });
    const resolver = fixedResolver({ "loop.example.com": ["127.0.0.1"] });
    expect(await refusal(resolveChecked("loop.example.com", 14321, policy, resolver))).toBeInstanceOf(EgressBlocked);
  });

  test("a wildcard listener covers loopback, unspecified and this machine's addresses on its port", () => {
    const policy = compileNetPolicy({
      allowPrivateRanges: true,
      allowlist: [],
      ownListeners: [{ host: "0.0.0.0", port: 14322 }],
      localAddresses: ["192.0.2.10", "fe80::1%eth0"],
    });
    for (const ip of ["127.0.0.5", "::1", "0.0.0.0", "192.0.2.10", "::ffff:192.0.2.10", "fe80::1"]) {
      expect(checkAddress(ip, 14322, policy).allowed).toBe(false);
    }
    expect(checkAddress("8.8.8.8", 14322, policy).allowed).toBe(true);
    expect(checkAddress("192.0.2.10", 443, policy).allowed).toBe(true);
  });

  test("a listener on a specific address covers that address and the unspecified one", () => {
    const policy = compileNetPolicy({ allowPrivateRanges: true, allowlist: [], ownListeners: [{ host: "192.168.1.5", port: 8080 }] });
    expect(checkAddress("192.168.1.5", 8080, policy).allowed).toBe(false);
    expect(checkAddress("0.0.0.0", 8080, policy).allowed).toBe(false);
    expect(checkAddress("192.168.1.6", 8080, policy).allowed).toBe(true);
  });
});
