// Pure pieces of the commands: invite links, credential keys, durations,
// and the size budget every CLI file keeps.

import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { formatDuration } from "../../../src/cli/commands/agent.ts";
import { checkKey } from "../../../src/cli/commands/credential.ts";
import { parseInviteRef } from "../../../src/cli/commands/vault-join.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";

describe("parseInviteRef", () => {
  test("takes the token from a link (with or without /accept) or a bare token", () => {
    expect(parseInviteRef("https://b.example/v1/vault-invites/av_uinv_abc/accept")).toEqual({ token: "av_uinv_abc", origin: "https://b.example" });
    expect(parseInviteRef("http://127.0.0.1:1/join/tok_1/")).toEqual({ token: "tok_1", origin: "http://127.0.0.1:1" });
    expect(parseInviteRef(" av_uinv_abc ")).toEqual({ token: "av_uinv_abc" });
  });
  test("rejects what cannot be an invite", () => {
    for (const bad of ["", "a b", "not/a/url", "https://b.example/", "https://b.example/x%2Fy"]) expect(() => parseInviteRef(bad)).toThrow(CliFailure);
  });
});

test("checkKey accepts API-style keys and refuses the rest before any value is read", () => {
  expect(checkKey("OPENAI_API_KEY")).toBe("OPENAI_API_KEY");
  for (const bad of ["lower", "1KEY", "KEY-X", "", "K".repeat(129)]) expect(() => checkKey(bad)).toThrow(CliFailure);
});

test("formatDuration", () => {
  expect(formatDuration(null)).toBe("never expires");
  expect(formatDuration(30 * 86400)).toBe("expires 30d after redemption");
  expect(formatDuration(5400)).toBe("expires 90m after redemption");
  expect(formatDuration(61)).toBe("expires 61s after redemption");
});

test("every CLI file stays within 250 formatted lines", () => {
  const root = join(import.meta.dir, "..", "..", "..", "src", "cli");
  const files = ["", "commands", "kit", "mcp"].flatMap((dir) => readdirSync(join(root, dir)).map((f) => join(root, dir, f))).filter((f) => f.endsWith(".ts"));
  const long = files.filter((f) => readFileSync(f, "utf8").split("\n").length > 250);
  expect(files.length).toBeGreaterThan(40);
  expect(long).toEqual([]);
});
