// `--identity-token-file` / BROKER_IDENTITY_TOKEN_FILE (issue 39): a workload's platform token (a GitHub Actions or
// GitLab CI OIDC token, a Kubernetes projected service-account token, a SPIFFE JWT-SVID) is exchanged at
// POST /v1/sessions/exchange for a session bound to the vault its binding names, instead of a stored broker token.
// The platform token is read from the file, sent inside a Secret, and never printed. While the command runs, the file
// is read again every few seconds: a token the platform rotated renews the running session (its holder cannot swap
// tokens), presented with the session as the bearer.

import { readFileSync } from "node:fs";
import { Secret } from "../../secret.ts";
import type { ScopedSessionListBody, TokenExchangeAnswerBody } from "../../contract/index.ts";
import { apiPath, createClient, type Client } from "./client.ts";
import { CliFailure } from "./fail.ts";

export const TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:jwt";

/** A session a platform token was exchanged for, as `vault run` uses one it minted. */
export interface ExchangedSession {
  readonly id: string;
  readonly token: string; // SECRET: never log
  readonly vault: string;
  readonly proxy_port: number | null;
  /** A client authenticated as the session (it may list and revoke itself). */
  readonly client: Client;
}

/** How often the token file is read again while a command runs (Kubernetes rotates at 80% of a token's life). */
export const IDENTITY_TOKEN_POLL_MS = 2_000;

function readTokenFile(path: string): Secret {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    throw new CliFailure(`cannot read the identity token file ${path}`, "check the path your platform writes its token to");
  }
  const token = text.trim();
  if (!token) throw new CliFailure(`the identity token file ${path} is empty`, "check that the platform has written its token");
  return new Secret(token);
}

export async function exchangeIdentityToken(client: Client, path: string, wantVault?: string): Promise<ExchangedSession> {
  const body = { grant_type: TOKEN_EXCHANGE_GRANT, subject_token: readTokenFile(path), subject_token_type: JWT_TOKEN_TYPE };
  const answer = await client.request<TokenExchangeAnswerBody>("POST", apiPath("v1", "sessions", "exchange"), { body, anonymous: true });
  if (wantVault && wantVault !== answer.vault) {
    throw new CliFailure(
      `the token's binding is for vault ${answer.vault}, not ${wantVault}`,
      "drop --vault, or ask the owner to bind this workload to that vault",
    );
  }
  const own = createClient({ addr: client.addr, token: new Secret(answer.access_token) });
  // A scoped session lists only itself: its id, to revoke it when the command exits.
  const list = await own.request<ScopedSessionListBody>("GET", `${apiPath("v1", "sessions")}?vault=${encodeURIComponent(answer.vault)}`);
  const id = list.sessions[0]?.id;
  if (!id) throw new CliFailure("the exchanged session is not live", "try again; if it persists, run `broker doctor`");
  return { id, token: answer.access_token, vault: answer.vault, proxy_port: answer.proxy_port, client: own };
}

/**
 * Reads the token file every `intervalMs` while the command runs; a changed token renews the session. A failed read or
 * renewal is said once on stderr (the session still lasts until it expires). `stop()` ends the watch.
 */
export function watchIdentityToken(session: ExchangedSession, path: string, opts: { intervalMs?: number; note: (line: string) => void }): { stop(): void } {
  let last = safeRead(path);
  let said = "";
  let busy = false;
  const say = (line: string) => {
    if (line !== said) opts.note((said = line));
  };
  const timer = setInterval(async () => {
    if (busy) return;
    const now = safeRead(path);
    if (now === undefined || now === last) return;
    busy = true;
    try {
      const body = { grant_type: TOKEN_EXCHANGE_GRANT, subject_token: new Secret(now), subject_token_type: JWT_TOKEN_TYPE };
      await session.client.request<TokenExchangeAnswerBody>("POST", apiPath("v1", "sessions", "exchange"), { body });
      last = now;
      said = "";
    } catch (err) {
      last = now; // the same token would fail the same way: wait for the next one
      say(`the rotated identity token could not renew this run's session: ${err instanceof Error ? err.message : "unknown error"}`);
    } finally {
      busy = false;
    }
  }, opts.intervalMs ?? IDENTITY_TOKEN_POLL_MS);
  timer.unref?.();
  return { stop: () => clearInterval(timer) };
}

function safeRead(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
