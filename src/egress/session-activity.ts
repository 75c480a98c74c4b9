// What a session met at the transparent proxy, kept in memory for `vault run` to tell its agent: how many
// CONNECTs it made and the hosts it reached through a blind tunnel (not a service of the vault). Bounded in
// sessions, hosts and waiters; holds host names and counts only, never a token, path or header.
// In memory on the instance that saw the CONNECT: with several instances, a reader may miss some.

import type { ConnectDecision } from "./connect-decision.ts";

export interface UnmatchedHost {
  /** `host` on 443, else `host:port`, as the audit log writes it. */
  readonly host: string;
  readonly port: number;
  readonly name: string;
  readonly at: number;
}

export interface SessionActivity {
  readonly connects: number;
  /** In the order first reached; each host once. */
  readonly unmatched: readonly UnmatchedHost[];
}

export interface SessionActivityLog {
  /** A CONNECT made with the session (public id), and what the broker decided for it. */
  note(session: string, target: { host: string; port: number }, decision: ConnectDecision): void;
  /** Answers at once, or after up to `waitMs` when the session has no more than `after` unmatched hosts yet. */
  read(session: string, opts?: { after?: number; waitMs?: number; signal?: AbortSignal }): Promise<SessionActivity>;
}

export interface ActivityLimits {
  readonly maxSessions?: number;
  readonly maxHostsPerSession?: number;
  readonly maxWaitersPerSession?: number;
}

interface Entry {
  connects: number;
  unmatched: UnmatchedHost[];
  waiters: Set<() => void>;
}

const EMPTY: SessionActivity = { connects: 0, unmatched: [] };

export function createSessionActivity(now: () => number, limits: ActivityLimits = {}): SessionActivityLog {
  const maxSessions = limits.maxSessions ?? 10_000;
  const maxHosts = limits.maxHostsPerSession ?? 100;
  const maxWaiters = limits.maxWaitersPerSession ?? 4;
  const entries = new Map<string, Entry>(); // insertion order doubles as LRU order

  function entryOf(session: string): Entry {
    let e = entries.get(session);
    if (e) entries.delete(session);
    e ??= { connects: 0, unmatched: [], waiters: new Set() };
    entries.set(session, e);
    if (entries.size > maxSessions) {
      const [oldest, old] = entries.entries().next().value!;
      entries.delete(oldest);
      for (const wake of old.waiters) wake();
    }
    return e;
  }

  const view = (e: Entry | undefined): SessionActivity => (e ? { connects: e.connects, unmatched: [...e.unmatched] } : EMPTY);

  return {
    note(session, target, decision) {
      const e = entryOf(session);
      e.connects++;
      if ((decision !== "blind" && decision !== "report") || e.unmatched.length >= maxHosts) return;
      const name = target.port === 443 ? target.host : `${target.host}:${target.port}`;
      if (e.unmatched.some((u) => u.name === name)) return;
      e.unmatched.push({ host: target.host, port: target.port, name, at: now() });
      for (const wake of e.waiters) wake();
    },
    async read(session, opts = {}) {
      const e = entries.get(session);
      const waitMs = opts.waitMs ?? 0;
      if (waitMs <= 0 || (e?.unmatched.length ?? 0) > (opts.after ?? 0)) return view(e);
      const waited = e ?? entryOf(session);
      if (waited.waiters.size >= maxWaiters) return view(waited);
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          waited.waiters.delete(wake);
          opts.signal?.removeEventListener("abort", wake);
          resolve();
        };
        // A waiting read never keeps the process alive, and ends when its client goes away.
        const timer = setTimeout(wake, waitMs);
        timer.unref?.();
        opts.signal?.addEventListener("abort", wake, { once: true });
        waited.waiters.add(wake);
      });
      return view(entries.get(session));
    },
  };
}
