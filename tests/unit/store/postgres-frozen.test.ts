// A frozen PostgreSQL (a stuck server or a partition: connections stay open, nothing answers) is a down
// database (store/postgres.ts): a statement past BROKER_DATABASE_STATEMENT_TIMEOUT_MS fails with
// DatabaseUnavailable, the breaker then refuses at once instead of letting every caller wait, one probe
// at a time finds out when it answers again, and reachability() says all this from memory. Frozen here
// by a relay between the pool and a real server that stops passing bytes, in both directions, on demand.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, createServer, type Server, type Socket } from "node:net";
import { DatabaseUnavailable } from "../../../src/errors.ts";
import { openPostgres } from "../../../src/store/postgres.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../../helpers/postgres.ts";

interface Relay {
  readonly port: number;
  freeze(): void;
  thaw(): void;
  close(): void;
}

/** Passes bytes both ways; frozen, it holds them (as a stopped server's kernel would) until thawed. */
async function startRelay(targetPort: number): Promise<Relay> {
  let frozen = false;
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const pipe = (from: Socket, to: Socket) =>
    from.on("data", (chunk) => {
      if (frozen) held.push(() => to.write(chunk));
      else to.write(chunk);
    });
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    freeze: () => void (frozen = true),
    thaw() {
      frozen = false;
      for (const send of held.splice(0)) send();
    },
    close() {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}

describe.skipIf(pgMissing)("a frozen PostgreSQL is a down database", () => {
  let cluster: SharedPgCluster;
  let relay: Relay;
  let url: string;
  beforeAll(async () => {
    cluster = await sharedPgCluster();
    const direct = new URL(await cluster.createDatabase());
    relay = await startRelay(Number(direct.port));
    direct.port = String(relay.port);
    url = direct.toString();
  });
  afterAll(async () => {
    relay?.close();
    await cluster?.release();
  });

  test("a statement without an answer fails within the bound; then callers are refused at once; one probe finds it back", async () => {
    const db = openPostgres(url, { max: 4, statementTimeoutMs: 300 });
    try {
      expect(await db.get<{ one: number }>("SELECT 1 AS one")).toEqual({ one: 1 });
      expect(db.reachability?.().reachable).toBe(true);

      relay.freeze();
      const first = await db.get("SELECT 1").catch((e) => e);
      expect(first).toBeInstanceOf(DatabaseUnavailable);
      expect((first as DatabaseUnavailable).reason).toMatch(/no answer within 300 ms/);
      expect(db.reachability?.()).toMatchObject({ reachable: false, reason: "no answer within 300 ms" });

      // Within the break, and while a probe is out, nobody waits: refused without reaching the server.
      const outcomes = await Promise.all(Array.from({ length: 20 }, () => db.get("SELECT 1").catch((e) => e)));
      expect(outcomes.every((e) => e instanceof DatabaseUnavailable)).toBe(true);
      // A transaction is bounded as a whole (its connection, its statements, its ROLLBACK on a frozen server).
      await Bun.sleep(1100);
      const tx = await db.transaction((t) => t.get("SELECT 1")).catch((e) => e);
      expect(tx).toBeInstanceOf(DatabaseUnavailable);

      relay.thaw();
      await Bun.sleep(1100); // the break after the last failure
      expect(await db.get<{ one: number }>("SELECT 1 AS one")).toEqual({ one: 1 });
      expect(db.reachability?.().reachable).toBe(true);
    } finally {
      relay.thaw();
      db.close();
    }
  }, 30_000);

  test("a slow statement on a server that still answers is that caller's 503, not everyone's: the breaker stays closed and the server cancels it", async () => {
    const db = openPostgres(url, { max: 4, statementTimeoutMs: 400 });
    try {
      await Bun.sleep(700); // the probe connection has answered once
      const slow = await Promise.all(Array.from({ length: 6 }, () => db.get("SELECT pg_sleep(3)").catch((e) => e)));
      expect(slow.every((e) => e instanceof DatabaseUnavailable)).toBe(true);
      expect(db.reachability?.().reachable).toBe(true);
      expect(await db.get<{ one: number }>("SELECT 1 AS one")).toEqual({ one: 1 }); // at once: not refused by an open breaker
      // The server gave up on them (statement_timeout): none is still sleeping on a connection.
      const sleeping = await db.get<{ n: number }>(
        "SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE 'SELECT pg_sleep(3)%'",
      );
      expect(sleeping?.n).toBe(0);
    } finally {
      db.close();
    }
  }, 30_000);

  test("migrations run unbounded: `unbounded` waits out a slow statement that the bounded handle gives up on", async () => {
    const db = openPostgres(url, { max: 2, statementTimeoutMs: 200 });
    try {
      expect(await db.get("SELECT pg_sleep(0.4)").catch((e) => e)).toBeInstanceOf(DatabaseUnavailable);
      expect(await db.unbounded?.get<{ done: boolean }>("SELECT pg_sleep(0.4) IS NOT NULL AS done")).toEqual({ done: true });
    } finally {
      db.close();
    }
  }, 30_000);

  test("no bound unless asked: the CLI's tools (migrate-db, inspect) wait as long as the server takes", async () => {
    const db = openPostgres(url, { max: 1 });
    try {
      expect(await db.get<{ done: boolean }>("SELECT pg_sleep(0.3) IS NOT NULL AS done")).toEqual({ done: true });
      expect(db.unbounded).toBeDefined();
    } finally {
      db.close();
    }
  });
});
