// Tables and times as people read them.

import { describe, expect, test } from "bun:test";
import { formatTable, formatTime, hasCutCells } from "../../../src/cli/kit/output.ts";

describe("formatTable", () => {
  test("aligns columns and trims trailing blanks", () => {
    const rows = [
      { a: "x", b: "long value" },
      { a: "longer", b: "" },
    ];
    const text = formatTable(rows, [
      { title: "A", value: (r) => r.a },
      { title: "B", value: (r) => r.b },
    ]);
    expect(text).toBe("A       B\nx       long value\nlonger");
  });
  test("a multi-line cell cannot break the table into extra rows", () => {
    expect(formatTable([{ v: "a\nb" }], [{ title: "V", value: (r) => r.v }])).toBe("V\na\\nb");
  });
  test("a cell cannot drive the terminal: control characters and bidi overrides are shown as escapes", () => {
    const v = "x\u001b[2J\u001b]0;t\u0007\r\u0000\t\u009b1m\u202eyz";
    expect(formatTable([{ v }], [{ title: "V", value: (r) => r.v }])).toBe("V\nx\\u001b[2J\\u001b]0;t\\u0007\\u000d\\u0000\\t\\u009b1m\\u202eyz");
  });
  test("a column with max cuts long cells with …, so one long path does not pad every row", () => {
    const rows = [
      { p: `GET api.example.com/${"x".repeat(100)}`, s: "200" },
      { p: "GET a.test/", s: "404" },
    ];
    const columns = [
      { title: "REQUEST", value: (r: (typeof rows)[number]) => r.p, max: 24 },
      { title: "STATUS", value: (r: (typeof rows)[number]) => r.s },
    ];
    expect(formatTable(rows, columns)).toBe("REQUEST                   STATUS\nGET api.example.com/xxx…  200\nGET a.test/               404");
    expect(hasCutCells(rows, columns)).toBe(true);
    expect(hasCutCells(rows.slice(1), columns)).toBe(false);
  });
});

describe("formatTime", () => {
  test("minutes in UTC; null is never", () => {
    expect(formatTime("2026-11-21T08:14:06.123Z")).toBe("2026-11-21 08:14 UTC");
    expect(formatTime(null)).toBe("never");
    expect(formatTime(undefined)).toBe("-");
    expect(formatTime("not a time")).toBe("not a time");
  });
});
