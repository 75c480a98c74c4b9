// The reference grammar: `<connection>:<path>#<field>` and an optional version; refusals name the part
// that is wrong and never repeat the text (a person may have pasted a value where a reference belongs).

import { expect, test } from "bun:test";
import { formatReference, parseReference } from "../../../src/policy/index.ts";

test("a connection, a path that may hold colons and slashes, an optional field and version", () => {
  expect(parseReference("prod-vault:apps/github#token")).toEqual({ connection: "prod-vault", path: "apps/github", field: "token" });
  expect(parseReference("aws:arn:aws:secretsmanager:eu-west-1:123456789012:secret:stripe-AbCdEf#api_key", "AWSCURRENT")).toEqual({
    connection: "aws",
    path: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:stripe-AbCdEf",
    field: "api_key",
    version: "AWSCURRENT",
  });
  expect(parseReference("gcp:openai-key")).toEqual({ connection: "gcp", path: "openai-key" });
  expect(formatReference({ connection: "gcp", path: "openai-key", version: "3" })).toBe("gcp:openai-key (version 3)");
});

test("refused, naming the part, never repeating the text", () => {
  const pasted = "sk-live-4f9a0c1e2b3d4e5f6a7b8c9d";
  for (const [text, part] of [
    [pasted, "connection's name and a colon"],
    [`Prod:${pasted}`, "connection is a name"],
    ["vault:", "path"],
    ["vault:a b", "path"],
    ["vault:apps/x#", "field"],
    ["vault:apps/x#a#b", "field"],
    ["vault:apps/\u200bx", "path"],
    ["", "1 to 1024"],
    [`v:${"p".repeat(1100)}`, "1 to 1024"],
  ] as const) {
    const r = parseReference(text);
    expect("problem" in r && r.problem).toContain(part);
    expect(JSON.stringify(r)).not.toContain(pasted);
  }
  expect("problem" in parseReference("v:p", "a b")).toBe(true);
});
