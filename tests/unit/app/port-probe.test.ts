// Fixed ports for a `--workers` group (app/port-probe.ts): a supervisor's claim on a port is exclusive while it holds
// it (a second claim, as from a supervisor started in the same instant, is refused naming the setting and the port),
// and let go on release; a port something listens on is refused as before; port 0 is neither claimed nor probed.

import { afterEach, expect, test } from "bun:test";
import { ListenFailed } from "../../../src/app/listen-error.ts";
import { claimPorts } from "../../../src/app/port-probe.ts";

const held: { release(): void }[] = [];
afterEach(() => {
  for (const h of held.splice(0)) h.release();
});

function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: unknown) => err,
  );

test("a second claim on a claimed port is refused naming it; after release it succeeds", async () => {
  const [api, proxy] = [freePort(), freePort()];
  const ports = [
    { setting: "BROKER_PORT" as const, port: api },
    { setting: "BROKER_PROXY_PORT" as const, port: proxy },
  ];
  const first = await claimPorts("127.0.0.1", ports);
  held.push(first);
  const err = await refusal(claimPorts("127.0.0.1", ports));
  expect(err).toBeInstanceOf(ListenFailed);
  expect(err).toMatchObject({ setting: "BROKER_PORT", port: api, code: "EADDRINUSE" });
  expect((err as Error).message).toContain(
    `BROKER_PORT ${api} is already in use on 127.0.0.1: UDP port ${api} there is taken, which a broker server --workers`,
  );
  // Only the proxy port in common: refused on that one.
  const other = await refusal(claimPorts("127.0.0.1", [{ setting: "BROKER_PORT", port: 0 }, ports[1]!]));
  expect(other).toMatchObject({ setting: "BROKER_PROXY_PORT", port: proxy });
  first.release();
  held.push(await claimPorts("127.0.0.1", ports));
});

test("a port something listens on is refused as before, and what was claimed is let go", async () => {
  const api = freePort();
  const busy = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  try {
    const err = await refusal(
      claimPorts("127.0.0.1", [
        { setting: "BROKER_PORT", port: api },
        { setting: "BROKER_PROXY_PORT", port: busy.port },
      ]),
    );
    expect(err).toMatchObject({ setting: "BROKER_PROXY_PORT", port: busy.port, code: "EADDRINUSE" });
    expect((err as Error).message).toContain("(EADDRINUSE); choose another port or stop the other process");
    // The API port's claim was let go with the failure.
    held.push(await claimPorts("127.0.0.1", [{ setting: "BROKER_PORT", port: api }]));
  } finally {
    busy.stop(true);
  }
});
