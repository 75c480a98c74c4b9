// The README's "Your first agent" lines, run as written (issue 34's acceptance): the compiled binary as
// `broker`, real bash and real curl, from an empty data directory to a request the broker signs. A local
// HTTPS upstream on port 443 of its own loopback address stands in for api.github.com (BROKER_RESOLVE
// maps the name to it; the network guard still checks the address, so the allowlist names the range).

import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomInt } from "node:crypto";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { cleanEnv, isolatedBinary, startBinaryServer, tempDir, type ServerProcess } from "../helpers/binary.ts";
import { startUpstream, type TestUpstream } from "../helpers/upstream.ts";

const ADDRESS = `127.${randomInt(1, 250)}.${randomInt(1, 250)}.${randomInt(2, 250)}`;
const SECRET = `ghp_${crypto.randomUUID().replaceAll("-", "")}`;
let upstream: TestUpstream;
let server: ServerProcess | undefined;
let port = 0;
const { bin, dir } = isolatedBinary();

/** The shell lines between the README's first-agent markers, exactly as a reader copies them. */
function readmeLines(): string {
  const readme = readFileSync(resolve(import.meta.dir, "..", "..", "README.md"), "utf8");
  const block = /<!-- first-agent -->\n```sh\n([\s\S]*?)```\n<!-- \/first-agent -->/.exec(readme);
  if (!block) throw new Error("README.md has no first-agent block");
  return block[1]!;
}

beforeAll(async () => {
  upstream = await startUpstream(
    (_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end('{"login":"octocat"}');
    },
    { host: ADDRESS, port: 443, names: { dns: ["api.github.com"], ips: [] } },
  );
  const caFile = join(tempDir(), "upstream-ca.pem");
  writeFileSync(caFile, upstream.pki.caPem);
  // Ports the broker binds itself (0) and says in its "listening" line: a port picked free beforehand may be taken by
  // another test before the broker binds it.
  server = await startBinaryServer(
    bin,
    cleanEnv({
      BROKER_DATA_DIR: join(tempDir(), "data"),
      BROKER_RESOLVE: `api.github.com:443:${ADDRESS}`,
      BROKER_NETWORK_ALLOWLIST: "127.0.0.0/8",
      BROKER_UPSTREAM_CA_FILE: caFile,
    }),
    dir,
  );
  port = Number(new URL(server.url).port);
});

afterAll(async () => {
  await server?.stop();
  await upstream?.close();
});

test("the README's first-agent lines, run as written, end in a request the broker signs with the stored token", async () => {
  const path = tempDir("broker-path-");
  copyFileSync(bin, join(path, "broker"));
  Bun.spawnSync(["chmod", "755", join(path, "broker")]);
  const home = tempDir("broker-reader-");
  const script = `set -euo pipefail\n${readmeLines()}`;
  const proc = Bun.spawn(["bash", "-c", script], {
    env: {
      ...cleanEnv({ HOME: home }),
      PATH: `${path}:/usr/bin:/bin`,
      BROKER_ADDR: `http://127.0.0.1:${port}`,
      OWNER_PASSWORD: "correct horse battery staple",
      GITHUB_TOKEN: SECRET,
    },
    cwd: home,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, stderr: code === 0 ? "" : stderr }).toEqual({ code: 0, stderr: "" });
  expect(stdout).toContain('{"login":"octocat"}');
  const seen = upstream.received.at(-1)!;
  expect(seen.url).toBe("/user");
  expect(seen.rawHeaders.find(([name]) => name.toLowerCase() === "authorization")?.[1]).toBe(`Bearer ${SECRET}`);
  // The agent never held the token: not in anything the commands printed.
  expect(stdout + stderr).not.toContain(SECRET);
  // Five steps from an empty data directory (the invite's link and the agent's own login are set-up lines).
  expect(
    readmeLines()
      .split("\n")
      .filter((l) => l.startsWith("broker ")).length,
  ).toBeLessThanOrEqual(6);
}, 90_000);
