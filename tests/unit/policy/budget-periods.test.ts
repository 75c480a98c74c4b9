// A budget's periods (src/policy/budget-periods.ts): UTC hours, days, ISO weeks from Monday and calendar months,
// across month and year ends and leap days; a budget without a period never ends.

import { expect, test } from "bun:test";
import { periodEnd, periodStart } from "../../../src/policy/budget-periods.ts";

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

test("each period's start and end around a moment", () => {
  const now = at("2026-11-29T00:41:07.123Z"); // a Sunday
  expect([iso(periodStart("hour", now)), iso(periodEnd("hour", now))]).toEqual(["2026-11-29T00:00:00.000Z", "2026-11-29T01:00:00.000Z"]);
  expect([iso(periodStart("day", now)), iso(periodEnd("day", now))]).toEqual(["2026-11-29T00:00:00.000Z", "2026-11-30T00:00:00.000Z"]);
  expect([iso(periodStart("week", now)), iso(periodEnd("week", now))]).toEqual(["2026-11-23T00:00:00.000Z", "2026-11-30T00:00:00.000Z"]);
  expect([iso(periodStart("month", now)), iso(periodEnd("month", now))]).toEqual(["2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z"]);
  expect([periodStart("none", now), periodEnd("none", now)]).toEqual([0, undefined]);
});

test("a Monday starts its own week; month, year and leap-day ends", () => {
  expect(iso(periodStart("week", at("2026-11-30T00:00:00.000Z")))).toBe("2026-11-30T00:00:00.000Z");
  expect(iso(periodStart("week", at("2026-11-29T23:59:59.999Z")))).toBe("2026-11-23T00:00:00.000Z");
  expect(iso(periodEnd("day", at("2026-12-31T12:00:00Z")))).toBe("2027-01-01T00:00:00.000Z");
  expect(iso(periodEnd("month", at("2026-12-15T00:00:00Z")))).toBe("2027-01-01T00:00:00.000Z");
  expect(iso(periodEnd("day", at("2028-02-28T10:00:00Z")))).toBe("2028-02-29T00:00:00.000Z");
  expect(iso(periodStart("week", at("2027-01-01T08:00:00Z")))).toBe("2026-12-28T00:00:00.000Z");
  // Every moment lies in [start, end).
  for (let t = at("2026-01-01T00:00:00Z"); t < at("2027-01-01T00:00:00Z"); t += 7_919_111)
    for (const p of ["hour", "day", "week", "month"] as const) {
      expect(periodStart(p, t)).toBeLessThanOrEqual(t);
      expect(periodEnd(p, t)!).toBeGreaterThan(t);
    }
});
