// A session in words, for its owner's list (the console's Account page, the CLI): what kind it is
// ("Browser sign-in", "CLI sign-in", "OIDC sign-in", "Scoped session from vault run") and its client,
// a User-Agent summarised ("Firefox on Linux", "broker CLI 0.1.0", "curl"). Reads only the recorded
// channel and User-Agent; never a token.

import type { SessionChannel } from "../store/index.ts";

/** The fields of a session these words read (the API's and the console's SessionView has them). */
export interface SessionFacts {
  readonly kind: "user" | "scoped";
  readonly channel: SessionChannel | null;
  readonly client: string | null;
}

const CLI_AGENT = /^broker-cli\/(\S+)/;

/** What kind of session it is, by how it was made. */
export function describeSessionKind(s: SessionFacts): string {
  if (s.kind === "scoped") return "Scoped session from vault run";
  switch (s.channel) {
    case "form":
      return "Browser sign-in";
    case "oidc":
      return "OIDC sign-in";
    case "oidc_cli":
      return "OIDC sign-in from the CLI";
    case "api":
      return CLI_AGENT.test(s.client ?? "") ? "CLI sign-in" : "API sign-in";
    case null:
      return "Sign-in";
  }
}

/** Tools that name themselves first in their User-Agent, by that name. */
const TOOLS: readonly [RegExp, (m: RegExpMatchArray) => string][] = [
  [CLI_AGENT, (m) => `broker CLI ${m[1]}`],
  [/^curl\b/i, () => "curl"],
  [/^Wget\b/i, () => "Wget"],
  [/^HTTPie\b/i, () => "HTTPie"],
  [/^python-requests\b/i, () => "Python requests"],
  [/^python-httpx\b/i, () => "Python httpx"],
  [/^(Python-urllib|aiohttp)\b/i, () => "Python"],
  [/^Go-http-client\b/i, () => "Go"],
  [/^Bun\//, () => "Bun"],
  [/^(node|undici|node-fetch|axios)\b/i, () => "Node.js"],
  [/^Deno\//, () => "Deno"],
  [/^PostmanRuntime\b/i, () => "Postman"],
];

/** Browsers, most specific first (Edge and Opera also say Chrome; Chrome also says Safari). */
const BROWSERS: readonly [RegExp, string][] = [
  [/\bEdg(e|A|iOS)?\//, "Edge"],
  [/\b(OPR|Opera)\//, "Opera"],
  [/\bFirefox\/|\bFxiOS\//, "Firefox"],
  [/\bHeadlessChrome\//, "Headless Chrome"],
  [/\bChrom(e|ium)\/|\bCriOS\//, "Chrome"],
  [/\bVersion\/[\d.]+.*\bSafari\//, "Safari"],
];

const SYSTEMS: readonly [RegExp, string][] = [
  [/\b(iPhone|iPad|iPod)\b/, "iOS"],
  [/\bAndroid\b/, "Android"],
  [/\bCrOS\b/, "ChromeOS"],
  [/\bWindows\b/, "Windows"],
  [/\bMac OS X\b|\bMacintosh\b/, "macOS"],
  [/\bLinux\b/, "Linux"],
];

/** The longest a name read from an unknown User-Agent is shown. */
const UNKNOWN_MAX = 40;

/** A User-Agent header as a person would name the client; "Unknown client" when none was sent. */
export function describeClient(userAgent: string | null): string {
  const ua = (userAgent ?? "").trim();
  if (!ua) return "Unknown client";
  for (const [pattern, name] of TOOLS) {
    const m = ua.match(pattern);
    if (m) return name(m);
  }
  const browser = BROWSERS.find(([pattern]) => pattern.test(ua))?.[1];
  const system = SYSTEMS.find(([pattern]) => pattern.test(ua))?.[1];
  if (browser) return system ? `${browser} on ${system}` : browser;
  // Anything else: its first product token, as it names itself (shown escaped, and kept short).
  const first = ua.split(/[\s/;(]/)[0] ?? "";
  return first ? first.slice(0, UNKNOWN_MAX) : "Unknown client";
}
