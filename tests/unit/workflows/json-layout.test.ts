// The layout of a held request's JSON body on the approval pages: indented for reading, every token
// exactly as sent (no dropped duplicate keys, no rounded numbers, no decoded escapes).

import { describe, expect, test } from "bun:test";
import { layoutJson } from "../../../src/workflows/json-layout.ts";

describe("layoutJson", () => {
  test("indents objects and arrays; empty ones stay on one line", () => {
    expect(layoutJson('{"a":1,"b":[true,null,{}],"c":{ },"d":[ ]}')!.text).toBe(
      '{\n  "a": 1,\n  "b": [\n    true,\n    null,\n    {}\n  ],\n  "c": {},\n  "d": []\n}',
    );
    expect(layoutJson("  42 ")!.text).toBe("42");
  });

  test("strings, numbers and escapes are kept as written", () => {
    const body = '{"n":100000000000000000001,"f":1e400,"g":-0.10,"s":"a,b:{c}\\"\\\\","bidi":"\\u202eevil","u":"\\u0041"}';
    const text = layoutJson(body)!.text;
    for (const token of ["100000000000000000001", "1e400", "-0.10", '"a,b:{c}\\"\\\\"', '"\\u202eevil"', '"\\u0041"']) expect(text).toContain(token);
    expect(text.replace(/\s+/g, "")).toBe(body.replace(/\s+/g, ""));
  });

  test("every duplicate key is shown and reported, however it is escaped; keys in different objects are not duplicates", () => {
    const layout = layoutJson('{"amount":100000,"x":{"amount":5},"amount":1,"\\u0061mount":2,"list":[{"id":1},{"id":2}]}')!;
    expect(layout.text).toContain('"amount": 100000');
    expect(layout.text).toContain('"amount": 1');
    expect(layout.text).toContain('"\\u0061mount": 2');
    expect(layout.duplicateKeys).toEqual(["amount", "\\u0061mount"]);
    expect(layoutJson('{"a":{"b":1},"c":{"b":2}}')!.duplicateKeys).toEqual([]);
    // Letter case aside: ASP.NET Core and Go read "Amount" as "amount".
    expect(layoutJson('{"amount":1,"Amount":100000}')!.duplicateKeys).toEqual(["Amount"]);
  });

  test("text that is not JSON is left to be shown as sent", () => {
    for (const body of ["amount=1", "{bad", '{"a":1', "", '{"a":1} x']) expect(layoutJson(body)).toBeNull();
  });

  test("nesting deeper than 16 is shown as sent (indentation would grow with its square)", () => {
    expect(layoutJson(`${"[".repeat(16)}${"]".repeat(16)}`)).not.toBeNull();
    expect(layoutJson(`{"a":${"[".repeat(17)}1${"]".repeat(17)}}`)).toBeNull();
    expect(layoutJson(`${"[".repeat(6000)}${"]".repeat(6000)}`)).toBeNull();
  });

  test("a body of 20,000 objects is laid out whole", () => {
    const body = `[${Array.from({ length: 20_000 }, (_, i) => `{"i":${i}}`).join(",")}]`;
    const layout = layoutJson(body)!;
    expect(layout.text.split("\n")).toHaveLength(20_000 * 3 + 2);
  });
});
