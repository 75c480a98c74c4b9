// A budget's periods (issue 38): when the one holding `now` began and when it ends, in UTC (an hour, a day, an ISO
// week from Monday, a calendar month), so every instance counts into the same period and a refusal can say when the
// budget starts again (Retry-After). A budget without a period has one that never ends.

import type { BudgetPeriod } from "../store/index.ts";

/** The start of the period holding `now` (ms since the epoch; 0 for a budget without a period). */
export function periodStart(period: BudgetPeriod, now: number): number {
  const d = new Date(now);
  switch (period) {
    case "none":
      return 0;
    case "hour":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
    case "day":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    case "week":
      // ISO weeks begin on Monday: getUTCDay() is 0 for Sunday.
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
    case "month":
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  }
}

/** When the period holding `now` ends (the next one's start); undefined for a budget without a period. */
export function periodEnd(period: BudgetPeriod, now: number): number | undefined {
  const start = new Date(periodStart(period, now));
  switch (period) {
    case "none":
      return undefined;
    case "hour":
      return start.getTime() + 3_600_000;
    case "day":
      return Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate() + 1);
    case "week":
      return Date.UTC(start.getUTCFullYear(), start.getUTCMonth(), start.getUTCDate() + 7);
    case "month":
      return Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1);
  }
}
