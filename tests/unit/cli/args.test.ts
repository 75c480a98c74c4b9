// Pure argument helpers: durations, domain lists, and the strict flag check that refuses secrets.

import { describe, expect, test } from "bun:test";
import type { ArgsDef } from "citty";
import { findArgProblem, parseDomainList, parseTokenTtl } from "../../../src/cli/kit/args.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";

describe("parseTokenTtl", () => {
  test.each([
    ["never", null],
    ["NEVER", null],
    ["30d", 30 * 86400],
    ["12h", 12 * 3600],
    ["90m", 5400],
    ["2w", 2 * 604800],
    ["3600", 3600],
    ["45s", 45],
  ] as const)("%s → %p", (raw, want) => expect(parseTokenTtl(raw)).toBe(want));

  test("absent means: leave it to the server (the token never expires)", () => expect(parseTokenTtl(undefined)).toBeUndefined());

  test.each(["", "0", "0d", "-1d", "30x", "1.5h", "d", "30 d", "99999999999999999999"])("rejects %p with a usage failure", (raw) => {
    let err: unknown;
    try {
      parseTokenTtl(raw);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CliFailure);
    expect((err as CliFailure).exitCode).toBe(2);
  });
});

describe("parseDomainList", () => {
  test("splits, trims, lower-cases and de-duplicates", () => {
    expect(parseDomainList(" A.com, b.org ,a.com,,@c.net")).toEqual(["a.com", "b.org", "c.net"]);
  });
  test("an empty string clears the list", () => expect(parseDomainList("")).toEqual([]));
  test("rejects what is clearly not a domain", () => {
    expect(() => parseDomainList("alice@a.com")).toThrow(CliFailure);
    expect(() => parseDomainList("https://a.com/")).toThrow(CliFailure);
  });
});

describe("findArgProblem", () => {
  const def: ArgsDef = {
    key: { type: "positional", required: true },
    vault: { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
  };

  test.each([
    [["KEY"]],
    [["KEY", "--vault", "v"]],
    [["--vault=v", "KEY"]],
    [["KEY", "--json", "--dry-run"]],
    [["KEY", "--dryRun"]],
    [["KEY", "--no-json"]],
    [["KEY", "--", "anything", "--goes"]],
  ])("accepts %p", (argv) => expect(findArgProblem(argv, def)).toBeUndefined());

  test("refuses --value and --password, naming the safe way", () => {
    for (const flag of ["--value", "--value=s3cret", "--password"]) {
      const problem = findArgProblem(["KEY", flag, "s3cret"], def);
      expect(problem).toContain("does not exist");
      expect(problem).toContain("standard input");
      expect(problem).not.toContain("s3cret");
    }
  });

  test("refuses an extra positional without echoing it (it may be the secret)", () => {
    const problem = findArgProblem(["KEY", "s3cret-value"], def);
    expect(problem).toContain("unexpected extra argument");
    expect(problem).not.toContain("s3cret");
  });

  test("refuses unknown flags, and knows a string flag's value is not a positional", () => {
    expect(findArgProblem(["KEY", "--frob"], def)).toBe("unknown option --frob");
    expect(findArgProblem(["--vault", "KEY", "KEY"], def)).toBeUndefined();
    expect(findArgProblem(["KEY", "--no-vault"], def)).toBe("unknown option --no-vault");
  });
});
