// `broker service add <host>` given a URL: the error names the host to type, and never repeats what a
// pasted URL may carry (user:password@, a key in the query, a token in the path).

import { describe, expect, test } from "bun:test";
import { checkHost } from "../../../src/cli/commands/service.ts";

function failureOf(raw: string): string {
  try {
    checkHost(raw);
  } catch (err) {
    const e = err as Error & { hint?: string };
    return `${e.message}\n${e.hint ?? ""}`;
  }
  throw new Error("checkHost accepted a URL");
}

describe("checkHost", () => {
  test("a bare host passes", () => {
    expect(() => checkHost("api.github.com")).not.toThrow();
  });

  test.each([
    ["https://deploy:sk-live-4242@api.example.com/v1", "sk-live-4242", "deploy"],
    ["https://api.example.com/v1/items?api_key=sk-live-4343", "sk-live-4343", "api_key"],
    ["https://api.telegram.org/bot123456:AAE-token-4444/getMe", "AAE-token-4444", "bot123456"],
  ])("%s: names api.example.com-like host, repeats no credential", (raw, secret, other) => {
    const text = failureOf(raw);
    expect(text).toContain("is a URL, not a host");
    expect(text).toContain(`broker service add ${new URL(raw).host}`);
    expect(text).not.toContain(secret);
    expect(text).not.toContain(other);
  });
});
