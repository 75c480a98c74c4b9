// `broker auth login --sso`: identity-provider sign-in for the terminal. A listener on 127.0.0.1 (a
// random port) receives a one-time code from the person's browser; the code and this process's
// nonce are exchanged for a broker session. Never sees the provider's tokens; never prints a code.

import { randomBytes } from "node:crypto";
import { Secret } from "../../secret.ts";
import { ApiFailure, type Client } from "./client.ts";
import { CliFailure } from "./fail.ts";
import type { OidcStatusBody, SignedInBody } from "../../contract/index.ts";

export const SSO_TIMEOUT_MS = 5 * 60_000;
/** How long the browser's callback page waits for the exchange before answering anyway. */
const REPLY_WAIT_MS = 30_000;
/** The one-time code's shape: URL-safe characters only, so nothing odd reaches the request body. */
const CODE_SHAPE = /^[A-Za-z0-9._~-]{1,512}$/;

export interface SsoOptions {
  /** Shows the sign-in link to the person (the CLI prints it). */
  readonly show: (link: string, providerName: string) => void;
  readonly timeoutMs?: number;
  /** Aborts the wait (Ctrl-C). */
  readonly signal?: AbortSignal;
}

/** Runs the whole terminal sign-in: status check, loopback listener, link, wait, exchange. */
export async function loginWithSso(client: Client, opts: SsoOptions): Promise<SignedInBody> {
  const name = await providerName(client);
  const nonce = randomBytes(32).toString("base64url"); // 43 characters; binds the code to this process
  await using receiver = startCallbackReceiver();
  opts.show(`${client.addr}/v1/auth/oidc/login?cli_port=${receiver.port}&cli_nonce=${nonce}`, name);
  const code = await waitFor(receiver.code, opts.timeoutMs ?? SSO_TIMEOUT_MS, opts.signal);
  try {
    const res = await client.request<SignedInBody>("POST", "/v1/auth/oidc/cli-exchange", { body: { code, cli_nonce: nonce }, anonymous: true });
    receiver.reply(true);
    return res;
  } catch (err) {
    receiver.reply(false);
    if (err instanceof ApiFailure && (err.status === 401 || err.status === 400)) {
      throw new CliFailure(
        "the broker refused the sign-in code (expired, already used, or issued to another terminal)",
        "run `broker auth login --sso` again and finish in the browser within a few minutes",
      );
    }
    throw err;
  }
}

/** The provider's label, or a failure saying the broker has identity-provider sign-in off. */
async function providerName(client: Client): Promise<string> {
  const off = new CliFailure(
    `identity-provider sign-in is not enabled on the broker at ${client.addr}`,
    "log in with your password instead: `broker auth login --email <you>` (the operator enables it with BROKER_OIDC_ISSUER, BROKER_OIDC_CLIENT_ID and BROKER_OIDC_CLIENT_SECRET)",
  );
  const status = await client.request<OidcStatusBody>("GET", "/v1/auth/oidc", { anonymous: true }).catch((err: unknown) => {
    if (err instanceof ApiFailure && err.status === 404) throw off; // a broker from before identity-provider sign-in
    throw err;
  });
  if (status?.enabled !== true) throw off;
  return typeof status.name === "string" && status.name ? status.name : "your identity provider";
}

interface CallbackReceiver {
  readonly port: number;
  /** The one-time code from the first well-formed callback. */
  readonly code: Promise<Secret>;
  /** Tells the waiting browser tab how the exchange went. */
  reply(ok: boolean): void;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A one-shot HTTP listener on 127.0.0.1 for `GET /callback?code=…`; anything else is 404 and ignored. */
export function startCallbackReceiver(): CallbackReceiver {
  let deliver!: (code: Secret) => void;
  const code = new Promise<Secret>((resolve) => (deliver = resolve));
  let answer!: (ok: boolean) => void;
  const answered = new Promise<boolean>((resolve) => (answer = resolve));
  let taken = false;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const url = new URL(req.url);
      // Only our own address: a page on another name rebound to 127.0.0.1 gets nothing (DNS rebinding).
      if (req.headers.get("host") !== `127.0.0.1:${server.port}` || req.method !== "GET" || url.pathname !== "/callback")
        return page(404, "Not found", "There is nothing here.");
      if (taken) return page(409, "Already done", "This sign-in has finished. Return to the terminal.");
      const raw = url.searchParams.get("code") ?? "";
      if (!CODE_SHAPE.test(raw)) return page(400, "Sign-in incomplete", "This address has no sign-in code. Start again from the terminal.");
      taken = true;
      deliver(new Secret(raw));
      const ok = await Promise.race([answered, delay(REPLY_WAIT_MS, undefined)]);
      if (ok === undefined) return page(200, "Return to the terminal", "The sign-in is taking long. Check the terminal for the result.");
      return ok
        ? page(200, "Signed in", "The terminal is now signed in to the broker. You can close this tab.")
        : page(401, "Sign-in failed", "The broker refused the sign-in. Check the terminal for what to do next; you can close this tab.");
    },
  });
  return {
    port: server.port!,
    code,
    reply: (ok) => answer(ok),
    async [Symbol.asyncDispose]() {
      answer(false);
      // A waiting tab gets its page first (every page closes its connection); then the listener goes, whatever is left open.
      await Promise.race([server.stop(), delay(1000, undefined)]);
      await server.stop(true);
    },
  };
}

/** Resolves with `p`, or fails when the time runs out or the person presses Ctrl-C. */
async function waitFor<T>(p: Promise<T>, ms: number, signal: AbortSignal | undefined): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new CliFailure(`no sign-in arrived within ${spell(ms)}`, "run `broker auth login --sso` again and open the link it prints")),
      ms,
    );
    onAbort = () => reject(new CliFailure("cancelled", undefined, 130));
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([p, stop]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  }
}

/** 300000 → "5 minutes", 100 → "1 second". */
function spell(ms: number): string {
  const s = Math.max(1, Math.round(ms / 1000));
  const [n, unit] = s % 60 === 0 ? [s / 60, "minute"] : [s, "second"];
  return `${n} ${unit}${n === 1 ? "" : "s"}`;
}

/** Resolves with `value` after `ms`, without keeping the process alive for it. */
function delay<T>(ms: number, value: T): Promise<T> {
  return new Promise((resolve) => setTimeout(resolve, ms, value).unref());
}

function page(status: number, title: string, text: string): Response {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title} · Broker</title></head><body><h1>${title}</h1><p>${text}</p></body></html>`;
  return new Response(html, {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": "default-src 'none'",
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
      connection: "close",
    },
  });
}
