// Start-up when a port is taken: the compiled binary exits non-zero within seconds, naming the variable and the
// port, whichever listener (API or proxy) cannot bind; in process, a failed start leaves nothing listening.

import { afterAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createMemoryLogger } from "../../src/log.ts";
import { ListenFailed, startServer } from "../../src/app/index.ts";
import { cleanEnv, isolatedBinary, tempDir } from "../helpers/binary.ts";
import { pgMissing, sharedPgCluster, type SharedPgCluster } from "../helpers/postgres.ts";

const { bin, dir } = isolatedBinary();
const held: Server[] = [];
afterAll(() => Promise.all(held.map((s) => new Promise((resolve) => s.close(resolve)))));

/** A port some other process holds: a plain TCP listener on 127.0.0.1. */
async function occupiedPort(): Promise<number> {
  const server = createServer(() => {});
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  held.push(server);
  return (server.address() as { port: number }).port;
}

/** A port nobody holds right now (bound once, then released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs `broker server`; kills it if it has not exited within `boundMs` (the bug: it ran on forever). */
async function runServer(env: Record<string, string>, boundMs = 15_000) {
  const started = Date.now();
  const proc = Bun.spawn([bin, "server"], {
    env: cleanEnv({ BROKER_DATA_DIR: join(tempDir(), "data"), ...env }),
    cwd: dir,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const killer = setTimeout(() => proc.kill("SIGKILL"), boundMs);
  const [stdout, stderr, exitCode] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(killer);
  return { exitCode, signal: proc.signalCode, stdout, stderr, ms: Date.now() - started };
}

describe("compiled binary, a port already taken", () => {
  test("BROKER_PROXY_PORT busy: exits non-zero naming the variable and the port (no API left answering 503)", async () => {
    const busy = await occupiedPort();
    const r = await runServer({ BROKER_PORT: "0", BROKER_PROXY_PORT: String(busy) });
    expect(r.signal).toBeNull(); // exited by itself, not killed at the bound
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain(
      `error: cannot start: BROKER_PROXY_PORT ${busy} is already in use on 127.0.0.1 (EADDRINUSE); choose another port or stop the other process`,
    );
    expect(r.stdout + r.stderr).not.toContain('"event":"listening"');
  }, 30_000);

  test("BROKER_PORT busy: exits non-zero naming the variable and the port", async () => {
    const busy = await occupiedPort();
    const r = await runServer({ BROKER_PORT: String(busy), BROKER_PROXY_PORT: "0" });
    expect(r.signal).toBeNull();
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain(
      `error: cannot start: BROKER_PORT ${busy} is already in use on 127.0.0.1 (EADDRINUSE); choose another port or stop the other process`,
    );
  }, 30_000);
});

describe("compiled binary, an identity provider it cannot use", () => {
  test("an unreachable BROKER_OIDC_ISSUER stops the start with a message naming it", async () => {
    const closed = await freePort();
    const r = await runServer({
      BROKER_PORT: "0",
      BROKER_PROXY_PORT: "0",
      BROKER_OIDC_ISSUER: `http://127.0.0.1:${closed}`,
      BROKER_OIDC_CLIENT_ID: "broker",
      BROKER_OIDC_CLIENT_SECRET: "s3cret-value",
    });
    expect(r.signal).toBeNull();
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain("BROKER_OIDC_ISSUER");
    expect(r.stdout + r.stderr).not.toContain("s3cret-value");
    expect(r.stdout + r.stderr).not.toContain('"event":"listening"');
  }, 30_000);
});

describe("in process", () => {
  test("a busy proxy port rejects with ListenFailed and releases the API port it had bound", async () => {
    const busy = await occupiedPort();
    const apiPort = await freePort();
    const data = join(tempDir(), "data");
    const config = loadConfig({ BROKER_DATA_DIR: data, BROKER_PORT: String(apiPort), BROKER_PROXY_PORT: String(busy) });
    const failed = await startServer({ config, log: createMemoryLogger(), masterPassword: undefined, tunnel: true }).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(ListenFailed);
    expect(failed).toMatchObject({ setting: "BROKER_PROXY_PORT", port: busy, code: "EADDRINUSE" });
    // Nothing of the failed start is left: the same API port binds again, and so does a full start.
    const again = await startServer({
      config: loadConfig({ BROKER_DATA_DIR: data, BROKER_PORT: String(apiPort), BROKER_PROXY_PORT: "0" }),
      log: createMemoryLogger(),
      masterPassword: undefined,
      tunnel: true,
    });
    expect((await fetch(`${again.apiUrl}/health`)).status).toBe(200);
    await again.stop();
  });
});

describe("in process, a request during the start", () => {
  test("waits for the app and is answered by it, not refused with 503 (the API port is bound before the app exists)", async () => {
    // A slow identity provider holds the start after the API port is bound (discovery comes after the bind).
    let asked!: () => void;
    const discoveryAsked = new Promise<void>((resolve) => (asked = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const idp: Bun.Server<undefined> = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req): Promise<Response> {
        const issuer = `http://127.0.0.1:${idp.port}`;
        if (new URL(req.url).pathname !== "/.well-known/openid-configuration") return new Response("not found", { status: 404 });
        asked();
        await released;
        return Response.json({
          issuer,
          authorization_endpoint: `${issuer}/auth`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ["code"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: ["ES256"],
        });
      },
    });
    const apiPort = await freePort();
    const config = loadConfig({
      BROKER_DATA_DIR: join(tempDir(), "data"),
      BROKER_PORT: String(apiPort),
      BROKER_PROXY_PORT: "0",
      BROKER_OIDC_ISSUER: `http://127.0.0.1:${idp.port}`,
      BROKER_OIDC_CLIENT_ID: "broker",
      BROKER_OIDC_CLIENT_SECRET: "s3cret-value",
    });
    const starting = startServer({ config, log: createMemoryLogger(), masterPassword: undefined, tunnel: true });
    await discoveryAsked;
    const early = fetch(`http://127.0.0.1:${apiPort}/health`);
    const first = await Promise.race([early.then(() => "answered"), Bun.sleep(300).then(() => "waiting")]);
    expect(first).toBe("waiting");
    release();
    const running = await starting;
    const res = await early;
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe("ok");
    await running.stop();
    idp.stop(true);
  });
});

describe("compiled binary, a database it cannot use", () => {
  const PASSWORD = "pw-start-Zq81";
  let cluster: SharedPgCluster | undefined;
  afterAll(() => cluster?.release());

  test("PostgreSQL not listening: exits non-zero naming the database (without its password) and what to check", async () => {
    const closed = await freePort();
    const r = await runServer({ BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_DATABASE_URL: `postgres://broker:${PASSWORD}@127.0.0.1:${closed}/broker` });
    expect(r.signal).toBeNull();
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toContain(`error: cannot reach the database postgres://broker:***@127.0.0.1:${closed}/broker (ERR_POSTGRES_CONNECTION_REFUSED)`);
    expect(r.stderr).toContain("hint: check that PostgreSQL is running");
    expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  }, 30_000);

  test.skipIf(pgMissing)(
    "a wrong password and a missing database are told apart",
    async () => {
      cluster = await sharedPgCluster();
      const url = new URL(await cluster.createDatabase());
      url.password = PASSWORD;
      const wrong = await runServer({ BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_DATABASE_URL: url.toString() });
      expect(wrong.exitCode).not.toBe(0);
      expect(wrong.stderr).toContain("refused the sign-in: password authentication failed");
      expect(wrong.stderr).toContain("hint: check the user name and password in BROKER_DATABASE_URL");
      expect(wrong.stdout + wrong.stderr).not.toContain(PASSWORD);

      const missing = new URL(await cluster.createDatabase());
      missing.pathname = "/no_such_db";
      const r = await runServer({ BROKER_PORT: "0", BROKER_PROXY_PORT: "0", BROKER_DATABASE_URL: missing.toString() });
      expect(r.exitCode).not.toBe(0);
      expect(r.stderr).toContain('database "no_such_db" does not exist');
      expect(r.stderr).toContain("hint: create it first");
      expect(r.stdout + r.stderr).not.toContain(decodeURIComponent(missing.password));
    },
    60_000,
  );
});
