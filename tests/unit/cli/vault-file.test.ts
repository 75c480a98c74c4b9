// The vault file as YAML (issue 39): every problem names its field and its line (an unknown key on its own line), a
// webhook's ${NAME} is read from the environment, and what the export writes reads back as the same document.

import { describe, expect, test } from "bun:test";
import { readVaultFile, writeVaultFile } from "../../../src/cli/kit/vault-file.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";

const FILE = `version: 1
vaults:
  payments:
    managed: true
    unmatched_hosts: deny
    services:
      - host: api.stripe.com
        template: stripe
        operations: [read, write]
      - host: api.example.com
        auth:
          type: bearer
          token: EX_KEY
      - host: api.other.com
        auth:
          type: bearer
          tokn: OTHER_KEY
    credentials:
      - key: STRIPE_SECRET_KEY
    budgets:
      daily-llm:
        scope: vault
        period: day
        limits: { total_tokens: 100000, cots: 3 }
`;

function problemsOf(text: string, env: Record<string, string> = {}): string {
  try {
    readVaultFile(text, env);
  } catch (err) {
    expect(err).toBeInstanceOf(CliFailure);
    expect((err as CliFailure).exitCode).toBe(2);
    return (err as CliFailure).message;
  }
  throw new Error("the file was read");
}

describe("readVaultFile", () => {
  test("an unknown key is an error naming its field and line, as is every other problem, in line order", () => {
    expect(problemsOf(FILE)).toBe(
      [
        "the vault file has 3 problems:",
        "  vaults.payments.services[2].auth.token must be a credential key name (A-Z, 0-9, _; starting with a letter) (line 16)",
        "  vaults.payments.services[2].auth.tokn: unknown key (line 17)",
        "  vaults.payments.budgets.daily-llm.limits.cots: unknown key (line 24)",
      ].join("\n"),
    );
  });

  test("a wrong value names its field and line; a missing field the line of what should hold it", () => {
    const wrong = FILE.replace("tokn: OTHER_KEY", "token: OTHER_KEY").replace(", cots: 3", "").replace("unmatched_hosts: deny", "unmatched_hosts: maybe");
    expect(problemsOf(wrong)).toBe("the vault file has a problem:\n  vaults.payments.unmatched_hosts must be tunnel or deny (line 5)");
    const missing = FILE.replace("tokn: OTHER_KEY", "token: OTHER_KEY").replace(", cots: 3", "").replace("        period: day\n", "");
    expect(problemsOf(missing)).toBe(
      'the vault file has a problem:\n  vaults.payments.budgets.daily-llm.period must be "hour", "day", "week", "month" or "none" (line 22)',
    );
    expect(problemsOf("version: 1\nvaults:\n  a:\n    agents: [{ name: x, role: proxy }, { name: x, role: admin }]\n")).toBe(
      "the vault file has a problem:\n  vaults.a.agents[1].name: the agent x is in the list twice (line 4)",
    );
  });

  test("YAML that does not parse, or repeats a key, is refused with its line", () => {
    expect(problemsOf("version: 1\nvaults:\n  a: [\n")).toMatch(/line [34]/);
    expect(problemsOf("version: 1\nversion: 1\nvaults: {}\n")).toMatch(/^the vault file has a problem:\n {2}Map keys must be unique \(line 2\)$/);
  });

  test("a webhook's ${NAME} comes from the environment, and an unset one is named with its line", () => {
    const text = "version: 1\nvaults:\n  a:\n    webhooks:\n      - url: ${HOOK_URL}\n        format: slack\n";
    expect(problemsOf(text)).toBe(
      "the vault file has a problem:\n  vaults.a.webhooks[0].url: the environment has no HOOK_URL (the receiver's URL is read from it) (line 5)",
    );
    const read = readVaultFile(text, { HOOK_URL: "https://hooks.slack.com/services/T0/B0/X" });
    expect(read.vaults.a!.webhooks).toEqual([{ url: "https://hooks.slack.com/services/T0/B0/X", format: "slack" }]);
  });

  test("what the export writes reads back as the same document, its header saying values are never in it", () => {
    const file = {
      version: 1 as const,
      vaults: {
        payments: {
          managed: true,
          unmatched_hosts: "deny" as const,
          services: [{ host: "api.stripe.com", template: "stripe", operations: ["read" as const] }],
          credentials: [{ key: "DB", ref: "kv:secret/db#password" }, { key: "STRIPE_SECRET_KEY" }],
          agents: [{ name: "ci-bot", role: "proxy" as const }],
          members: [{ email: "owner@example.com", role: "admin" as const }],
          webhooks: [{ url: "https://hooks.slack.com/services/…", format: "slack" as const }],
          budgets: { "daily-llm": { scope: "vault" as const, period: "day" as const, limits: { total_tokens: 100000 } } },
        },
      },
    };
    const yaml = writeVaultFile(file, new Date(Date.UTC(2026, 0, 1)));
    expect(yaml).toStartWith("# Vault file written by broker export at 2026-01-01T00:00:00.000Z.");
    expect(yaml).toContain("never a value");
    expect(readVaultFile(yaml)).toEqual(file);
  });

  test("the README's example file reads as it says", async () => {
    const readme = await Bun.file(new URL("../../../README.md", import.meta.url)).text();
    const section = readme.slice(readme.indexOf("### Vaults as code"));
    const yaml = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
    const read = readVaultFile(yaml, { SLACK_HOOK: "https://hooks.slack.com/services/T0/B0/X" });
    expect(Object.keys(read.vaults)).toEqual(["payments"]);
    expect(read.vaults.payments!.webhooks).toEqual([{ url: "https://hooks.slack.com/services/T0/B0/X", format: "slack" }]);
  });
});
