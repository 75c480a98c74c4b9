// One process's share of a whole-number limit (a burst, an in-flight ceiling, a sign-in failure count) among the
// workers of `broker server --workers N` (issue 40). The limit is divided and the remainder handed out one apiece to
// the lowest-numbered workers, so the shares add up to the limit exactly: a burst of 5 between two workers is 3 and 2
// (rounding every share up gave 3 and 3, one request more than the setting allows). A limit smaller than the number
// of workers still gives each worker 1: a worker allowed nothing would refuse every client the kernel hands it.

/** Which of how many processes share the limits; absent or a count of 1: the whole limit. */
export interface LimitShare {
  readonly id: number;
  readonly count: number;
}

/** Worker `share.id`'s part of `total`, from 1 to `count`; the parts of all the workers add up to `total` (when it is at least `count`). */
export function shareOf(total: number, share: LimitShare | undefined): number {
  if (!share || share.count <= 1) return total;
  const extra = share.id <= total % share.count ? 1 : 0;
  return Math.max(1, Math.floor(total / share.count) + extra);
}
