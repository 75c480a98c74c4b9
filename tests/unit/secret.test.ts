// Secret: every printing path yields [redacted]; reveal() is the only way to the value.

import { describe, expect, test } from "bun:test";
import { format, inspect } from "node:util";
import { REDACTED, Secret, wipe } from "../../src/secret.ts";

const VALUE = "sk-live-51Hx9QfAKE";

describe("printing", () => {
  const s = new Secret(VALUE);

  test("String(), template literals and concatenation", () => {
    expect(REDACTED).toBe("[redacted]");
    expect(String(s)).toBe("[redacted]");
    expect(`${s}`).toBe("[redacted]");
    expect("value=" + s).toBe("value=[redacted]");
    expect(s.toString()).toBe("[redacted]");
  });

  test("JSON.stringify, directly and nested", () => {
    expect(JSON.stringify(s)).toBe('"[redacted]"');
    expect(JSON.stringify({ s })).toBe('{"s":"[redacted]"}');
    expect(JSON.stringify({ deep: [{ s }] })).not.toContain(VALUE);
  });

  test("Bun.inspect, directly and nested", () => {
    expect(Bun.inspect(s)).toBe("[redacted]");
    expect(Bun.inspect({ s })).not.toContain(VALUE);
    expect(Bun.inspect({ s })).toContain("[redacted]");
    expect(Bun.inspect([new Map([["k", s]])])).not.toContain(VALUE);
  });

  test("node:util inspect and console-style format", () => {
    expect(inspect(s)).toBe("[redacted]");
    expect(inspect({ a: [s] }, { depth: 10, showHidden: true })).not.toContain(VALUE);
    for (const spec of ["%s", "%o", "%O", "%j"]) expect(format(spec, s)).not.toContain(VALUE);
    expect(format("%s", s)).toBe("[redacted]");
  });

  test("console.log output does not contain the value", () => {
    const lines: string[] = [];
    const original = console.log;
    console.log = (...args: unknown[]) => void lines.push(format(...args));
    try {
      console.log(s);
      console.log("secret: %s", s);
      console.log({ nested: { s } });
    } finally {
      console.log = original;
    }
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).not.toContain(VALUE);
  });

  test("the value is not an enumerable property", () => {
    expect(Object.keys(s)).toEqual([]);
    expect(Object.values(s)).toEqual([]);
    expect({ ...s }).toEqual({});
  });

  test("byte secrets are redacted as well", () => {
    const b = new Secret(new Uint8Array([104, 117, 110, 116, 101, 114]));
    expect(String(b)).toBe("[redacted]");
    expect(Bun.inspect(b)).toBe("[redacted]");
    expect(JSON.stringify({ b })).toBe('{"b":"[redacted]"}');
  });
});

describe("reading", () => {
  test("reveal returns the value", () => {
    expect(new Secret(VALUE).reveal()).toBe(VALUE);
    const bytes = new Uint8Array([1, 2, 3]);
    expect(new Secret(bytes).reveal()).toBe(bytes);
  });

  test("wipe zeroes key material in place", () => {
    const key = new Uint8Array([9, 8, 7, 6]);
    wipe(key);
    expect([...key]).toEqual([0, 0, 0, 0]);
  });
});
