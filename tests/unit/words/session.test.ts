// A session in words: its kind from how it was made, its client from the User-Agent it sent.

import { expect, test } from "bun:test";
import { describeClient, describeSessionKind } from "../../../src/words/index.ts";

test("describeClient names browsers with their system, tools by name, and anything else by its first token", () => {
  const cases: [string | null, string][] = [
    ["Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Linux"],
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36", "Chrome on Windows"],
    ["Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0", "Edge on Windows"],
    ["Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15", "Safari on macOS"],
    [
      "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
      "Safari on iOS",
    ],
    ["Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Mobile Safari/537.36", "Chrome on Android"],
    ["Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/126.0.0.0 Safari/537.36", "Headless Chrome on Linux"],
    ["broker-cli/0.1.0", "broker CLI 0.1.0"],
    ["curl/8.5.0", "curl"],
    ["python-requests/2.32.3", "Python requests"],
    ["Go-http-client/1.1", "Go"],
    ["Bun/1.2.0", "Bun"],
    ["node", "Node.js"],
    ["my-robot/3 (+https://example.com)", "my-robot"],
    ["", "Unknown client"],
    [null, "Unknown client"],
  ];
  for (const [ua, want] of cases) expect({ ua, said: describeClient(ua) }).toEqual({ ua, said: want });
  expect(describeClient(`${"z".repeat(300)}/1`)).toHaveLength(40);
});

test("describeSessionKind: browser, CLI, API, OIDC and vault run sessions; older rows are plain sign-ins", () => {
  expect(describeSessionKind({ kind: "user", channel: "form", client: "Mozilla/5.0" })).toBe("Browser sign-in");
  expect(describeSessionKind({ kind: "user", channel: "api", client: "broker-cli/0.1.0" })).toBe("CLI sign-in");
  expect(describeSessionKind({ kind: "user", channel: "api", client: "curl/8.5.0" })).toBe("API sign-in");
  expect(describeSessionKind({ kind: "user", channel: "oidc", client: "Mozilla/5.0" })).toBe("OIDC sign-in");
  expect(describeSessionKind({ kind: "user", channel: "oidc_cli", client: "broker-cli/0.1.0" })).toBe("OIDC sign-in from the CLI");
  expect(describeSessionKind({ kind: "scoped", channel: "api", client: "broker-cli/0.1.0" })).toBe("Scoped session from vault run");
  expect(describeSessionKind({ kind: "user", channel: null, client: null })).toBe("Sign-in");
});
