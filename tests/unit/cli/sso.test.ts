// loginWithSso in-process, against a stub broker: the wait's time limit and Ctrl-C, each closing
// the loopback listener. The whole flow against the real server is tests/e2e/cli-sso.test.ts.

import { expect, test } from "bun:test";
import { createClient } from "../../../src/cli/kit/client.ts";
import { CliFailure } from "../../../src/cli/kit/fail.ts";
import { loginWithSso } from "../../../src/cli/kit/sso.ts";

const client = createClient({ addr: "http://broker.test", fetch: () => Response.json({ enabled: true, name: "Acme SSO" }) });

async function failureOf(p: Promise<unknown>): Promise<CliFailure> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(CliFailure);
  return err as CliFailure;
}

test("gives up after the time limit, says so, and closes the listener", async () => {
  let link = "";
  const err = await failureOf(loginWithSso(client, { timeoutMs: 100, show: (l) => void (link = l) }));
  expect(err.message).toBe("no sign-in arrived within 1 second");
  expect(err.hint).toContain("broker auth login --sso");
  const port = new URL(link).searchParams.get("cli_port");
  await expect(fetch(`http://127.0.0.1:${port}/callback?code=late`)).rejects.toThrow();
});

test("an abort (Ctrl-C) cancels with exit code 130", async () => {
  const abort = new AbortController();
  const err = await failureOf(loginWithSso(client, { signal: abort.signal, show: () => abort.abort() }));
  expect([err.message, err.exitCode]).toEqual(["cancelled", 130]);
});

test("the link names the broker's address, a loopback port and a 43-character nonce; the label falls back", async () => {
  const nameless = createClient({ addr: "http://broker.test", fetch: () => Response.json({ enabled: true }) });
  let shown: [string, string] = ["", ""];
  await failureOf(loginWithSso(nameless, { timeoutMs: 10, show: (l, n) => void (shown = [l, n]) }));
  expect(shown[0]).toMatch(/^http:\/\/broker\.test\/v1\/auth\/oidc\/login\?cli_port=\d+&cli_nonce=[A-Za-z0-9_-]{43}$/);
  expect(shown[1]).toBe("your identity provider");
});
