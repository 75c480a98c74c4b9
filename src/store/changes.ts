// Keeps the in-memory caches of several instances honest. On PostgreSQL, triggers announce every
// committed change on one channel (store migration 7); each instance listens and drops what the
// change touched. A heartbeat that each instance sends itself through the same channel proves the
// subscription still delivers: while it does not, caches are re-validated every second instead of
// trusted, and when it delivers again everything cached is dropped, since announcements made in
// the gap were lost. On SQLite (one instance) there is nothing to listen to and caches are trusted.

import { CHANGES_CHANNEL } from "./schema.ts";
import { type Db } from "./db.ts";

export type Change =
  | { readonly t: "vault"; readonly id: number }
  | { readonly t: "session"; readonly tokenHash: string }
  | { readonly t: "principal" }
  | { readonly t: "ca" }
  | { readonly t: "settings" }
  | { readonly t: "secret_store" };

export interface ChangeHandlers {
  apply(change: Change): void;
  /** Drop everything cached: announcements may have been missed. */
  resync(): void;
}

export interface Freshness {
  /** How long a cached read may be trusted now: `normal` while announcements flow, 1 s while they may be missed. */
  trustMs(normal: number): number;
  /** Whether announcements from other instances are known to arrive. */
  readonly listening: boolean;
}

export interface ChangeFeed extends Freshness {
  /** Subscribes and starts the heartbeat; call once. */
  start(handlers: ChangeHandlers): Promise<void>;
  stop(): Promise<void>;
}

export const REVALIDATE_MS = 1000;

/** Single instance (SQLite): every change happens here, so local invalidation is the whole story. */
export const ALWAYS_FRESH: Freshness = { trustMs: (normal) => normal, listening: true };

export interface FeedOptions {
  readonly heartbeatMs?: number;
  readonly now?: () => number;
  readonly onState?: (listening: boolean) => void;
  readonly onError?: (err: unknown) => void;
}

/**
 * The feed exists before the caches that consult it (they take it as their Freshness) and starts
 * listening once they exist to be invalidated: until then it trusts nothing for longer than a second.
 */
export function createChangeFeed(db: Db, opts: FeedOptions = {}): ChangeFeed {
  const listen = db.listen?.bind(db);
  const notify = db.notify?.bind(db);
  if (!listen || !notify) return { ...ALWAYS_FRESH, start: async () => {}, stop: async () => {} };
  const now = opts.now ?? Date.now;
  const beatEvery = opts.heartbeatMs ?? 400;
  const me = crypto.randomUUID();
  const beat = JSON.stringify({ t: "beat", from: me });
  let lastBeat = 0;
  let listening = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let unlisten: (() => Promise<void>) | undefined;
  let stopped = false;

  return {
    trustMs: (normal) => (listening ? normal : Math.min(normal, REVALIDATE_MS)),
    get listening() {
      return listening;
    },
    async start(handlers) {
      if (timer) throw new Error("the change feed is already started");
      const setListening = (on: boolean) => {
        if (on === listening) return;
        listening = on;
        if (on) handlers.resync(); // whatever was announced while deaf is unknown: forget it all
        opts.onState?.(on);
      };
      const onMessage = (payload: string) => {
        if (payload === beat) {
          lastBeat = now();
          // A heartbeat sent during an outage may arrive before the pool has found the database again
          // (its breaker still open): the resync's reloads (root CA, saved limits) would fail and not be
          // tried again. Trusted from the next heartbeat, which the breaker's probe will have let through.
          if (db.reachability?.().reachable === false) return;
          setListening(true);
          return;
        }
        const change = parseChange(payload);
        if (change) handlers.apply(change);
        else if (!payload.includes('"beat"')) handlers.resync(); // an announcement we cannot read: be safe
      };
      let subscribed = false;
      const onListening = () => {
        // Called again after every reconnect, often sooner than a missed heartbeat would show the drop:
        // what was announced while the connection was down reached nobody. Deaf, then, until our own
        // heartbeat comes back through the new subscription, which drops every cache (setListening).
        if (subscribed) setListening(false);
        subscribed = true;
        void notify(CHANGES_CHANNEL, beat).catch(() => {});
      };
      const subscriber = { onMessage, onListening };
      unlisten = await listen(CHANGES_CHANNEL, subscriber);
      // The subscription's own reconnection waits longer after every failure (Bun's backoff reached 30 s
      // after a minute's outage): once the database answers again but our heartbeat does not come back,
      // subscribe afresh rather than wait, so the instance is trusted again within a second or two.
      let answeredBeats = 0;
      let resubscribing = false;
      const resubscribe = async () => {
        resubscribing = true;
        try {
          const old = unlisten;
          unlisten = undefined;
          await old?.().catch(() => {});
          subscribed = false; // a fresh subscription: its first acknowledgement is not a reconnect
          unlisten = await listen(CHANGES_CHANNEL, subscriber);
        } catch (err) {
          opts.onError?.(err);
        } finally {
          resubscribing = false;
          answeredBeats = 0;
        }
      };
      timer = setInterval(() => {
        if (listening && now() - lastBeat > beatEvery * 3) setListening(false);
        notify(CHANGES_CHANNEL, beat).then(
          () => {
            if (listening || stopped) return void (answeredBeats = 0);
            // Three heartbeats delivered to the database but not back to us: it is there, our subscription is not.
            if (++answeredBeats >= 3 && !resubscribing) void resubscribe();
          },
          (err) => opts.onError?.(err),
        );
      }, beatEvery);
      timer.unref?.();
      await notify(CHANGES_CHANNEL, beat).catch(() => {});
    },
    async stop() {
      stopped = true;
      clearInterval(timer);
      await unlisten?.().catch(() => {});
    },
  };
}

/** Creates and starts a feed in one step (its handlers already exist). */
export async function startChangeFeed(db: Db, handlers: ChangeHandlers, opts: FeedOptions = {}): Promise<ChangeFeed> {
  const feed = createChangeFeed(db, opts);
  await feed.start(handlers);
  return feed;
}

export function parseChange(payload: string): Change | undefined {
  let m: { t?: unknown; id?: unknown };
  try {
    m = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (m === null || typeof m !== "object") return undefined;
  switch (m.t) {
    case "vault": {
      const id = Number(m.id);
      return Number.isSafeInteger(id) ? { t: "vault", id } : undefined;
    }
    case "session":
      return typeof m.id === "string" && /^[0-9a-f]{64}$/.test(m.id) ? { t: "session", tokenHash: m.id } : undefined;
    case "principal":
    case "ca":
    case "settings":
    case "secret_store":
      return { t: m.t };
    default:
      return undefined;
  }
}
