// The budget gate the pipeline calls (issue 38): counts each request against the budgets of its vault that apply
// before it goes (or refuses it, 429 budget_exceeded), says whether a soft threshold wants a person to approve it, and
// adds what an LLM call used when its answer ends. The pipeline sees only the BudgetGate interface below.
//
// Exact under concurrency without a lock: a request's count is added in one statement that returns the total it made
// (store/budgets.ts), so of N requests racing for the last unit each learns a different total and only those within
// the limit go; the others take their count back. Tokens and money are known only once an answer ends, so a request
// goes while what was used before it is under the limit: the total passes a token or money limit by at most what the
// requests in flight at that moment use, on one instance or several sharing PostgreSQL.
//
// A vault's budgets are cached (most vaults have none, and those requests must not pay a read) until a change to them
// is announced, or for a second while announcements may be missed (store/changes.ts).

import { BudgetExceeded } from "../errors.ts";
import type { Domain } from "../identity/index.ts";
import type { Logger } from "../log.ts";
import { budgetApplies, judgeBudgets, periodStart, softCrossed, type BudgetVerdict } from "../policy/index.ts";
import { NO_USAGE, type BudgetRow, type BudgetUsage } from "../store/index.ts";
import { budgetEvent } from "./budget-event.ts";
import { BUDGET_CURRENCY } from "./budgets.ts";

/** A request as budgets see it. */
export interface BudgetCharge {
  readonly vault: { readonly id: number; readonly name: string };
  /** `agent:N` or `user:N`; a `vault run` session's is its minter's. */
  readonly principal: string;
  /** The matched service's host pattern. */
  readonly service: string;
  readonly host: string;
  readonly port: number;
}

/** What one LLM call used, priced (cost in micro-units of the price table's currency; undefined: unpriced model). */
export interface MeteredCall {
  readonly model: string | null;
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly totalTokens: number;
  readonly costMicros: number | undefined;
  /** What money limits count: the cost, or for an unpriced model its tokens at the table's dearest prices. */
  readonly chargedMicros: number;
}

/** One admitted request's place in its budgets. */
export interface BudgetTicket {
  /** The budget whose soft threshold asks a person to approve each request now, if any. */
  readonly holdFor: string | undefined;
  /** A budget it was counted in limits tokens or money: an LLM call whose usage cannot be read must not go. */
  readonly countsUsage: boolean;
  /** The request did not go (held, refused before it was sent): its count is taken back. */
  release(): void;
  /** The request's answer ended: what the call used is added (nothing for a call that was not metered). */
  settle(call: MeteredCall | undefined): void;
}

export interface BudgetGate {
  /**
   * Counts the request in every budget of its vault that applies, or throws BudgetExceeded (taking its count back)
   * when one has reached its limit. Undefined when no budget applies.
   */
  admit(charge: BudgetCharge): Promise<BudgetTicket | undefined>;
  /**
   * The vault is known to have no budgets (admit would answer undefined): the request path then skips admit and the
   * promises it makes, for the many vaults without budgets. False when not known without a read.
   */
  knownWithout?(vaultId: number): boolean;
}

/** How long a vault's budget list is trusted while change announcements arrive. */
const TRUST_MS = 60_000;

export interface BudgetGateOptions {
  /** How long a cached read may be trusted now (the change feed's; 1 s while announcements may be missed). */
  readonly trustMs: (normal: number) => number;
  readonly log: Logger;
}

export interface CachingBudgetGate extends BudgetGate {
  /** A vault's budgets changed (here, or announced by another instance). */
  invalidate(vaultId: number): void;
  clear(): void;
}

const ONE_REQUEST: BudgetUsage = { ...NO_USAGE, requests: 1 };
/** A refused or held request's count, taken back. */
const TAKE_BACK = Symbol("take back");

/** The money and token measures as the envelope names them, and what their numbers count. */
const MEASURE_NAMES = {
  requests: ["requests", "requests"],
  inputTokens: ["input_tokens", "input tokens"],
  outputTokens: ["output_tokens", "output tokens"],
  totalTokens: ["total_tokens", "tokens"],
  costMicros: ["cost", ""],
} as const;

export function createBudgetGate(d: Domain, opts: BudgetGateOptions): CachingBudgetGate {
  const currency = () => d.prices?.current().currency ?? BUDGET_CURRENCY;
  const cache = new Map<number, { readonly at: number; readonly budgets: readonly BudgetRow[] }>();
  /** Bumped by every invalidation: a read that began before one is not cached (it may predate the change). */
  let generation = 0;

  /** Reads in flight, one per vault. */
  const reading = new Map<number, Promise<readonly BudgetRow[]>>();

  function read(vaultId: number): Promise<readonly BudgetRow[]> {
    const under = reading.get(vaultId);
    if (under) return under;
    const began = generation;
    const read = d.store.budgets
      .list(vaultId)
      .then((budgets) => {
        if (began === generation) cache.set(vaultId, { at: d.now(), budgets });
        return budgets;
      })
      .finally(() => reading.delete(vaultId));
    reading.set(vaultId, read);
    return read;
  }

  /**
   * The vault's budgets. A list past its trust period is used while it is read again, not waited for: a database that
   * has stopped answering must not hold every request of a vault without budgets (architecture.md D31); a change
   * announced drops the list, and the next request waits for the new one.
   */
  async function budgetsOf(vaultId: number): Promise<readonly BudgetRow[]> {
    return cachedBudgets(vaultId) ?? read(vaultId);
  }

  /** The vault's cached list (read again in the background once past its trust period), or undefined when none is. */
  function cachedBudgets(vaultId: number): readonly BudgetRow[] | undefined {
    const hit = cache.get(vaultId);
    if (!hit) return undefined;
    if (d.now() - hit.at >= opts.trustMs(TRUST_MS)) read(vaultId).catch((err: unknown) => opts.log.debug("budget_list_stale", { err }));
    return hit.budgets;
  }

  /** Adds `delta` to each counted budget's period (TAKE_BACK: takes its count back); failures are logged. */
  function addLater(counted: readonly Counted[], delta: BudgetUsage | typeof TAKE_BACK, what: string): Promise<void> {
    return Promise.all(
      counted.map((c) =>
        (delta === TAKE_BACK ? d.store.budgets.takeBack(c.budget.id, c.start) : d.store.budgets.add(c.budget.id, c.start, delta)).catch((err: unknown) =>
          opts.log.error("budget_count_failed", { err, budget: c.budget.name, what }),
        ),
      ),
    ).then(() => {});
  }

  /**
   * Budgets found at their limit this period, by id: a request that one of them would refuse is refused without
   * counting it anywhere, so an agent hammering a spent budget never uses up another budget's room (a count taken
   * back arrives a moment later). Dropped with the vault's budget list (a change, a reset: announced).
   */
  const spent = new Map<number, { readonly vaultId: number; readonly start: number; readonly refusal: () => BudgetExceeded }>();

  function refusalOf(verdict: Extract<BudgetVerdict, { kind: "exceeded" }>, now: number): () => BudgetExceeded {
    const [name, unit] = MEASURE_NAMES[verdict.measure];
    const money = verdict.measure === "costMicros";
    return () =>
      new BudgetExceeded(
        verdict.budget.name,
        name,
        money ? verdict.limit / 1e6 : verdict.limit,
        money ? verdict.used / 1e6 : verdict.used,
        money ? currency() : unit,
        verdict.resetsAt,
        d.now() > now ? d.now() : now,
      );
  }

  /** Tells the vault's webhooks, once per budget and period, that its soft threshold is crossed. */
  function announceSoft(c: Counted, vault: string): void {
    void (async () => {
      if (!(await d.store.budgets.markSoftNotified(c.budget.id, c.start, d.now()))) return;
      opts.log.info("budget_soft_threshold", { vault, budget: c.budget.name, soft_action: c.budget.softAction });
      if (!d.webhooks || (await d.store.webhooks.count(c.budget.vaultId)) === 0) return;
      d.webhooks.notify(c.budget.vaultId, await budgetEvent(d, vault, c.budget, currency()));
    })().catch((err: unknown) => opts.log.error("budget_notice_failed", { err, budget: c.budget.name }));
  }

  return {
    invalidate(vaultId) {
      generation++;
      cache.delete(vaultId);
      for (const [id, s] of spent) if (s.vaultId === vaultId) spent.delete(id);
    },
    clear() {
      // Announcements may have been missed (or the database was away): every list is read again, but used meanwhile,
      // so requests of vaults without budgets do not wait on a database that is coming back.
      generation++;
      for (const [id, hit] of cache) cache.set(id, { ...hit, at: 0 });
      spent.clear();
    },
    knownWithout(vaultId) {
      return cachedBudgets(vaultId)?.length === 0;
    },
    async admit(charge: BudgetCharge): Promise<BudgetTicket | undefined> {
      const all = await budgetsOf(charge.vault.id);
      if (all.length === 0) return undefined;
      const agent = /^agent:(\d+)$/.exec(charge.principal)?.[1];
      const subject = {
        agentId: agent === undefined ? null : Number(agent),
        service: charge.service,
        host: charge.port === 443 ? charge.host : `${charge.host}:${charge.port}`,
      };
      const applying = all.filter((b) => budgetApplies(b, subject));
      if (applying.length === 0) return undefined;
      const now = d.now();
      // A change or reset announced while this request is judged must not be undone by its verdict (a budget
      // remembered as spent on the old limit): only a judgement that no change overtook is remembered.
      const began = generation;
      for (const b of applying) {
        const s = spent.get(b.id);
        if (s && s.start === periodStart(b.period, now)) throw s.refusal();
      }
      // The tightest request limits first, each judged as it is counted: a request one refuses stops there, so a burst
      // at a spent narrow budget never passes through (and briefly fills) a wider one.
      const order = [...applying].sort((a, b) => (a.limits.requests ?? Infinity) - (b.limits.requests ?? Infinity));
      const counted: Counted[] = [];
      try {
        for (const budget of order) {
          const start = periodStart(budget.period, now);
          const after = await d.store.budgets.add(budget.id, start, ONE_REQUEST);
          // What was used before this request: the request limit is judged on it, so exactly `limit` requests go.
          const c = { budget, start, before: { ...after, requests: after.requests - 1 } };
          counted.push(c);
          const verdict = judgeBudgets([{ budget, used: c.before }], now);
          if (verdict.kind === "exceeded") {
            const refusal = refusalOf(verdict, now);
            if (began === generation) spent.set(budget.id, { vaultId: budget.vaultId, start, refusal });
            // Taken back before the answer: the next request is judged on what truly went.
            await addLater(counted, TAKE_BACK, "take back");
            throw refusal();
          }
        }
      } catch (err) {
        if (!(err instanceof BudgetExceeded)) void addLater(counted, TAKE_BACK, "take back");
        throw err;
      }
      const soft = counted.filter((c) => softCrossed(c.budget, c.before));
      for (const c of soft) announceSoft(c, charge.vault.name);
      let done = false;
      return {
        holdFor: soft.find((c) => c.budget.softAction === "approve")?.budget.name,
        countsUsage: counted.some(
          ({ budget: { limits: l } }) => l.inputTokens !== null || l.outputTokens !== null || l.totalTokens !== null || l.costMicros !== null,
        ),
        release() {
          if (done) return;
          done = true;
          void addLater(counted, TAKE_BACK, "take back");
        },
        settle(call: MeteredCall | undefined) {
          if (done) return;
          done = true;
          if (!call) return;
          void addLater(
            counted,
            {
              requests: 0,
              inputTokens: call.inputTokens,
              outputTokens: call.outputTokens,
              totalTokens: call.totalTokens,
              costMicros: call.chargedMicros,
              unpricedCalls: call.costMicros === undefined ? 1 : 0,
            },
            "usage",
          );
        },
      };
    },
  };
}

/** A budget this request was counted in, the period it was counted in, and what was used before it. */
interface Counted {
  readonly budget: BudgetRow;
  readonly start: number;
  readonly before: BudgetUsage;
}
