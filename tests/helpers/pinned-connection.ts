// One keep-alive HTTP connection to a broker, for `--workers N` tests (tests/e2e/workers*.test.ts): every call on it
// reaches the worker that accepted it. Every answer's text goes to `outputs`, which the tests search for values that
// must never appear.

import { expect } from "bun:test";
import { Agent, request } from "node:http";

export type Reply = { status: number; body: any; text: string; headers: Record<string, string | string[] | undefined> };

export function pinned(base: string, outputs: string[]) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const call = (method: string, path: string, opts: { token?: string; body?: unknown; vault?: string } = {}) =>
    new Promise<Reply>((resolve, reject) => {
      const headers: Record<string, string> = { "content-type": "application/json" };
      if (opts.token) headers.authorization = `Bearer ${opts.token}`;
      if (opts.vault) headers["x-vault"] = opts.vault;
      const req = request(`${base}${path}`, { method, agent, headers }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          outputs.push(text);
          let body: any;
          try {
            body = text ? JSON.parse(text) : undefined;
          } catch {}
          resolve({ status: res.statusCode ?? 0, body, text, headers: res.headers });
        });
      });
      req.on("error", reject);
      req.end(opts.body === undefined ? undefined : JSON.stringify(opts.body));
    });
  /** The local port of the one socket (a request is made first if none is open). */
  const localPort = async (): Promise<number> => {
    const sockets = Object.values(agent.freeSockets).flat();
    if (sockets[0]?.localPort) return sockets[0].localPort;
    await call("GET", "/health");
    return Object.values(agent.freeSockets).flat()[0]!.localPort!;
  };
  return { call, localPort, close: () => agent.destroy() };
}
export type Pinned = ReturnType<typeof pinned>;

/**
 * A pinned connection to each of two workers: connections are opened until both have answered /health. `workersSaid`
 * gets each answer's `worker.of`.
 */
export async function oneConnectionPerWorker(base: string, outputs: string[], workersSaid: (of: unknown) => void = () => {}) {
  const found = new Map<number, Pinned>();
  for (let i = 0; i < 64 && found.size < 2; i++) {
    const conn = pinned(base, outputs);
    const health = await conn.call("GET", "/health");
    const id = health.body?.worker?.id as number;
    workersSaid(health.body?.worker?.of);
    if (found.has(id)) conn.close();
    else found.set(id, conn);
  }
  expect([...found.keys()].sort()).toEqual([1, 2]);
  return { one: found.get(1)!, two: found.get(2)! };
}
