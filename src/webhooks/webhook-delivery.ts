// Delivers events (proposals, held requests, audit checkpoints) to a vault's webhooks, off the request path: a
// small in-memory queue, each POST signed (Broker-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">),
// sent to an address the network guard checked (the checked IP is dialled, TLS verified against the URL's
// host name), retried with backoff, and its outcome recorded on the webhook row. Never logs a URL, a secret or a payload.

import { createHmac, randomUUID } from "node:crypto";
import { EgressBlocked, UpstreamUnreachable } from "../errors.ts";
import type { Logger } from "../log.ts";
import type { Store, WebhookRow, WebhookStatus } from "../store/index.ts";
import { describeEventText, openWebhookSecret } from "../workflows/index.ts";
import { type BrokerEvent, type WebhookNotifier } from "../identity/index.ts";
import { resolveChecked, type NetPolicy, type Resolver } from "../egress/index.ts";

export interface WebhookSenderDeps {
  readonly store: Store;
  readonly dataKey: CryptoKey;
  /** The guard's policy, read per delivery. */
  readonly policy: () => NetPolicy;
  readonly resolver: Resolver;
  /** Trusted roots for https receivers (system plus BROKER_UPSTREAM_CA_FILE); undefined: the runtime's. */
  readonly ca?: readonly string[];
  readonly now: () => number;
  readonly log: Logger;
  /** Wait after each failed attempt; its length + 1 is the number of tries. Default 1s, 4s, 15s, 60s (5 tries). */
  readonly retryDelaysMs?: readonly number[];
  readonly timeoutMs?: number;
}

export interface WebhookSender extends WebhookNotifier {
  /** Resolves once nothing is queued, waiting or in flight (tests, graceful shutdown). */
  idle(): Promise<void>;
  /**
   * Shutdown: no delivery starts from now on (new events are counted and dropped, waiting retries end as
   * failed); attempts in flight get up to `graceMs`, then are cut. Resolves once every outcome is recorded
   * (or could not be), after which the sender makes no statement: the store may close.
   */
  stop(graceMs?: number): Promise<void>;
}

const DEFAULT_DELAYS_MS = [1_000, 4_000, 15_000, 60_000];
/** Jobs queued or waiting for a retry, at most: beyond it new events are dropped (and logged), never buffered without bound. */
const MAX_PENDING = 1_000;
const MAX_ERROR_LENGTH = 200;
/** After the grace, what cut attempts get to record their outcome (one UPDATE each). */
const RECORD_AFTER_CUT_MS = 2_000;

interface Job {
  readonly webhookId: number;
  readonly vaultId: number;
  readonly event: BrokerEvent;
  /** The same for every try, so a receiver can drop a repeat. */
  readonly deliveryId: string;
  attempts: number;
  lastError?: string;
}

type Outcome = { ok: true } | { ok: false; final: boolean; status: WebhookStatus; error: string };

export function createWebhookSender(deps: WebhookSenderDeps): WebhookSender {
  const delays = deps.retryDelaysMs ?? DEFAULT_DELAYS_MS;
  /** Retries waiting for their time, with their job (ended as failed at shutdown). */
  const retries = new Map<ReturnType<typeof setTimeout>, Job>();
  /** Aborts the attempts in flight once the shutdown grace is over. */
  const cut = new AbortController();
  let pending = 0;
  /** Shutdown began: nothing new starts. */
  let stopped = false;
  /** Shutdown ended: the store may be closed, so no statement at all. */
  let closed = false;
  let droppedAtStop = 0;
  const waiters: (() => void)[] = [];

  const settle = () => {
    pending -= 1;
    if (pending === 0) for (const w of waiters.splice(0)) w();
  };

  async function run(job: Job): Promise<void> {
    try {
      if (stopped) return notTried(job);
      const row = await deps.store.webhooks.byId(job.webhookId);
      if (!row) return settle(); // removed meanwhile
      if (stopped) return notTried(job); // shutdown began during the look-up
      job.attempts += 1;
      const outcome = await attempt(row, job);
      if (closed) return settle(); // cut and not recorded in time: counted by stop()
      // Begun before the shutdown, ended during it: its outcome is recorded, but there is no next try.
      const last = outcome.ok || outcome.final || job.attempts > delays.length || stopped;
      const status: WebhookStatus = outcome.ok ? "delivered" : last ? outcome.status : "retrying";
      await deps.store.webhooks.recordDelivery(row.id, {
        status,
        event: job.event.event,
        attempts: job.attempts,
        error: outcome.ok ? null : outcome.error,
        at: deps.now(),
      });
      if (!outcome.ok) {
        job.lastError = outcome.error;
        deps.log.warn("webhook_delivery_failed", {
          webhook: row.id,
          vault: row.vaultId,
          webhook_event: job.event.event, // not `event`: that key is the log line's own name
          attempts: job.attempts,
          status,
          error: outcome.error,
        });
      }
      if (last) return settle();
      const timer = setTimeout(
        () => {
          retries.delete(timer);
          void run(job);
        },
        delays[job.attempts - 1],
      );
      retries.set(timer, job);
    } catch (err) {
      if (!closed) deps.log.error("webhook_delivery_error", { webhook: job.webhookId, err });
      settle();
    }
  }

  /** A try shutdown kept from starting: a first one is counted as unsent, a retry ends as failed. */
  function notTried(job: Job): Promise<void> | void {
    if (job.attempts > 0) return giveUp(job);
    droppedAtStop += 1;
    settle();
  }

  /** A retry that will not happen: the row says failed, with the last try's error, instead of "retrying" for ever. */
  async function giveUp(job: Job): Promise<void> {
    try {
      await deps.store.webhooks.recordDelivery(job.webhookId, {
        status: "failed",
        event: job.event.event,
        attempts: job.attempts,
        error: clip(`not tried again: the broker shut down (last try: ${job.lastError ?? "failed"})`),
        at: deps.now(),
      });
    } catch (err) {
      if (!closed) deps.log.error("webhook_delivery_error", { webhook: job.webhookId, err });
    } finally {
      settle();
    }
  }

  /** Whether everything settled within `ms`. */
  function settledWithin(ms: number): Promise<boolean> {
    if (pending === 0) return Promise.resolve(true);
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      new Promise<boolean>((resolve) => waiters.push(() => resolve(true))),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
    ]).finally(() => clearTimeout(timer));
  }

  async function attempt(row: WebhookRow, job: Job): Promise<Outcome> {
    const url = new URL(row.url);
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    let addresses: string[];
    try {
      addresses = await resolveChecked(host, port, deps.policy(), deps.resolver);
    } catch (err) {
      if (err instanceof EgressBlocked) return { ok: false, final: true, status: "blocked", error: clip(`refused by the network guard: ${err.message}`) };
      return { ok: false, final: false, status: "failed", error: err instanceof UpstreamUnreachable ? clip(err.message) : "could not resolve the receiver" };
    }
    const body = row.format === "slack" ? JSON.stringify({ text: describeEventText(job.event) }) : JSON.stringify(job.event);
    const secret = await openWebhookSecret(deps.dataKey, row);
    const t = Math.floor(deps.now() / 1000);
    // reveal: the HMAC key, used here and nowhere else
    const signature = createHmac("sha256", secret.reveal()).update(`${t}.${body}`).digest("hex");
    const headers = {
      host: url.host,
      "content-type": "application/json",
      "user-agent": "broker-webhook/1",
      "broker-signature": `t=${t},v1=${signature}`,
      "broker-event": job.event.event,
      "broker-delivery": job.deliveryId,
    };
    let error = "no address answered";
    for (const ip of addresses) {
      const target = `${url.protocol}//${ip.includes(":") ? `[${ip}]` : ip}:${port}${url.pathname}${url.search}`;
      try {
        const res = await fetch(target, {
          method: "POST",
          headers,
          body,
          redirect: "manual",
          signal: AbortSignal.any([AbortSignal.timeout(deps.timeoutMs ?? 10_000), cut.signal]),
          tls: { serverName: host, rejectUnauthorized: true, ...(deps.ca ? { ca: [...deps.ca] } : {}) },
        } as RequestInit);
        await res.body?.cancel().catch(() => {});
        if (res.status >= 200 && res.status < 300) return { ok: true };
        return { ok: false, final: false, status: "failed", error: `the receiver answered HTTP ${res.status}` };
      } catch (err) {
        if (cut.signal.aborted) return { ok: false, final: true, status: "failed", error: "the broker shut down before the receiver answered" };
        error = describeFailure(err);
        if (/TLS|certificate/i.test(error)) break; // a certificate problem will not improve on the next address
      }
    }
    return { ok: false, final: false, status: "failed", error };
  }

  return {
    notify(vaultId, event) {
      if (stopped) {
        droppedAtStop += 1;
        return;
      }
      pending += 1; // the look-up counts as work, so idle() waits for it
      void (async () => {
        const hooks = await deps.store.webhooks.list(vaultId);
        for (const hook of hooks) {
          // A signed checkpoint is a copy for a machine to keep (JSON), not a line for a chat channel.
          if (event.event === "audit.checkpoint" && hook.format !== "json") continue;
          if (pending > MAX_PENDING) {
            deps.log.warn("webhook_queue_full", { webhook: hook.id, vault: vaultId, webhook_event: event.event });
            continue;
          }
          pending += 1;
          void run({ webhookId: hook.id, vaultId, event, deliveryId: randomUUID(), attempts: 0 });
        }
      })()
        .catch((err) => deps.log.error("webhook_delivery_error", { vault: vaultId, err }))
        .finally(settle);
    },
    idle: () => (pending === 0 ? Promise.resolve() : new Promise((resolve) => waiters.push(resolve))),
    async stop(graceMs = 0) {
      if (!stopped) {
        stopped = true;
        for (const [timer, job] of retries) {
          clearTimeout(timer);
          void giveUp(job);
        }
        retries.clear();
      }
      if (!(await settledWithin(graceMs))) {
        cut.abort();
        await settledWithin(RECORD_AFTER_CUT_MS);
      }
      closed = true;
      if (pending > 0) deps.log.warn("webhook_outcomes_unrecorded", { deliveries: pending, reason: "the database did not answer at shutdown" });
      if (droppedAtStop > 0) deps.log.warn("webhook_events_unsent", { count: droppedAtStop, reason: "raised during shutdown" });
    },
  };
}

function describeFailure(err: unknown): string {
  if (err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError")) return "the receiver did not answer in time";
  const code = (err as { code?: unknown } | null)?.code;
  const text = typeof code === "string" ? code : err instanceof Error ? err.name : "error";
  if (/CERT|TLS|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/i.test(text)) return clip(`TLS verification of the receiver failed (${text})`);
  return clip(`cannot connect to the receiver (${text})`);
}

function clip(s: string): string {
  return s.length > MAX_ERROR_LENGTH ? `${s.slice(0, MAX_ERROR_LENGTH - 1)}…` : s;
}
