// Delivers proposal events to a vault's webhooks, off the request path: a small in-memory queue, each POST
// signed (Broker-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">), sent to an address the network
// guard checked (the checked IP is dialled, TLS verified against the URL's host name), retried with backoff,
// and its outcome recorded on the webhook row. Never logs a URL, a secret or a payload.

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
  /** Drops what is queued and cancels waiting retries. */
  stop(): void;
}

const DEFAULT_DELAYS_MS = [1_000, 4_000, 15_000, 60_000];
/** Jobs queued or waiting for a retry, at most: beyond it new events are dropped (and logged), never buffered without bound. */
const MAX_PENDING = 1_000;
const MAX_ERROR_LENGTH = 200;

interface Job {
  readonly webhookId: number;
  readonly vaultId: number;
  readonly event: BrokerEvent;
  /** The same for every try, so a receiver can drop a repeat. */
  readonly deliveryId: string;
  attempts: number;
}

type Outcome = { ok: true } | { ok: false; final: boolean; status: WebhookStatus; error: string };

export function createWebhookSender(deps: WebhookSenderDeps): WebhookSender {
  const delays = deps.retryDelaysMs ?? DEFAULT_DELAYS_MS;
  const timers = new Set<ReturnType<typeof setTimeout>>();
  let pending = 0;
  let stopped = false;
  let waiters: (() => void)[] = [];

  const settle = () => {
    pending -= 1;
    if (pending === 0) for (const w of waiters.splice(0)) w();
  };

  async function run(job: Job): Promise<void> {
    try {
      const row = await deps.store.webhooks.byId(job.webhookId);
      if (!row || stopped) return settle(); // removed meanwhile
      job.attempts += 1;
      const outcome = await attempt(row, job);
      const last = outcome.ok || outcome.final || job.attempts > delays.length;
      const status: WebhookStatus = outcome.ok ? "delivered" : last ? outcome.status : "retrying";
      await deps.store.webhooks.recordDelivery(row.id, {
        status,
        event: job.event.event,
        attempts: job.attempts,
        error: outcome.ok ? null : outcome.error,
        at: deps.now(),
      });
      if (!outcome.ok)
        deps.log.warn("webhook_delivery_failed", {
          webhook: row.id,
          vault: row.vaultId,
          event: job.event.event,
          attempts: job.attempts,
          status,
          error: outcome.error,
        });
      if (last || stopped) return settle();
      const timer = setTimeout(
        () => {
          timers.delete(timer);
          void run(job);
        },
        delays[job.attempts - 1],
      );
      timers.add(timer);
    } catch (err) {
      deps.log.error("webhook_delivery_error", { webhook: job.webhookId, err });
      settle();
    }
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
          signal: AbortSignal.timeout(deps.timeoutMs ?? 10_000),
          tls: { serverName: host, rejectUnauthorized: true, ...(deps.ca ? { ca: [...deps.ca] } : {}) },
        } as RequestInit);
        await res.body?.cancel().catch(() => {});
        if (res.status >= 200 && res.status < 300) return { ok: true };
        return { ok: false, final: false, status: "failed", error: `the receiver answered HTTP ${res.status}` };
      } catch (err) {
        error = describeFailure(err);
        if (/TLS|certificate/i.test(error)) break; // a certificate problem will not improve on the next address
      }
    }
    return { ok: false, final: false, status: "failed", error };
  }

  return {
    notify(vaultId, event) {
      if (stopped) return;
      pending += 1; // the look-up counts as work, so idle() waits for it
      void (async () => {
        const hooks = await deps.store.webhooks.list(vaultId);
        for (const hook of hooks) {
          if (pending > MAX_PENDING) {
            deps.log.warn("webhook_queue_full", { webhook: hook.id, vault: vaultId, event: event.event });
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
    stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      pending = 0;
      for (const w of waiters.splice(0)) w();
      waiters = [];
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
