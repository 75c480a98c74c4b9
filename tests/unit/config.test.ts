// loadConfig: pure, validated, every problem reported at once and named, frozen result.
// takeMasterPassword: reads and deletes BROKER_MASTER_PASSWORD.

import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigError, loadConfig, takeMasterPassword, type Env } from "../../src/config.ts";
import { Secret } from "../../src/secret.ts";

const HOME = { HOME: "/home/alice" };

function problemsOf(env: Env): readonly string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error("expected loadConfig to throw ConfigError");
}

describe("defaults", () => {
  test("an empty environment (plus HOME) gives the documented defaults", () => {
    const c = loadConfig(HOME);
    expect(c.dataDir).toBe("/home/alice/.broker");
    expect(c.bindHost).toBe("127.0.0.1");
    expect(c.apiPort).toBe(14321);
    expect(c.proxyPort).toBe(14322);
    expect(c.publicUrl).toBeUndefined(); // the server uses the address it actually bound
    expect(c.rateLimit).toEqual({ profile: "default", locked: false, overrides: {} });
    expect(c.allowPrivateRanges).toBe(false);
    expect(c.networkAllowlist).toEqual([]);
    expect(c.allowedHosts).toEqual([]);
    expect(c.trustedProxies).toEqual([]);
    expect(c.upstreamCaFile).toBeUndefined();
    expect(c.logLevel).toBe("info");
    expect(c.warnings).toEqual([]);
  });

  test("homeDir option wins over HOME; a trailing slash is dropped", () => {
    expect(loadConfig(HOME, { homeDir: "/srv/broker/" }).dataDir).toBe("/srv/broker/.broker");
  });

  test("without HOME or BROKER_DATA_DIR the data dir is a reported problem", () => {
    expect(problemsOf({}).join("\n")).toContain("BROKER_DATA_DIR");
  });

  test("explicit values are read", () => {
    const c = loadConfig({
      ...HOME,
      BROKER_DATA_DIR: "/var/lib/broker/",
      BROKER_HOST: "::1",
      BROKER_PORT: "8080",
      BROKER_PROXY_PORT: " 8081 ",
      BROKER_ALLOW_PRIVATE_RANGES: "YES",
      BROKER_RATELIMIT_PROFILE: "Strict",
      BROKER_RATELIMIT_LOCK: "1",
      BROKER_LOG_LEVEL: "debug",
      BROKER_UPSTREAM_CA_FILE: "/etc/ssl/extra.pem",
    });
    expect(c).toMatchObject({ dataDir: "/var/lib/broker", bindHost: "::1", apiPort: 8080, proxyPort: 8081 });
    expect(c).toMatchObject({
      allowPrivateRanges: true,
      rateLimit: { profile: "strict", locked: true },
      logLevel: "debug",
      upstreamCaFile: "/etc/ssl/extra.pem",
    });
  });

  test("a public URL is accepted without its trailing slash", () => {
    expect(loadConfig({ ...HOME, BROKER_PUBLIC_URL: "https://broker.example.com/" }).publicUrl).toBe("https://broker.example.com");
  });

  test.each([
    ["true", true],
    ["on", true],
    ["0", false],
    ["no", false],
    ["OFF", false],
  ])("bool %p reads as %p", (raw, value) => {
    expect(loadConfig({ ...HOME, BROKER_ALLOW_PRIVATE_RANGES: raw }).allowPrivateRanges).toBe(value);
  });
});

describe("validation", () => {
  test("every invalid value is reported at once, each naming its variable", () => {
    const problems = problemsOf({
      ...HOME,
      BROKER_DATA_DIR: "relative/dir",
      BROKER_HOST: "not a host!",
      BROKER_PORT: "70000",
      BROKER_PUBLIC_URL: "ftp://broker.example.com",
      BROKER_ALLOW_PRIVATE_RANGES: "maybe",
      BROKER_NETWORK_ALLOWLIST: "10.0.0.0/8, 300.1.2.3/8",
      BROKER_UPSTREAM_CA_FILE: "ca.pem",
      BROKER_RATELIMIT_PROFILE: "turbo",
      BROKER_RATELIMIT_LOCK: "sure",
      BROKER_LOG_LEVEL: "loud",
    });
    const named = (name: string) => problems.filter((p) => p.startsWith(`${name}:`));
    for (const name of [
      "BROKER_DATA_DIR",
      "BROKER_HOST",
      "BROKER_PORT",
      "BROKER_PUBLIC_URL",
      "BROKER_ALLOW_PRIVATE_RANGES",
      "BROKER_NETWORK_ALLOWLIST",
      "BROKER_UPSTREAM_CA_FILE",
      "BROKER_RATELIMIT_PROFILE",
      "BROKER_RATELIMIT_LOCK",
      "BROKER_LOG_LEVEL",
    ]) {
      expect(named(name)).toHaveLength(1);
    }
    expect(problems).toHaveLength(10);
    expect(named("BROKER_NETWORK_ALLOWLIST")[0]).toContain("300.1.2.3/8");
  });

  test("the ConfigError message lists every problem", () => {
    try {
      loadConfig({ ...HOME, BROKER_PORT: "x", BROKER_LOG_LEVEL: "loud" });
      throw new Error("did not throw");
    } catch (err) {
      expect((err as Error).message).toContain("BROKER_PORT");
      expect((err as Error).message).toContain("BROKER_LOG_LEVEL");
    }
  });

  test.each(["0", "20001", "many"])("BROKER_MAX_TUNNELS_PER_PRINCIPAL %p is reported; unset it is 2000", (value) => {
    expect(problemsOf({ ...HOME, BROKER_MAX_TUNNELS_PER_PRINCIPAL: value })).toEqual([expect.stringMatching(/^BROKER_MAX_TUNNELS_PER_PRINCIPAL: /)]);
    expect(loadConfig({ ...HOME }).maxTunnelsPerPrincipal).toBe(2000);
    expect(loadConfig({ ...HOME, BROKER_MAX_TUNNELS_PER_PRINCIPAL: "5000" }).maxTunnelsPerPrincipal).toBe(5000);
  });

  test.each(["abc", "-1", "1.5", "0x50", "65536", "80 80"])("bad port %p is reported", (port) => {
    expect(problemsOf({ ...HOME, BROKER_PROXY_PORT: port })).toEqual([expect.stringMatching(/^BROKER_PROXY_PORT: /)]);
  });

  test("equal API and proxy ports are reported (with other problems)", () => {
    const problems = problemsOf({ ...HOME, BROKER_PORT: "9000", BROKER_PROXY_PORT: "9000", BROKER_RATELIMIT_PROFILE: "turbo" });
    expect(problems).toHaveLength(2);
    expect(problems.some((p) => p.startsWith("BROKER_PROXY_PORT:") && p.includes("BROKER_PORT"))).toBe(true);
  });

  test("port 0 for both (pick any free port) is allowed", () => {
    expect(loadConfig({ ...HOME, BROKER_PORT: "0", BROKER_PROXY_PORT: "0" })).toMatchObject({ apiPort: 0, proxyPort: 0 });
  });

  test.each(["not a url", "ftp://x.example", "https://u:p@x.example", "https://x.example/?q=1", "https://x.example/#f"])(
    "bad public URL %p is reported",
    (url) => expect(problemsOf({ ...HOME, BROKER_PUBLIC_URL: url })).toEqual([expect.stringMatching(/^BROKER_PUBLIC_URL: /)]),
  );
});

describe("network allowlist", () => {
  test("CIDRs and bare IPs are trimmed, given a prefix length and written canonically", () => {
    const c = loadConfig({ ...HOME, BROKER_NETWORK_ALLOWLIST: " 10.0.0.0/8 ,192.168.1.5,, ::1 , 2001:DB8:0:0::/32,fd00:0:0::1" });
    expect(c.networkAllowlist).toEqual(["10.0.0.0/8", "192.168.1.5/32", "::1/128", "2001:db8::/32", "fd00::1/128"]);
  });

  test.each(["10.0.0.0/33", "example.com", "::1/129", "1.2.3.4/", "10.0.0.0/8/8"])("%p is rejected", (item) => {
    expect(problemsOf({ ...HOME, BROKER_NETWORK_ALLOWLIST: item })).toEqual([expect.stringMatching(/^BROKER_NETWORK_ALLOWLIST: /)]);
  });

  // inet_aton-style spellings are how IP parsers get fooled (architecture.md D13, the `ip` package CVEs):
  // "0177.0.0.1" is read as 127.0.0.1 (octal) and "010.0.0.0/8" as 8.0.0.0/8, so an operator who
  // means one range silently allowlists another. Only four-part decimal IPv4 should be accepted.
  test("BROKER_ALLOWED_HOSTS: names and IPs trimmed, lower-cased, trailing dot and brackets dropped, IDN in punycode, frozen", () => {
    const c = loadConfig({ ...HOME, BROKER_ALLOWED_HOSTS: " Broker.Example.COM. , 10.0.0.5,[0:0:0:0:0:0:0:1], bücher.example,broker.example.com" });
    expect(c.allowedHosts).toEqual(["broker.example.com", "10.0.0.5", "::1", "xn--bcher-kva.example"]);
    expect(Object.isFrozen(c.allowedHosts)).toBe(true);
  });

  test("BROKER_ALLOWED_HOSTS: a port, scheme, path, wildcard or zone is a problem naming the variable and the item", () => {
    const problems = problemsOf({ ...HOME, BROKER_ALLOWED_HOSTS: "ok.example,a.example:8080,https://b.example,c.example/x,*.d.example,fe80::1%eth0" });
    expect(problems).toHaveLength(5);
    for (const item of ["a.example:8080", "https://b.example", "c.example/x", "*.d.example", "fe80::1%eth0"]) {
      expect(problems.some((p) => p.startsWith("BROKER_ALLOWED_HOSTS:") && p.includes(`"${item}"`))).toBe(true);
    }
  });

  test("ambiguous IPv4 spellings (octal, hex, short, integer) are rejected, not reinterpreted", () => {
    const accepted: string[] = [];
    for (const item of ["010.0.0.0/8", "0177.0.0.1", "0x7f.0.0.1", "10.1", "10.0.0", "167772161"]) {
      try {
        accepted.push(`${item} -> ${loadConfig({ ...HOME, BROKER_NETWORK_ALLOWLIST: item }).networkAllowlist.join()}`);
      } catch (err) {
        expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^BROKER_NETWORK_ALLOWLIST: /)]);
      }
    }
    expect(accepted).toEqual([]);
  });
});

describe("trusted proxies", () => {
  test("BROKER_TRUSTED_PROXIES: IPv4 and IPv6 IPs and CIDRs, trimmed, canonical, with a prefix length, frozen", () => {
    const c = loadConfig({ ...HOME, BROKER_TRUSTED_PROXIES: " 127.0.0.1 ,10.0.0.0/8,, ::1 , 2001:DB8:0:0::/32,fd00:0:0::1" });
    expect(c.trustedProxies).toEqual(["127.0.0.1/32", "10.0.0.0/8", "::1/128", "2001:db8::/32", "fd00::1/128"]);
    expect(Object.isFrozen(c.trustedProxies)).toBe(true);
    expect(loadConfig({ ...HOME, BROKER_TRUSTED_PROXIES: "  " }).trustedProxies).toEqual([]);
  });

  test.each(["proxy.example", "10.0.0.0/33", "::1/129", "1.2.3.4:80", "010.0.0.1", "10.1", "[::1]"])(
    "%p is a problem naming the variable and the item",
    (item) => {
      const problems = problemsOf({ ...HOME, BROKER_TRUSTED_PROXIES: `127.0.0.1,${item}` });
      expect(problems).toHaveLength(1);
      expect(problems[0]).toStartWith("BROKER_TRUSTED_PROXIES: ");
      expect(problems[0]).toContain(`"${item}"`);
    },
  );

  test.each(["0.0.0.0/0", "::/0", "10.0.0.0/0"])("%p (every address) is refused: the client would choose its own address", (item) => {
    const problems = problemsOf({ ...HOME, BROKER_TRUSTED_PROXIES: `127.0.0.1, ${item}` });
    expect(problems).toEqual([expect.stringMatching(/^BROKER_TRUSTED_PROXIES: ".*\/0" trusts every address/)]);
  });

  test("reported with other problems, and known to the unknown-name check", () => {
    expect(problemsOf({ ...HOME, BROKER_TRUSTED_PROXIES: "nope", BROKER_PORT: "x" })).toHaveLength(2);
    expect(loadConfig({ ...HOME, BROKER_TRUSTED_PROXIES: "127.0.0.1" }).warnings).toEqual([]);
  });
});

describe("warnings and immutability", () => {
  test("unknown BROKER_* names become warnings; known client names and other variables do not", () => {
    const c = loadConfig({
      ...HOME,
      BROKER_PROT: "1",
      BROKER_LOGLEVEL: "debug",
      BROKER_ADDR: "x",
      BROKER_SESSION_TOKEN: "y",
      BROKER_MASTER_PASSWORD: "z",
      PATH: "/bin",
    });
    expect(c.warnings).toHaveLength(2);
    expect(c.warnings.some((w) => w.includes("BROKER_PROT"))).toBe(true);
    expect(c.warnings.some((w) => w.includes("BROKER_LOGLEVEL"))).toBe(true);
  });

  test("the config and its rate-limit object are frozen", () => {
    const c = loadConfig(HOME);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.rateLimit)).toBe(true);
    expect(() => ((c as { apiPort: number }).apiPort = 1)).toThrow(TypeError);
    expect(() => ((c.rateLimit as { locked: boolean }).locked = true)).toThrow(TypeError);
  });

  // The allowlist decides which private addresses the egress guard lets through: a frozen config
  // whose allowlist can still be pushed to is not frozen where it matters.
  test("the config's arrays are frozen too", () => {
    const c = loadConfig({ ...HOME, BROKER_NETWORK_ALLOWLIST: "10.0.0.0/8", BROKER_TYPO: "1" });
    expect(Object.isFrozen(c.networkAllowlist)).toBe(true);
    expect(Object.isFrozen(c.warnings)).toBe(true);
  });

  test("loadConfig does not modify the environment it is given", () => {
    const env = { ...HOME, BROKER_PORT: "8080", BROKER_MASTER_PASSWORD: "pw" };
    loadConfig(env);
    expect(env).toEqual({ ...HOME, BROKER_PORT: "8080", BROKER_MASTER_PASSWORD: "pw" });
  });
});

describe("takeMasterPassword", () => {
  test("returns a Secret and deletes the variable from the given env", () => {
    const env: Env = { BROKER_MASTER_PASSWORD: "hunter2-hunter2", OTHER: "kept" };
    const pw = takeMasterPassword(env);
    expect(pw).toBeInstanceOf(Secret);
    expect(pw?.reveal()).toBe("hunter2-hunter2");
    expect(String(pw)).toBe("[redacted]");
    expect("BROKER_MASTER_PASSWORD" in env).toBe(false);
    expect(env).toEqual({ OTHER: "kept" });
  });

  test("absent or empty gives undefined, and an empty one is deleted too", () => {
    expect(takeMasterPassword({})).toBeUndefined();
    const env: Env = { BROKER_MASTER_PASSWORD: "" };
    expect(takeMasterPassword(env)).toBeUndefined();
    expect("BROKER_MASTER_PASSWORD" in env).toBe(false);
  });

  test("BROKER_MASTER_PASSWORD_FILE: an absolute path read at start, one trailing newline dropped", () => {
    const dir = mkdtempSync(join(tmpdir(), "broker-mpw-"));
    const file = join(dir, "master-password");
    writeFileSync(file, " spaced pass \n", { mode: 0o600 });
    expect(takeMasterPassword({ BROKER_MASTER_PASSWORD_FILE: file })?.reveal()).toBe(" spaced pass ");
    const problems = (env: Env) => {
      try {
        takeMasterPassword(env);
      } catch (err) {
        return (err as ConfigError).problems;
      }
      return [];
    };
    expect(problems({ BROKER_MASTER_PASSWORD_FILE: "relative/path" })).toEqual(["BROKER_MASTER_PASSWORD_FILE: must be an absolute path"]);
    expect(problems({ BROKER_MASTER_PASSWORD_FILE: join(dir, "missing") })).toEqual(["BROKER_MASTER_PASSWORD_FILE: cannot read the file (ENOENT)"]);
    writeFileSync(file, "\n");
    expect(problems({ BROKER_MASTER_PASSWORD_FILE: file })).toEqual(["BROKER_MASTER_PASSWORD_FILE: the file is empty"]);
    const both: Env = { BROKER_MASTER_PASSWORD: "pw", BROKER_MASTER_PASSWORD_FILE: file };
    expect(problems(both)).toEqual(["BROKER_MASTER_PASSWORD and BROKER_MASTER_PASSWORD_FILE: set exactly one, not both"]);
    expect("BROKER_MASTER_PASSWORD" in both).toBe(false); // deleted even when refused
    rmSync(dir, { recursive: true, force: true });
  });

  test("defaults to process.env and removes it there", () => {
    process.env.BROKER_MASTER_PASSWORD = "from-process-env";
    expect(takeMasterPassword()?.reveal()).toBe("from-process-env");
    expect(process.env.BROKER_MASTER_PASSWORD).toBeUndefined();
    expect("BROKER_MASTER_PASSWORD" in process.env).toBe(false);
  });
});

describe("identity-provider sign-in (BROKER_OIDC_*)", () => {
  const base = { ...HOME, BROKER_OIDC_ISSUER: "https://idp.example.com", BROKER_OIDC_CLIENT_ID: "broker", BROKER_OIDC_CLIENT_SECRET: "s3cret-value" };

  test("off unless an issuer is set; on, with defaults", () => {
    expect(loadConfig(HOME).oidc).toBeUndefined();
    const oidc = loadConfig(base).oidc!;
    expect({ issuer: oidc.issuer, clientId: oidc.clientId, name: oidc.name, scopes: oidc.scopes, method: oidc.clientAuthMethod }).toEqual({
      issuer: "https://idp.example.com",
      clientId: "broker",
      name: "your identity provider",
      scopes: "openid email profile",
      method: "client_secret_basic",
    });
    expect(String(oidc.clientSecret)).toBe("[redacted]");
  });

  test("every missing or invalid piece is reported, each naming its variable", () => {
    const problems = problemsOf({
      ...HOME,
      BROKER_OIDC_ISSUER: "http://idp.example.com",
      BROKER_OIDC_SCOPES: "email",
      BROKER_OIDC_CLIENT_AUTH_METHOD: "private_key_jwt",
    });
    for (const name of ["BROKER_OIDC_ISSUER", "BROKER_OIDC_CLIENT_ID", "BROKER_OIDC_SCOPES", "BROKER_OIDC_CLIENT_AUTH_METHOD"]) {
      expect(problems.some((p) => p.startsWith(`${name}:`))).toBe(true);
    }
  });
});

describe("BROKER_DATABASE_URL", () => {
  test("unset keeps the embedded SQLite store", () => {
    expect(loadConfig(HOME).database).toBeUndefined();
  });

  test("a postgres URL selects PostgreSQL, its password kept wrapped", () => {
    const c = loadConfig({
      ...HOME,
      BROKER_DATABASE_URL: "postgres://broker:pw-s3cret@db.internal:5432/broker?sslmode=verify-full",
      BROKER_DATABASE_POOL_SIZE: "20",
    });
    expect(c.database?.url).toBeInstanceOf(Secret);
    expect(c.database?.url.reveal()).toBe("postgres://broker:pw-s3cret@db.internal:5432/broker?sslmode=verify-full");
    expect(c.database?.poolSize).toBe(20);
    expect(c.database?.outageGraceMs).toBe(300_000);
    expect(JSON.stringify(c)).not.toContain("pw-s3cret");
  });

  test("bad values are named without repeating the URL (it holds a password)", () => {
    const problems = problemsOf({
      ...HOME,
      BROKER_DATABASE_URL: "mysql://root:pw-s3cret@db/x",
      BROKER_DATABASE_POOL_SIZE: "0",
      BROKER_DATABASE_OUTAGE_GRACE_SECONDS: "-1",
    });
    expect(problems.join("\n")).not.toContain("pw-s3cret");
    expect(problems.some((p) => p.startsWith("BROKER_DATABASE_URL: only PostgreSQL"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BROKER_DATABASE_POOL_SIZE:"))).toBe(true);
    expect(problems.some((p) => p.startsWith("BROKER_DATABASE_OUTAGE_GRACE_SECONDS:"))).toBe(true);
    expect(problemsOf({ ...HOME, BROKER_DATABASE_URL: "not a url pw-s3cret" }).join()).not.toContain("pw-s3cret");
  });
});
